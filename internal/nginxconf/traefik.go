package nginxconf

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// traefikStrategies are the plugin's strategies by nginx method.
var traefikStrategies = map[string]string{
	RoundRobin: "smooth_wrr",
	LeastConn:  "least_conn",
	IPHash:     "ip_hash",
	Hash:       "url_hash",
	Random:     "weighted_random",
	LeastTime:  "fair",
}

// Traefik prints the configuration as Traefik dynamic configuration (YAML):
// a router and an lbpack plugin middleware per proxying location, with the
// static configuration that loads the plugin and declares the entry points
// as a comment. It returns the warnings of the conversion.
func (c *Config) Traefik() ([]byte, []Warning) {
	t := &traefikWriter{warnings: append([]Warning(nil), c.Warnings...), warnedDefault: map[*Site]bool{}}
	t.static(c.Sites)
	t.b.WriteString("http:\n  routers:\n")
	var mws strings.Builder
	for i, s := range c.Sites {
		for j, loc := range s.Locations {
			name := fmt.Sprintf("server%d-location%d", i+1, j+1)
			if loc.Proxy == nil {
				t.warn(loc.Pos, "location", "%s: a location that returns: the Traefik plugin only proxies; not converted", loc.Path)
				continue
			}
			t.router(name, s, loc)
			t.middleware(&mws, name, s, loc)
		}
	}
	t.b.WriteString("  middlewares:\n")
	t.b.WriteString(mws.String())
	return []byte(t.b.String()), sortWarnings(t.warnings)
}

type traefikWriter struct {
	b             strings.Builder
	warnings      []Warning
	warnedDefault map[*Site]bool
}

func (t *traefikWriter) warn(p Pos, directive, format string, args ...any) {
	t.warnings = append(t.warnings, Warning{Pos: p, Directive: directive, Msg: fmt.Sprintf(format, args...)})
}

func entryPoint(ln Listen) string { return "port" + ln.Port }

// static writes the static configuration as comments: the plugin and one
// entry point per port, trusting the realip proxies' forwarded headers.
func (t *traefikWriter) static(sites []*Site) {
	b := &t.b
	b.WriteString("# Converted from nginx by lbpack (lbsim convert): Traefik dynamic configuration.\n")
	b.WriteString("# The static configuration (traefik.yml) must load the plugin and declare the\n")
	b.WriteString("# entry points:\n#\n")
	b.WriteString("#   experimental:\n#     plugins:\n#       lbpack:\n")
	b.WriteString("#         moduleName: github.com/lbpack/lbpack\n")
	b.WriteString("#         version: vX.Y.Z   # the lbpack release to run (or localPlugins: see examples/traefik)\n")
	b.WriteString("#   entryPoints:\n")
	seen := map[string]bool{}
	for _, s := range sites {
		for _, ln := range s.Listens {
			if seen[ln.Port] {
				continue
			}
			seen[ln.Port] = true
			addr := ":" + ln.Port
			if ln.Host != "" {
				addr = net.JoinHostPort(ln.Host, ln.Port)
			}
			fmt.Fprintf(b, "#     %s:\n#       address: %q\n", entryPoint(ln), addr)
			if len(s.RealIP.From) > 0 {
				fmt.Fprintf(b, "#       forwardedHeaders:\n#         trustedIPs: [%s]\n", quotedList(s.RealIP.From))
			}
		}
	}
	b.WriteString("\n")
}

func quotedList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}

// router writes the router of one location.
func (t *traefikWriter) router(name string, s *Site, loc *Location) {
	var hosts []string
	for _, n := range s.Names {
		if strings.HasPrefix(n, "*.") {
			hosts = append(hosts, "HostRegexp(`^[^.]+"+strings.ReplaceAll(n[1:], ".", `\.`)+"$`)")
		} else {
			hosts = append(hosts, "Host(`"+n+"`)")
		}
	}
	// Priorities as nginx chooses: a server by its names first, then in it
	// an exact location, a regular expression, the longest prefix.
	var path string
	priority := 1000 + len(loc.Path)
	switch loc.Modifier {
	case "=":
		path, priority = "Path(`"+loc.Path+"`)", 50000+len(loc.Path)
	case "~", "~*":
		re := loc.Path
		if loc.Modifier == "~*" {
			re = "(?i)" + re
		}
		path, priority = "PathRegexp(`"+re+"`)", 40000
		t.warn(loc.Pos, "location", "%s: a regular expression: Traefik orders routers by priority (%d here), nginx tries regular expressions after the longest prefix", loc.Path, priority)
	default:
		path = "PathPrefix(`" + loc.Path + "`)"
	}
	rule := path
	if len(hosts) > 0 && !s.Default {
		rule = "(" + strings.Join(hosts, " || ") + ") && " + path
		priority += 100000
	} else if len(hosts) > 0 && !t.warnedDefault[s] {
		t.warnedDefault[s] = true
		t.warn(s.Pos, "server", "the default server of its port: its routers match every host, as nginx sends it the requests no other server_name takes")
	}
	var eps []string
	seen := map[string]bool{}
	for _, ln := range s.Listens {
		if ep := entryPoint(ln); !seen[ep] {
			seen[ep] = true
			eps = append(eps, ep)
		}
	}
	fmt.Fprintf(&t.b, "    # location %s (%s)\n", strings.TrimSpace(loc.Modifier+" "+loc.Path), loc.Pos)
	fmt.Fprintf(&t.b, "    %s:\n", name)
	fmt.Fprintf(&t.b, "      rule: %s\n", strconv.Quote(rule))
	fmt.Fprintf(&t.b, "      priority: %d\n", priority)
	fmt.Fprintf(&t.b, "      entryPoints: [%s]\n", strings.Join(eps, ", "))
	fmt.Fprintf(&t.b, "      middlewares: [%s]\n", name)
	t.b.WriteString("      service: noop@internal # the middleware answers every request\n")
}

