package nginxconf

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/lbpack/lbpack/sticky"
)

// Sticky is an upstream's sticky directive (open source since nginx
// 1.29.6): exactly one of Cookie, Route and Learn is set.
type Sticky struct {
	Pos Pos
	// Cookie is sticky cookie's name and attributes, as package sticky
	// holds them.
	Cookie *sticky.Cookie
	// Route is sticky route's variables, as lbpack's sources
	// (query:NAME, cookie:NAME, header:NAME), in the order written.
	Route []string
	Learn *StickyLearn
}

// StickyLearn is sticky learn: the sources of the session id to create
// (from the upstream's answer, usually) and to look up (in the request).
type StickyLearn struct {
	Create, Lookup []string
	// Zone is zone='s NAME:SIZE as written; ZoneSize the size in bytes.
	Zone     string
	ZoneSize int64
	// Timeout is timeout=; 0 when not written (nginx's 10m).
	Timeout time.Duration
	Header  bool
	// MaxSessions is how many sessions lbpack keeps: what nginx's zone
	// holds by its source's note (1m, about 8000 sessions).
	MaxSessions int
}

// nginx's limits and markers for sticky (ngx_http_upstream_sticky_module.c,
// ngx_http_upstream.c).
const (
	maxRouteLen       = 32       // NGX_HTTP_UPSTREAM_SID_LEN
	minStickyZone     = 8 * 4096 // eight pages of 4 KB
	sessionsPerMegaby = 8000     // "1m ~ 8000 sessions"
)

// stickyError is nginx's message for a sticky parameter its handler
// returns: nginx prefixes it with the directive's name.
func stickyError(d *Directive, msg string) error {
	return errorf(d.Pos, `"sticky" directive %s`, msg)
}

// sticky reads a sticky directive into u, refusing what nginx 1.31
// refuses with nginx's message, and what lbpack cannot evaluate.
func (l *loader) sticky(u *Upstream, d *Directive) error {
	if len(d.Args) < 2 {
		return errorf(d.Pos, `invalid number of arguments in "sticky" directive`)
	}
	st := &Sticky{Pos: d.Pos}
	var err error
	switch d.Args[0] {
	case "cookie":
		st.Cookie, err = stickyCookie(d)
	case "route":
		st.Route, err = stickyRoute(d)
	case "learn":
		st.Learn, err = l.stickyLearn(u, d)
	default:
		return errorf(d.Pos, "unknown parameter %q", d.Args[0])
	}
	if err != nil {
		return err
	}
	u.Sticky = st
	return nil
}

// stickyCookie reads sticky cookie NAME [expires=] [domain=] [path=]
// [httponly] [secure] [samesite=] by package sticky's rules, which are
// nginx's, and gives its errors nginx's form: "unknown parameter" alone,
// the others after the directive's name. Variables, which nginx evaluates
// for each request in domain= and samesite=, are refused naming them.
func stickyCookie(d *Directive) (*sticky.Cookie, error) {
	for _, a := range d.Args[2:] {
		if key, val, _ := strings.Cut(a, "="); (key == "domain" || key == "samesite") && strings.Contains(val, "$") {
			return nil, errorf(d.Pos, "sticky cookie %s: lbpack writes a fixed %s, where nginx evaluates the variables for each request: write the value itself", a, key)
		}
	}
	c, err := sticky.ParseCookie(d.Args[1], d.Args[2:])
	switch {
	case err == nil:
		return &c, nil
	case strings.HasPrefix(err.Error(), "unknown parameter"):
		return nil, errorf(d.Pos, "%v", err)
	case strings.Contains(err.Error(), "variable"):
		return nil, errorf(d.Pos, "sticky cookie %v", err) // lbpack's refusal
	}
	return nil, stickyError(d, err.Error())
}

// stickyRoute reads sticky route $a [$b ...] as lbpack's sources.
func stickyRoute(d *Directive) ([]string, error) {
	var srcs []string
	for _, a := range d.Args[1:] {
		if !strings.HasPrefix(a, "$") {
			return nil, errorf(d.Pos, "invalid variable name %q", a)
		}
		src, err := stickySource(d, "sticky route", a, false)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, src)
	}
	return srcs, nil
}

