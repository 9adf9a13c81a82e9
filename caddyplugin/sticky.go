package caddyplugin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/lbpack/lbpack/sticky"
)

// StickyOptions are nginx's sticky sessions (its `sticky` directive): a
// request that names an upstream, by the policy's cookie, by a route it
// carries or by a session the policy learnt, goes to that upstream while it
// can take it; otherwise the policy's strategy picks as if the request named
// none. Exactly one of Cookie, Route and Learn is set.
type StickyOptions struct {
	// Cookie is `sticky cookie`: the policy sets a cookie naming the
	// upstream that served the request and sends the requests that bring
	// it back there.
	Cookie *StickyCookie `json:"cookie,omitempty"`

	// Route is `sticky route`: where the request carries the upstream's id
	// (its route, or the MD5 of its address), as "query:NAME",
	// "cookie:NAME" or "header:NAME"; the first one present and not empty
	// counts. The policy sets no cookie.
	Route []string `json:"route,omitempty"`

	// Learn is `sticky learn`: the policy learns which upstream serves a
	// session from the upstreams' answers.
	Learn *StickyLearn `json:"learn,omitempty"`
}

// StickyCookie is `sticky cookie NAME`, with nginx's attributes.
type StickyCookie struct {
	// Name is the cookie's name.
	Name string `json:"name"`
	// Expires is nginx's expires=: a time ("1h", "1d12h"), "max" or "0".
	// Empty: a session cookie.
	Expires string `json:"expires,omitempty"`
	// Domain and Path are the cookie's attributes; empty: none.
	Domain string `json:"domain,omitempty"`
	Path   string `json:"path,omitempty"`
	// HTTPOnly and Secure are the cookie's flags.
	HTTPOnly bool `json:"httponly,omitempty"`
	Secure   bool `json:"secure,omitempty"`
	// SameSite is strict, lax or none, in any case, written as given.
	SameSite string `json:"samesite,omitempty"`
	// Value is what the cookie's value is for an upstream: "nginx"
	// (default: its route, or the MD5 of its address as nginx has it),
	// "caddy" (the value Caddy's own cookie policy gives it, so that its
	// clients stay where they are) or "traefik" (Traefik's sticky cookie
	// value of the upstream's URL, http:// or https:// and the address).
	Value string `json:"value,omitempty"`
	// Secret keys the value: with value nginx, a keyed hash replaces the
	// MD5 of the address (which can be reversed by trying addresses); with
	// value caddy, Caddy's cookie policy's secret.
	Secret string `json:"secret,omitempty"`
}

// StickyLearn is `sticky learn`.
type StickyLearn struct {
	// Create are where a new session's id is read at the request's end,
	// first non-empty wins: usually the upstream's answer,
	// "upstream_cookie:NAME" or "upstream_header:NAME"; request sources
	// too.
	Create []string `json:"create"`
	// Lookup are where the request carries its session id:
	// "query:NAME", "cookie:NAME" or "header:NAME".
	Lookup []string `json:"lookup"`
	// Timeout: a session not used for this long is forgotten. Default 10m.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Header is nginx's header flag: learn when the upstream's response
	// header arrives. Caddy tells a selection policy only of the request's
	// end, so the policy learns then in both cases (and warns).
	Header bool `json:"header,omitempty"`
	// MaxSessions bounds the table; when it is full the least recently
	// used session goes. Default 8000 (nginx's 1 MB zone).
	MaxSessions int `json:"max_sessions,omitempty"`
}

// Value modes of StickyCookie.Value.
const (
	valueNginx   = "nginx"
	valueCaddy   = "caddy"
	valueTraefik = "traefik"
)

// stickiness is StickyOptions checked and ready for requests.
type stickiness struct {
	rule sticky.Rule // the cookie, the route's sources, or learn's
	// value computes a backend's id in the caddy and traefik value modes
	// (and nginx's with a secret) from its dial address; nil: core's id.
	value func(dial string) string
	learn *StickyLearn
}

