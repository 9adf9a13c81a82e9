package traefikplugin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// Sticky sessions, nginx's sticky directive (package sticky holds what is
// nginx-exact; this file reads the settings and applies them to a
// request). A request's sticky id, read from its cookie, from the sources
// of route, or from learn's session table, goes to core.Pick as
// Filter.Sticky: the server of that id gets the request when it can take
// it, and the strategy picks otherwise.
//
// In proxy mode the middleware sets its cookie on every answer it gives
// after choosing a server, naming the last server tried, before the
// server's own Set-Cookie headers. In steer mode the client-facing cookie
// is the middleware's too: it reads it from the request before it
// replaces the service's cookie (which steers Traefik's balancer and never
// reaches the client), and sets it on the answer that comes back through
// the service, naming the server Traefik used.

// Sticky is the sticky directive: exactly one of Cookie, Route and Learn.
type Sticky struct {
	// Cookie is nginx's sticky cookie: the middleware names the chosen
	// server in a cookie of its own, which binds the client to it.
	Cookie StickyCookie
	// Route is nginx's sticky route: where a request names its server's
	// id (a server's route, or the MD5 of its address), the first
	// non-empty one winning: query:NAME, cookie:NAME or header:NAME.
	Route []string
	// Learn is nginx's sticky learn: sessions the servers create, bound to
	// the server that served them.
	Learn StickyLearn
	// Unknown collects the keys that match no setting (see Config.Unknown).
	Unknown map[string]interface{} `mapstructure:",remain"`
}

// StickyCookie is nginx's `sticky cookie`, with Traefik's key names where
// Traefik's sticky.cookie has one.
type StickyCookie struct {
	// Name is the cookie's name; setting it turns the cookie on.
	Name string
	// MaxAge is nginx's expires= in seconds (0: a session cookie; -1:
	// nginx's expires=0, which has the client drop the cookie).
	MaxAge int
	// Expires is nginx's expires= as nginx writes it: max, or a time
	// such as 1h or 1d12h; not with MaxAge.
	Expires string
	// Domain and Path are the cookie's attributes; empty leaves them out.
	Domain string
	Path   string
	// HTTPOnly and Secure are the cookie's flags.
	HTTPOnly bool
	Secure   bool
	// SameSite is strict, lax or none in any case, written as given.
	SameSite string
	// Value is what the cookie's value is for a server: nginx (the
	// default: its route, or the MD5 of its address), caddy (Caddy's
	// cookie lb_policy: the HMAC-SHA256 of its host:port keyed by Secret)
	// or traefik (Traefik's sticky cookie: from its URL as written, since
	// Traefik v3.3.4), so that clients bound by the host the middleware
	// replaces keep their server.
	Value string
	// Secret keys the value: with value nginx, an id that does not reveal
	// the server's address; with value caddy, Caddy's secret.
	Secret string
	// Unknown collects the keys that match no setting (see Config.Unknown).
	Unknown map[string]interface{} `mapstructure:",remain"`
}

// StickyLearn is nginx's `sticky learn`.
type StickyLearn struct {
	// Create are the sources of a session a server creates, the first
	// non-empty one winning; upstream_cookie:NAME and upstream_header:NAME
	// read the server's answer.
	Create []string
	// Lookup are the sources of the session a request belongs to.
	Lookup []string
	// Timeout is how long a session lives unused (default "10m").
	Timeout string
	// Header learns from the server's response header, before its body,
	// instead of at the request's end.
	Header bool
	// MaxSessions bounds the table (default 8000, nginx's for a 1m
	// zone); when it is full the least recently used session goes.
	MaxSessions int
	// Unknown collects the keys that match no setting (see Config.Unknown).
	Unknown map[string]interface{} `mapstructure:",remain"`
}

// Value modes of sticky.cookie.value.
const (
	valueNginx   = "nginx"
	valueCaddy   = "caddy"
	valueTraefik = "traefik"
)

// stickySettings is a validated Sticky.
type stickySettings struct {
	rule    sticky.Rule // the mode: its cookie, route sources, or learn's
	timeout time.Duration
	max     int // 0: sticky.DefaultMaxSessions
	header  bool
}