// stickySource maps a variable of sticky route or learn ($NAME, as
// written) to the source lbpack reads: $arg_X is query:X (the raw
// argument), $cookie_X cookie:X, $http_X header:X with dashes for
// underscores (nginx compares a header's name in lower case, dashes read
// as underscores); with upstream (learn's create=), $upstream_cookie_X is
// upstream_cookie:X (the upstream's Set-Cookie) and $upstream_http_X
// upstream_header:X. Any other variable is refused: lbpack cannot
// evaluate it.
func stickySource(d *Directive, what, v string, upstream bool) (string, error) {
	name := strings.TrimPrefix(v, "$")
	if name == "" {
		return "", errorf(d.Pos, `invalid variable name "$"`)
	}
	type prefix struct{ nginx, lbpack string }
	prefixes := []prefix{{"arg_", "query:"}, {"cookie_", "cookie:"}, {"http_", "header:"}}
	if upstream {
		prefixes = append(prefixes, prefix{"upstream_cookie_", "upstream_cookie:"}, prefix{"upstream_http_", "upstream_header:"})
	}
	lower := strings.ToLower(name) // nginx's variable names have no case
	for _, p := range prefixes {
		rest, ok := strings.CutPrefix(lower, p.nginx)
		if !ok || rest == "" {
			continue
		}
		rest = name[len(p.nginx):]
		header := strings.HasSuffix(p.lbpack, "header:")
		for i := 0; i < len(rest); i++ {
			if c := rest[i]; !isNameByte(c) && (header || c != '-' && c != '.') {
				return "", errorf(d.Pos, "%s %s: %q cannot be in the name lbpack reads", what, v, c)
			}
		}
		if header {
			rest = headerName(rest)
		}
		return p.lbpack + rest, nil
	}
	if !upstream && strings.HasPrefix(lower, "upstream_") {
		return "", errorf(d.Pos, "%s %s: read before the upstream answers, where nginx finds it empty: nothing would ever be looked up", what, v)
	}
	want := "$arg_NAME, $cookie_NAME or $http_NAME"
	if upstream {
		want = "$arg_NAME, $cookie_NAME, $http_NAME, $upstream_cookie_NAME or $upstream_http_NAME"
	}
	return "", errorf(d.Pos, "%s %s: lbpack cannot evaluate this variable: it reads %s", what, v, want)
}

// stickyLearn reads sticky learn create=$v... lookup=$v... zone=NAME:SIZE
// [timeout=T] [header].
func (l *loader) stickyLearn(u *Upstream, d *Directive) (*StickyLearn, error) {
	ln := &StickyLearn{}
	var hasTimeout bool
	for _, a := range d.Args[1:] {
		_, val, _ := strings.Cut(a, "=")
		switch {
		case strings.HasPrefix(a, "zone="):
			if ln.ZoneSize != 0 {
				return nil, stickyError(d, "duplicate zone")
			}
			name, size, ok := strings.Cut(val, ":")
			switch {
			case !ok:
				return nil, stickyError(d, "zone size is not specified")
			case name == "":
				return nil, stickyError(d, "zone name is not specified")
			}
			n, ok := nginxSize(size)
			switch {
			case !ok:
				return nil, stickyError(d, "invalid zone size")
			case n < minStickyZone:
				return nil, stickyError(d, "zone is too small")
			}
			ln.Zone, ln.ZoneSize = val, n
		case strings.HasPrefix(a, "timeout="):
			if hasTimeout {
				return nil, stickyError(d, "duplicate timeout")
			}
			hasTimeout = true
			ms, ok := nginxTime(val, false)
			if !ok || ms == 0 {
				return nil, stickyError(d, "invalid timeout")
			}
			if ms > int64(maxDuration/time.Millisecond) {
				l.warn(d, "timeout=%s: longer than lbpack holds: written as %s (about 292 years)", val, caddyDuration(maxDuration))
				ms = int64(maxDuration / time.Millisecond)
			}
			ln.Timeout = time.Duration(ms) * time.Millisecond
		case strings.HasPrefix(a, "create=") || strings.HasPrefix(a, "lookup="):
			param := a[:len("create")]
			if !strings.HasPrefix(val, "$") {
				return nil, stickyError(d, fmt.Sprintf("missing variable in the %q parameter", param))
			}
			// The lookup runs before the upstream answers: only create=
			// may read the answer.
			src, err := stickySource(d, "sticky learn "+param+"=", val, param == "create")
			if err != nil {
				return nil, err
			}
			if param == "create" {
				ln.Create = append(ln.Create, src)
			} else {
				ln.Lookup = append(ln.Lookup, src)
			}
		case a == "header":
			ln.Header = true
		default:
			return nil, errorf(d.Pos, "unknown parameter %q", a)
		}
	}
	switch {
	case len(ln.Lookup) == 0:
		return nil, stickyError(d, `"lookup" parameter is not specified`)
	case len(ln.Create) == 0:
		return nil, stickyError(d, `"create" parameter is not specified`)
	case ln.ZoneSize == 0:
		return nil, stickyError(d, `"zone" parameter is not specified`)
	}
	zone, _, _ := strings.Cut(ln.Zone, ":")
	if other, ok := l.stickyZones[zone]; ok {
		if other.size != ln.ZoneSize {
			return nil, errorf(d.Pos, "the size %d of shared memory zone %q conflicts with already declared size %d", ln.ZoneSize, zone, other.size)
		}
		return nil, errorf(d.Pos, "sticky zone %q is already used in upstream %q", zone, other.upstream)
	}
	l.stickyZones[zone] = stickyZone{upstream: u.Name, size: ln.ZoneSize}
	ln.MaxSessions = int(ln.ZoneSize>>20*sessionsPerMegaby + ln.ZoneSize&(1<<20-1)*sessionsPerMegaby>>20)
	return ln, nil
}