// compile checks s and returns it ready for requests; scheme is the
// upstreams' URL scheme (Traefik's value hashes the URL). Errors name the
// options as the Caddyfile writes them.
func (s *StickyOptions) compile(scheme string) (*stickiness, error) {
	n := 0
	for _, set := range []bool{s.Cookie != nil, s.Route != nil, s.Learn != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("sticky: give exactly one of cookie, route and learn")
	}
	st := &stickiness{}
	var err error
	switch {
	case s.Cookie != nil:
		st.rule.Cookie, st.value, err = s.Cookie.compile(scheme)
	case s.Route != nil:
		st.rule.Route, err = sources("sticky route", s.Route, false)
	default:
		l := *s.Learn
		if l.Timeout == 0 {
			l.Timeout = caddy.Duration(sticky.DefaultTimeout)
		}
		if l.MaxSessions == 0 {
			l.MaxSessions = sticky.DefaultMaxSessions
		}
		switch {
		case len(l.Create) == 0:
			err = errors.New("sticky learn: create: missing (where the session's id is read at the request's end, e.g. create upstream_cookie:sess)")
		case len(l.Lookup) == 0:
			err = errors.New("sticky learn: lookup: missing (where the request carries its session's id, e.g. lookup cookie:sess)")
		case l.Timeout < 0:
			err = fmt.Errorf("sticky learn timeout %v: want a positive duration", time.Duration(l.Timeout))
		case l.MaxSessions < 0:
			err = fmt.Errorf("sticky learn max_sessions %d: want a whole number of at least 1", l.MaxSessions)
		}
		if err == nil {
			st.rule.Create, err = sources("sticky learn create", l.Create, true)
		}
		if err == nil {
			st.rule.Lookup, err = sources("sticky learn lookup", l.Lookup, false)
		}
		st.learn = &l
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// compile checks the cookie's options and returns nginx's cookie and the
// value function of its mode (nil: core's ids).
func (c *StickyCookie) compile(scheme string) (*sticky.Cookie, func(string) string, error) {
	out := &sticky.Cookie{Name: c.Name, Domain: c.Domain, Path: c.Path, HTTPOnly: c.HTTPOnly, Secure: c.Secure, SameSite: c.SameSite}
	if c.Expires != "" {
		age, err := sticky.ParseExpires(c.Expires)
		if err != nil {
			return nil, nil, fmt.Errorf("sticky cookie expires %q: want a time such as 1h or 1d12h, max, or 0", c.Expires)
		}
		if age == 0 {
			age = -1 // nginx's expires=0: expires now
		}
		out.MaxAge = age
	}
	if err := out.Validate(); err != nil {
		return nil, nil, err
	}
	secret := c.Secret
	var value func(string) string
	switch c.Value {
	case "", valueNginx:
		if secret != "" {
			value = func(dial string) string { return sticky.SecretID(secret, dial) }
		}
	case valueCaddy:
		value = func(dial string) string { return sticky.CaddyValue(secret, dial) }
	case valueTraefik:
		if secret != "" {
			return nil, nil, errors.New("sticky cookie secret: Traefik's value has no secret (only value nginx and value caddy take one)")
		}
		value = func(dial string) string { return sticky.TraefikValue(scheme + "://" + dial) }
	default:
		return nil, nil, fmt.Errorf("sticky cookie value %q: want nginx, caddy or traefik", c.Value)
	}
	return out, value, nil
}

// sources parses the sources of a sticky option (what names it in errors);
// upstream says whether the upstream's answer may be read.
func sources(what string, in []string, upstream bool) ([]sticky.Source, error) {
	out, _, err := sticky.ParseSources(in, upstream)
	if err != nil {
		return nil, fmt.Errorf("%s %v", what, err)
	}
	return out, nil
}

// unmarshalSticky reads a `sticky` option, the dispenser on its name:
//
//	sticky cookie <name> {
//		expires  <time>|max|0
//		domain   <domain>
//		path     <path>
//		httponly
//		secure
//		samesite strict|lax|none
//		value    nginx|caddy|traefik
//		secret   <secret>
//	}
//	sticky route <source>...
//	sticky learn {
//		create       <source>...
//		lookup       <source>...
//		timeout      <duration>
//		header
//		max_sessions <n>
//	}
func unmarshalSticky(d *caddyfile.Dispenser) (*StickyOptions, error) {
	if !d.NextArg() {
		return nil, d.Err("sticky: missing the kind (want cookie, route or learn)")
	}
	s := &StickyOptions{}
	switch kind := d.Val(); kind {
	case "cookie":
		if !d.NextArg() {
			return nil, d.Err("sticky cookie: missing the cookie's name")
		}
		s.Cookie = &StickyCookie{Name: d.Val()}
		if err := noMoreArgs(d, "sticky cookie "+d.Val()); err != nil {
			return nil, err
		}
		if err := unmarshalCookie(d, s.Cookie); err != nil {
			return nil, err
		}
	case "route":
		s.Route = d.RemainingArgs()
		if len(s.Route) == 0 {
			return nil, d.Err("sticky route: missing the sources (e.g. sticky route query:route cookie:route)")
		}
		if d.NextBlock(d.Nesting()) {
			return nil, d.Errf("sticky route: unexpected block at %q", d.Val())
		}
	case "learn":
		if err := noMoreArgs(d, "sticky learn"); err != nil {
			return nil, err
		}
		s.Learn = &StickyLearn{}
		if err := unmarshalLearn(d, s.Learn); err != nil {
			return nil, err
		}
	default:
		return nil, d.Errf("sticky %q: unknown kind (want cookie, route or learn)", kind)
	}
	if _, err := s.compile("http"); err != nil {
		return nil, d.Err(err.Error())
	}
	return s, nil
}

// unmarshalCookie reads sticky cookie's block.
func unmarshalCookie(d *caddyfile.Dispenser, c *StickyCookie) error {
	flags := map[string]*bool{"httponly": &c.HTTPOnly, "secure": &c.Secure}
	values := map[string]*string{"expires": &c.Expires, "domain": &c.Domain, "path": &c.Path,
		"samesite": &c.SameSite, "value": &c.Value, "secret": &c.Secret}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		what := "sticky cookie " + name
		if seen[name] {
			return d.Errf("%s: given twice", what)
		}
		seen[name] = true
		if f := flags[name]; f != nil {
			*f = true
		} else if v := values[name]; v != nil {
			if !d.NextArg() || d.Val() == "" {
				return d.Errf("%s: missing the value", what)
			}
			*v = d.Val()
		} else {
			return d.Errf("sticky cookie: unknown option %q (want expires, domain, path, httponly, secure, samesite, value or secret)", name)
		}
		if err := noMoreArgs(d, what); err != nil {
			return err
		}
	}
	return nil
}

// unmarshalLearn reads sticky learn's block.
func unmarshalLearn(d *caddyfile.Dispenser, l *StickyLearn) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		what := "sticky learn " + name
		if seen[name] && name != "create" && name != "lookup" {
			return d.Errf("%s: given twice", what)
		}
		seen[name] = true
		switch name {
		case "create", "lookup":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Errf("%s: missing the sources", what)
			}
			if name == "create" {
				l.Create = append(l.Create, args...)
			} else {
				l.Lookup = append(l.Lookup, args...)
			}
			continue
		case "header":
			l.Header = true
		case "timeout":
			dur, err := durationArg(d, what)
			l.Timeout = dur
			if err != nil {
				return err
			}
			continue
		case "max_sessions":
			if !d.NextArg() {
				return d.Errf("%s: missing the count", what)
			}
			n, err := parseCount(d.Val(), what)
			if err != nil {
				return d.Err(err.Error())
			}
			l.MaxSessions = n
		default:
			return d.Errf("sticky learn: unknown option %q (want create, lookup, timeout, header or max_sessions)", name)
		}
		if err := noMoreArgs(d, what); err != nil {
			return err
		}
	}
	return nil
}