// middleware writes the lbpack plugin settings of one location.
func (t *traefikWriter) middleware(b *strings.Builder, name string, s *Site, loc *Location) {
	p := loc.Proxy
	u := p.Upstream
	if u == nil {
		u = &Upstream{Name: p.Addr, Pos: p.Pos, Servers: []*Peer{{Addr: p.Addr, Pos: p.Pos, Weight: 1, MaxFails: defaultMaxFails, FailTimeout: defaultFailTimeout}}}
	}
	fmt.Fprintf(b, "    # upstream %s (%s)\n", u.Name, u.Pos)
	fmt.Fprintf(b, "    %s:\n      plugin:\n        lbpack:\n", name)
	kv := func(k string, v any) { fmt.Fprintf(b, "          %s: %v\n", k, v) }
	strategy := traefikStrategies[u.Method]
	if u.Method == Random && u.Two {
		strategy = "least_conn"
		if u.TwoLeastTime {
			strategy = "fair"
		}
	}
	kv("strategy", strategy)
	if u.Method == Random && u.Two && !u.TwoLeastTime {
		kv("twoChoices", true)
	}
	if u.Method == Hash {
		key, ok := traefikKey(u.Key, func(format string, args ...any) { t.warn(u.Key.Pos, "hash", format, args...) })
		if !ok {
			t.warn(u.Key.Pos, "hash", "%s: the plugin hashes one of $request_uri, $uri, $remote_addr, $http_NAME, $cookie_NAME or $arg_NAME alone; hashing uri instead", u.Key.Text)
			key = "uri"
		}
		kv("hashKey", key)
		if u.Consistent {
			kv("hashMode", "ketama")
		} else {
			kv("hashMode", "modulo")
		}
	}
	traefikSticky(b, u.Sticky)
	b.WriteString("          servers:\n")
	for _, s := range u.Servers {
		fmt.Fprintf(b, "            - url: %s://%s\n", p.Scheme, s.Addr)
		if s.Weight != 1 {
			fmt.Fprintf(b, "              weight: %d\n", s.Weight)
		}
		if s.Backup {
			b.WriteString("              backup: true\n")
		}
		if s.Down {
			b.WriteString("              down: true\n")
		}
		if s.Drain {
			b.WriteString("              drain: true\n")
		}
		if s.Route != "" {
			fmt.Fprintf(b, "              route: %s\n", yamlString(s.Route))
		}
		if s.MaxConns > 0 {
			fmt.Fprintf(b, "              maxConns: %d\n", s.MaxConns)
		}
	}
	first := u.Servers[0]
	for _, s := range u.Servers[1:] {
		if s.MaxFails != first.MaxFails || s.FailTimeout != first.FailTimeout {
			t.warn(s.Pos, "server", "%s: max_fails=%d fail_timeout=%s: the plugin has one setting for all servers; it takes the first server's (max_fails=%d fail_timeout=%s)",
				s.Addr, s.MaxFails, caddyDuration(s.FailTimeout), first.MaxFails, caddyDuration(first.FailTimeout))
		}
	}
	kv("maxFails", first.MaxFails)
	kv("failTimeout", caddyDuration(first.FailTimeout))
	slow := map[string]bool{}
	for _, s := range u.Servers {
		if s.SlowStart > 0 {
			slow[caddyDuration(s.SlowStart)] = true
		}
	}
	if len(slow) > 0 {
		ds := sortedKeys(slow)
		if len(ds) > 1 || len(slow) > 0 && hasNoSlowStart(u) {
			t.warn(u.Pos, "slow_start", "the plugin ramps every server over one time: %s for all", ds[len(ds)-1])
		}
		kv("slowStart", ds[len(ds)-1])
	}
	t.retries(kv, p, u, strategy)
	if p.ConnectTimeout > 0 {
		kv("connectTimeout", caddyDuration(p.ConnectTimeout))
	}
	if p.ReadTimeout > 0 {
		kv("responseTimeout", caddyDuration(p.ReadTimeout))
	}
	if p.URI != "" && p.URI != loc.Path {
		t.warn(p.Pos, "proxy_pass", "the URI part %s, which replaces what location %s matched, is not converted: use a Traefik stripPrefix or replacePathRegex middleware", p.URI, loc.Path)
	}
	if !hasHost(p.SetHeaders) {
		t.warn(p.Pos, "proxy_pass", "nginx sends Host: %s (proxy_pass's host) unless proxy_set_header Host says otherwise; the plugin passes the client's (passHostHeader: false sends the server's address)", p.Host)
	}
	if p.SendTimeout > 0 {
		t.warn(p.Pos, "proxy_send_timeout", "not converted: the plugin has no send timeout")
	}
	if p.Scheme == "https" {
		t.tls(p)
	}
	if u.Keepalive > 0 || u.KeepaliveTimeout > 0 {
		t.warn(u.Pos, "keepalive", "not converted: the plugin's transport keeps idle connections to its servers itself")
	}
	for _, h := range p.SetHeaders {
		if hostDefault(h) {
			continue
		}
		t.warn(h.Pos, "proxy_set_header", "%s: not converted: use a Traefik headers middleware before the plugin", h.Name)
	}
	for _, h := range loc.AddHeaders {
		t.warn(h.Pos, "add_header", "%s: not converted: use a Traefik headers middleware", h.Name)
	}
	ri := s.RealIP
	if len(ri.From) > 0 {
		fmt.Fprintf(b, "          trustedIPs: [%s]\n", quotedList(ri.From))
		if ri.Header != "" && !strings.EqualFold(ri.Header, "X-Forwarded-For") {
			t.warn(ri.Pos, "real_ip_header", "%s: the plugin reads the client address from X-Forwarded-For only", ri.Header)
		}
		if ri.Header == "" {
			t.warn(ri.Pos, "real_ip_header", "not written (nginx reads X-Real-IP): the plugin reads X-Forwarded-For only")
		}
	}
}