// stickyZone is a sticky learn zone already declared.
type stickyZone struct {
	upstream string
	size     int64
}

// nginxSize reads a size as nginx's ngx_parse_size does: a whole number
// with an optional k, m or g (any case).
func nginxSize(s string) (int64, bool) {
	scale := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			scale = 1 << 10
		case 'm', 'M':
			scale = 1 << 20
		case 'g', 'G':
			scale = 1 << 30
		}
		if scale > 1 {
			s = s[:len(s)-1]
		}
	}
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > (1<<62)/scale {
		return 0, false
	}
	return n * scale, true
}

// stickyPeerRoute reads a server's route= as nginx does.
func stickyPeerRoute(d *Directive, val string) (string, error) {
	switch {
	case val == "":
		return "", errorf(d.Pos, "route is empty")
	case len(val) > maxRouteLen:
		return "", errorf(d.Pos, "route is longer than %d", maxRouteLen)
	}
	return val, nil
}

// dropSticky reproduces nginx's placement trap: a balancing method written
// after sticky replaces it, with nothing but a "load balancing method
// redefined" warning, and nginx binds no request.
func (l *loader) dropSticky(u *Upstream, method *Directive) {
	if u.Sticky == nil {
		return
	}
	l.c.Warnings = append(l.c.Warnings, Warning{Pos: u.Sticky.Pos, Directive: "sticky", Msg: fmt.Sprintf(
		"written before %s (%s): nginx drops it without an error (the method replaces it; nginx only warns \"load balancing method redefined\"), so it binds no client to a server; "+
			"converted the same, without sticky sessions, so that each request goes where nginx sends it; to have them, write sticky after %s",
		method.Name, method.Pos, method.Name)})
	u.Sticky = nil
}

// warnStickyNames warns of servers given by name under sticky cookie or
// route without route=: nginx's id is the MD5 of each address the name
// resolves to, lbpack's the MD5 of the name.
func (l *loader) warnStickyNames(u *Upstream) {
	if u.Sticky == nil || u.Sticky.Learn != nil {
		return
	}
	for _, p := range u.Servers {
		host, _, _ := net.SplitHostPort(p.Addr)
		if _, err := netip.ParseAddr(host); err == nil || p.Route != "" {
			continue
		}
		l.c.Warnings = append(l.c.Warnings, Warning{Pos: p.Pos, Directive: "server", Msg: fmt.Sprintf(
			"%s: sticky: nginx's id for this server is the MD5 of each address the name resolves to (IP:PORT), lbpack's the MD5 of %s: "+
				"the ids nginx gave out for it bind no one after the move; give the server a route= (in nginx first) to keep them", p.Addr, p.Addr)})
	}
}

// warnLearnShared warns when several locations proxy to an upstream with
// sticky learn: nginx keeps one session table for the upstream, each
// converted proxy (a reverse_proxy, a middleware) its own.
func (l *loader) warnLearnShared(u *Upstream, proxies int) {
	if u.Sticky == nil || u.Sticky.Learn == nil || proxies < 2 {
		return
	}
	l.c.Warnings = append(l.c.Warnings, Warning{Pos: u.Sticky.Pos, Directive: "sticky", Msg: fmt.Sprintf(
		"learn: %d locations proxy to upstream %s: nginx keeps one session table for it, the converted configuration one per location, "+
			"so a session learned through one location binds no request of another", proxies, u.Name)})
}

// nginxSeconds writes seconds (more than 0) as an nginx time in days,
// hours, minutes and seconds ("1d12h", "30m"), which nginx's expires= and
// sticky.ParseExpires read.
func nginxSeconds(n int64) string {
	var b strings.Builder
	for _, u := range []struct {
		unit string
		sec  int64
	}{{"d", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}} {
		if n >= u.sec {
			fmt.Fprintf(&b, "%d%s", n/u.sec, u.unit)
			n %= u.sec
		}
	}
	return b.String()
}