// learns reports whether the settings are learn's.
func (ss *stickySettings) learns() bool { return ss.rule.Lookup != nil }

// sessionsKey is what learn's session table is made with, "" for none: a
// reload that keeps it keeps the table.
func sessionsKey(ss *stickySettings) string {
	if ss == nil || !ss.learns() {
		return ""
	}
	return fmt.Sprintf("%v/%d", ss.timeout, ss.max)
}

// parseSticky reads c.Sticky, and sets each backend's Route from its
// server's route or the cookie's value mode; nil when sticky is off.
func parseSticky(c *Config, backends []core.Backend, rawURLs []string) (*stickySettings, error) {
	st := c.Sticky
	ck := st.Cookie
	cookieSet := ck.Name != "" || ck.MaxAge != 0 || ck.Expires != "" || ck.Domain != "" || ck.Path != "" ||
		ck.HTTPOnly || ck.Secure || ck.SameSite != "" || ck.Value != "" || ck.Secret != ""
	learnSet := len(st.Learn.Create) > 0 || len(st.Learn.Lookup) > 0 || st.Learn.Timeout != "" || st.Learn.Header || st.Learn.MaxSessions != 0
	modes := 0
	for _, set := range []bool{cookieSet, len(st.Route) > 0, learnSet} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		return nil, errors.New("sticky: set one of cookie, route and learn")
	}
	if err := serverRoutes(c, backends, rawURLs, ck); err != nil {
		return nil, err
	}
	switch {
	case cookieSet:
		return parseStickyCookie(ck)
	case len(st.Route) > 0:
		srcs, err := sources("sticky.route", st.Route, false)
		if err != nil {
			return nil, err
		}
		return &stickySettings{rule: sticky.Rule{Route: srcs}}, nil
	case learnSet:
		return parseLearn(st.Learn)
	}
	return nil, nil
}

// serverRoutes sets each backend's Route: its server's route (nginx's
// route=), or the id the cookie's value mode gives it.
func serverRoutes(c *Config, backends []core.Backend, rawURLs []string, ck StickyCookie) error {
	mode := ck.Value
	switch mode {
	case "", valueNginx, valueCaddy, valueTraefik:
	default:
		return fmt.Errorf("sticky.cookie.value %q: want nginx (the default), caddy or traefik", ck.Value)
	}
	if mode == valueTraefik && ck.Secret != "" {
		return errors.New("sticky.cookie.secret: Traefik's cookie value has no secret (value traefik)")
	}
	for i, sv := range c.Servers {
		if sv.Drain && sv.Down {
			return fmt.Errorf("servers[%d]: down and drain are one setting in nginx (the last written wins); set one", i)
		}
		backends[i].Drain = sv.Drain
		if sv.Route != "" {
			if mode == valueCaddy || mode == valueTraefik {
				return fmt.Errorf("servers[%d].route %q: the cookie's value is %s's (sticky.cookie.value %s), not a route", i, sv.Route, mode, mode)
			}
			if len(sv.Route) > 32 {
				return fmt.Errorf("servers[%d].route %q: longer than 32 bytes (nginx's limit)", i, sv.Route)
			}
			backends[i].Route = sv.Route
			continue
		}
		switch {
		case mode == valueCaddy:
			backends[i].Route = sticky.CaddyValue(ck.Secret, backends[i].Address)
		case mode == valueTraefik:
			backends[i].Route = sticky.TraefikValue(rawURLs[i])
		case ck.Secret != "":
			backends[i].Route = sticky.SecretID(ck.Secret, backends[i].Address)
		}
	}
	return nil
}