// tls warns of what an https proxy_pass loses: the plugin has no TLS
// settings (no insecureSkipVerify, rootCAs, serverName or client
// certificate); it checks every server's certificate against the system's
// roots and its URL's host, and presents none.
func (t *traefikWriter) tls(p *Proxy) {
	c := p.TLS
	if !c.Verify {
		t.warn(p.Pos, "proxy_pass", "%s://%s: nginx does not check the upstream's certificate (proxy_ssl_verify off, its default); the plugin checks it against the system's trusted roots and has no setting to skip it: a server with a self-signed or private CA's certificate fails (502) unless that CA is in the system's trust store and the certificate names the host of the server's URL", p.Scheme, p.Host)
	} else {
		t.warn(c.TrustedPos, "proxy_ssl_trusted_certificate", "%s: not converted: the plugin trusts the system's roots only; add this CA to the system's trust store", c.Trusted)
	}
	if c.Verify || c.SNI {
		name, pos := c.Name.Text, c.NamePos
		if name == "" {
			name, pos = sslName(p.Host), p.Pos
		}
		t.warn(pos, "proxy_ssl_name", "%s: not converted: the plugin sends and checks the host of each server's URL as the TLS server name", name)
	}
	if c.Cert != "" {
		t.warn(c.CertPos, "proxy_ssl_certificate", "%s: not converted: the plugin presents no client certificate", c.Cert)
	}
}

func hasNoSlowStart(u *Upstream) bool {
	for _, s := range u.Servers {
		if s.SlowStart == 0 {
			return true
		}
	}
	return false
}

// retries writes proxy_next_upstream's meaning as the plugin's retries, and
// the statuses it names as failStatus.
func (t *traefikWriter) retries(kv func(string, any), p *Proxy, u *Upstream, strategy string) {
	r := p.Retry
	switch {
	case r.Off():
		kv("retries", 0)
	case r.Tries > 0:
		kv("retries", r.Tries-1)
	default:
		kv("retries", -1)
	}
	// The plugin's maxFails is the first server's (see middleware).
	first := &Upstream{Servers: u.Servers[:1]}
	if _, codes := failCodes(strategy, first, r); len(codes) > 0 {
		kv("failStatus", strings.Join(codes, ","))
	}
	var other []string
	for _, c := range r.Conditions {
		if c != "error" && c != "timeout" && c != "off" {
			other = append(other, c)
		}
	}
	sort.Strings(other)
	if len(other) > 0 {
		t.warn(r.Pos, "proxy_next_upstream", "%s: not retried: the plugin retries on connection errors and timeouts only (an answer with one of these statuses still counts as the server's failure where failStatus lists it)", strings.Join(other, " "))
	}
	if r.Timeout > 0 {
		t.warn(r.Pos, "proxy_next_upstream_timeout", "not converted: the plugin bounds each try by connectTimeout and responseTimeout")
	}
}