// caddySticky writes the policy options of sticky, drain and route=.
func caddySticky(u *Upstream) []string {
	var out []string
	for _, s := range u.Servers {
		if s.Drain {
			out = append(out, "drain "+s.Addr)
		}
	}
	for _, s := range u.Servers {
		if s.Route != "" {
			out = append(out, "route "+s.Addr+" "+caddyToken(s.Route))
		}
	}
	st := u.Sticky
	if st == nil {
		return out
	}
	out = append(out, fmt.Sprintf("# sticky (%s)", st.Pos))
	switch {
	case st.Cookie != nil:
		c := st.Cookie
		var attrs []string
		switch {
		case c.MaxAge == sticky.ExpiresMax:
			attrs = append(attrs, "expires max")
		case c.MaxAge < 0:
			attrs = append(attrs, "expires 0")
		case c.MaxAge > 0:
			attrs = append(attrs, "expires "+nginxSeconds(c.MaxAge))
		}
		if c.Domain != "" {
			attrs = append(attrs, "domain "+caddyToken(c.Domain))
		}
		if c.Path != "" {
			attrs = append(attrs, "path "+caddyToken(c.Path))
		}
		if c.HTTPOnly {
			attrs = append(attrs, "httponly")
		}
		if c.Secure {
			attrs = append(attrs, "secure")
		}
		if c.SameSite != "" {
			attrs = append(attrs, "samesite "+c.SameSite)
		}
		if len(attrs) == 0 {
			return append(out, "sticky cookie "+caddyToken(c.Name))
		}
		out = append(out, "sticky cookie "+caddyToken(c.Name)+" {")
		for _, a := range attrs {
			out = append(out, "\t"+a)
		}
		out = append(out, "}")
	case st.Route != nil:
		toks := make([]string, len(st.Route))
		for i, s := range st.Route {
			toks[i] = caddyToken(s)
		}
		out = append(out, "sticky route "+strings.Join(toks, " "))
	default:
		ln := st.Learn
		out = append(out, "sticky learn {")
		for _, s := range ln.Create {
			out = append(out, "\tcreate "+caddyToken(s))
		}
		for _, s := range ln.Lookup {
			out = append(out, "\tlookup "+caddyToken(s))
		}
		if ln.Timeout > 0 {
			out = append(out, "\ttimeout "+caddyDuration(ln.Timeout))
		}
		if ln.Header {
			out = append(out, "\theader")
		}
		out = append(out, "\t"+learnZoneComment(ln), fmt.Sprintf("\tmax_sessions %d", ln.MaxSessions), "}")
	}
	return out
}

// learnZoneComment says where max_sessions comes from.
func learnZoneComment(ln *StickyLearn) string {
	return fmt.Sprintf("# zone=%s: as many sessions as nginx's zone holds by its note (1m, about %d)", ln.Zone, sessionsPerMegaby)
}

// traefikSticky writes the plugin's sticky settings.
func traefikSticky(b *strings.Builder, st *Sticky) {
	if st == nil {
		return
	}
	fmt.Fprintf(b, "          # sticky (%s)\n          sticky:\n", st.Pos)
	kv := func(k string, v any) { fmt.Fprintf(b, "              %s: %v\n", k, v) }
	switch {
	case st.Cookie != nil:
		c := st.Cookie
		b.WriteString("            cookie:\n")
		kv("name", yamlString(c.Name))
		switch {
		case c.MaxAge == sticky.ExpiresMax:
			kv("expires", "max")
		case c.MaxAge != 0:
			kv("maxAge", c.MaxAge) // -1: nginx's expires=0, expires now and max-age=0
		}
		if c.Domain != "" {
			kv("domain", yamlString(c.Domain))
		}
		if c.Path != "" {
			kv("path", yamlString(c.Path))
		}
		if c.HTTPOnly {
			kv("httpOnly", true)
		}
		if c.Secure {
			kv("secure", true)
		}
		if c.SameSite != "" {
			kv("sameSite", yamlString(c.SameSite))
		}
	case st.Route != nil:
		fmt.Fprintf(b, "            route: [%s]\n", quotedList(st.Route))
	default:
		ln := st.Learn
		b.WriteString("            learn:\n")
		kv("create", "["+quotedList(ln.Create)+"]")
		kv("lookup", "["+quotedList(ln.Lookup)+"]")
		if ln.Timeout > 0 {
			kv("timeout", caddyDuration(ln.Timeout))
		}
		if ln.Header {
			kv("header", true)
		}
		fmt.Fprintf(b, "              %s\n", learnZoneComment(ln))
		kv("maxSessions", ln.MaxSessions)
	}
}

// yamlString writes s as a YAML scalar that reads back as the same
// string: plain when it is safe, else double-quoted.
func yamlString(s string) string {
	plain := s != "" && !strings.ContainsAny(s[:1], "-?:,[]{}#&*!|>'\"%@`.0123456789 ")
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = isNameByte(c) || c == '-' || c == '.' || c == '/'
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~":
		plain = false
	}
	if plain {
		return s
	}
	return strconv.Quote(s)
}