// checkRoute checks a route= value: what nginx accepts (not empty, at most
// 32 bytes) that a cookie can carry.
func checkRoute(what, route string) error {
	switch {
	case route == "":
		return fmt.Errorf("%s: empty", what)
	case len(route) > 32:
		return fmt.Errorf("%s %q: longer than 32 bytes (nginx's limit)", what, route)
	}
	if i := strings.IndexFunc(route, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == ';' || r == ',' || r == '"' || r == '\\' }); i >= 0 {
		return fmt.Errorf("%s %q: %q cannot be in a cookie's value", what, route, route[i])
	}
	return nil
}

// setCookie puts the cookie value v on h: in place of prev, the value this
// request's earlier try set, so that one header names the last upstream
// tried; else before every other Set-Cookie header, as nginx puts its own
// before the upstream's.
func setCookie(h http.Header, prev, v string) {
	vs := h["Set-Cookie"]
	for i, old := range vs {
		if prev != "" && old == prev {
			vs[i] = v
			return
		}
	}
	h["Set-Cookie"] = append([]string{v}, vs...)
}

// upstreamHeader gathers the headers of the upstream's answer that srcs
// read, from the placeholders Caddy's reverse proxy sets when the answer's
// header arrives ({http.reverse_proxy.header.NAME}, the values joined by
// commas). nil when none is read.
func upstreamHeader(srcs []sticky.Source, get func(string) (any, bool)) http.Header {
	var h http.Header
	for _, s := range srcs {
		if !s.Upstream() {
			continue
		}
		name := "Set-Cookie"
		if k := s.String(); strings.HasPrefix(k, "upstream_header:") {
			name = http.CanonicalHeaderKey(strings.TrimPrefix(k, "upstream_header:"))
		}
		v, ok := get(responseHeaderPrefix + name)
		str, isStr := v.(string)
		if !ok || !isStr {
			continue
		}
		if h == nil {
			h = make(http.Header)
		}
		if name == "Set-Cookie" {
			h[name] = splitSetCookie(str)
		} else {
			h[name] = []string{str}
		}
	}
	return h
}

// responseHeaderPrefix is where Caddy's reverse proxy puts the upstream's
// response headers.
const responseHeaderPrefix = "http.reverse_proxy.header."

// splitSetCookie splits the Set-Cookie headers Caddy joined with commas.
// A comma also appears in an expires date ("Wed, 02-Dec-26 ..."): a piece
// starts a new cookie only when it has "NAME=" before its first ";".
func splitSetCookie(joined string) []string {
	var out []string
	for _, piece := range strings.Split(joined, ",") {
		head := piece
		if i := strings.IndexByte(head, ';'); i >= 0 {
			head = head[:i]
		}
		if len(out) > 0 && !strings.Contains(head, "=") {
			out[len(out)-1] += "," + piece
			continue
		}
		out = append(out, strings.TrimLeft(piece, " "))
	}
	return out
}