// parseStickyCookie reads sticky.cookie, naming each key as written.
func parseStickyCookie(ck StickyCookie) (*stickySettings, error) {
	if ck.Name == "" {
		return nil, errors.New("sticky.cookie.name: missing (the cookie's name turns it on)")
	}
	if err := (&http.Cookie{Name: ck.Name, Value: "v"}).Valid(); err != nil {
		return nil, fmt.Errorf("sticky.cookie.name %q: not a valid cookie name", ck.Name)
	}
	c := &sticky.Cookie{Name: ck.Name, MaxAge: int64(ck.MaxAge), Domain: ck.Domain, Path: ck.Path,
		HTTPOnly: ck.HTTPOnly, Secure: ck.Secure, SameSite: ck.SameSite}
	if ck.MaxAge < -1 {
		return nil, fmt.Errorf("sticky.cookie.maxAge %d: want seconds, 0 for a session cookie, or -1 (nginx's expires=0)", ck.MaxAge)
	}
	if ck.Expires != "" {
		if ck.MaxAge != 0 {
			return nil, fmt.Errorf("sticky.cookie.expires %q: not with maxAge (%d); set one", ck.Expires, ck.MaxAge)
		}
		n, err := sticky.ParseExpires(ck.Expires)
		if err != nil {
			return nil, fmt.Errorf("sticky.cookie.expires %q: want max, or a time such as 1h or 1d12h (nginx's expires=)", ck.Expires)
		}
		if n == 0 {
			n = -1 // nginx's expires=0
		}
		c.MaxAge = n
	}
	for _, f := range []struct{ key, v string }{{"domain", ck.Domain}, {"path", ck.Path}} {
		if strings.ContainsAny(f.v, "; \t\r\n\"") {
			return nil, fmt.Errorf("sticky.cookie.%s %q: a cookie attribute cannot hold ';', a space or a quote", f.key, f.v)
		}
	}
	switch strings.ToLower(ck.SameSite) {
	case "", "strict", "lax", "none":
	default:
		return nil, fmt.Errorf("sticky.cookie.sameSite %q: want strict, lax or none", ck.SameSite)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("sticky.cookie: %v", err)
	}
	return &stickySettings{rule: sticky.Rule{Cookie: c}}, nil
}

// parseLearn reads sticky.learn.
func parseLearn(l StickyLearn) (*stickySettings, error) {
	if len(l.Create) == 0 {
		return nil, errors.New("sticky.learn.create: missing (where the servers' answers name a new session, such as upstream_cookie:NAME)")
	}
	if len(l.Lookup) == 0 {
		return nil, errors.New("sticky.learn.lookup: missing (where a request names its session, such as cookie:NAME)")
	}
	ss := &stickySettings{header: l.Header, timeout: sticky.DefaultTimeout, max: l.MaxSessions}
	var err error
	if ss.rule.Create, err = sources("sticky.learn.create", l.Create, true); err != nil {
		return nil, err
	}
	if ss.rule.Lookup, err = sources("sticky.learn.lookup", l.Lookup, false); err != nil {
		return nil, err
	}
	if l.Timeout != "" {
		if ss.timeout, err = duration("sticky.learn.timeout", l.Timeout, true); err != nil {
			return nil, err
		}
	}
	if l.MaxSessions < 0 {
		return nil, fmt.Errorf("sticky.learn.maxSessions %d: must be positive (default %d)", l.MaxSessions, sticky.DefaultMaxSessions)
	}
	return ss, nil
}

// sources parses a list of sticky sources; upstream says whether the
// upstream's answer may be one.
func sources(key string, list []string, upstream bool) ([]sticky.Source, error) {
	out, k, err := sticky.ParseSources(list, upstream)
	if err != nil {
		return nil, fmt.Errorf("%s[%d] %v", key, k, err)
	}
	return out, nil
}

// setStickyCookie puts the cookie naming server i (its id in b), picked
// at time picked, into the answer's headers h, before any Set-Cookie
// header already there (the server's own).
func setStickyCookie(h http.Header, c *sticky.Cookie, b *core.Balancer, i int, picked time.Time) {
	h["Set-Cookie"] = append([]string{c.Header(b.ID(i), picked)}, h["Set-Cookie"]...)
}

// learn is sticky learn's learning from a try to server i of b that got
// an answer with headers h: the session the answer creates, or the one the
// request names, is bound to the server.
func learn(ss *stickySettings, sessions *sticky.Sessions, r *http.Request, h http.Header, b *core.Balancer, i int) {
	create := sticky.First(ss.rule.Create, r, h)
	lookup := ""
	if create == "" {
		if lookup = sticky.First(ss.rule.Lookup, r, nil); lookup == "" {
			return
		}
	}
	sessions.Learn(create, lookup, b.ID(i), time.Now())
}
