package nginxconf

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Caddyfile prints the configuration as a Caddyfile for Caddy built with
// lbpack: a site per server block, a handle per location, a reverse_proxy
// with the lbpack policy of its upstream. It returns the warnings of the
// conversion (Load's and Caddy's own).
func (c *Config) Caddyfile() ([]byte, []Warning) {
	w := &caddyWriter{warnings: append([]Warning(nil), c.Warnings...), sites: map[string]*Site{}}
	w.line(0, "# Converted from nginx by lbpack (lbsim convert). Each block names the")
	w.line(0, "# nginx directive it comes from.")
	w.global(c.Sites)
	for _, s := range c.Sites {
		w.site(s)
	}
	return []byte(w.b.String()), sortWarnings(w.warnings)
}

type caddyWriter struct {
	b        strings.Builder
	warnings []Warning
	sites    map[string]*Site // site addresses written, by address
}

func (w *caddyWriter) line(depth int, format string, args ...any) {
	w.b.WriteString(strings.Repeat("\t", depth))
	fmt.Fprintf(&w.b, format, args...)
	w.b.WriteByte('\n')
}

func (w *caddyWriter) warn(p Pos, directive, format string, args ...any) {
	w.warnings = append(w.warnings, Warning{Pos: p, Directive: directive, Msg: fmt.Sprintf(format, args...)})
}

// global writes the global options: the realip settings as the servers'
// trusted_proxies and client_ip_headers. Caddy holds them per listener, so
// servers that differ get the union, with a warning.
func (w *caddyWriter) global(sites []*Site) {
	var ri *RealIP
	from := map[string]bool{}
	for _, s := range sites {
		if len(s.RealIP.From) == 0 {
			continue
		}
		if ri == nil {
			ri = &s.RealIP
		} else if !sameRealIP(*ri, s.RealIP) {
			w.warn(s.RealIP.Pos, "set_real_ip_from", "differs from the one at %s: Caddy trusts proxies for all sites of a listener; the union is trusted", ri.Pos)
		}
		for _, f := range s.RealIP.From {
			from[f] = true
		}
	}
	if ri == nil {
		return
	}
	header := ri.Header
	if header == "" {
		header = "X-Real-IP" // nginx's default
	}
	w.line(0, "{")
	w.line(1, "servers {")
	w.line(2, "# set_real_ip_from (%s)", ri.Pos)
	w.line(2, "trusted_proxies static %s", strings.Join(sortedKeys(from), " "))
	w.line(2, "client_ip_headers %s", header)
	if strings.EqualFold(header, "X-Forwarded-For") {
		// Right to left, stopping at the first address not trusted: nginx's
		// real_ip_recursive on. Caddy's default takes the leftmost address,
		// which any client can write.
		w.line(2, "trusted_proxies_strict")
		if !ri.Recursive {
			w.warn(ri.Pos, "real_ip_recursive", "off: nginx takes the last X-Forwarded-For address even when it is a trusted proxy; Caddy (trusted_proxies_strict) skips trusted ones, as real_ip_recursive on")
		}
	}
	w.line(1, "}")
	w.line(0, "}")
}

func sameRealIP(a, b RealIP) bool {
	return strings.Join(a.From, " ") == strings.Join(b.From, " ") && a.Header == b.Header && a.Recursive == b.Recursive
}

// site writes one server block.
func (w *caddyWriter) site(s *Site) {
	var addrs []string
	binds := map[string]bool{}
	anyHost := false // a listen on every interface: no bind
	for _, ln := range s.Listens {
		anyHost = anyHost || ln.Host == ""
		scheme := "http"
		if ln.SSL {
			scheme = "https"
		}
		names := s.Names
		if len(names) == 0 || s.Default {
			names = append(append([]string(nil), names...), "")
		}
		for _, n := range names {
			a := scheme + "://" + n + ":" + ln.Port
			if other := w.sites[a]; other == s {
				continue // listen 80 and listen [::]:80: one address for Caddy
			} else if other != nil {
				if n != "" {
					w.warn(s.Pos, "server_name", "%s on port %s: also the server at %s's, which nginx prefers (conflicting server name): left out", n, ln.Port, other.Pos)
				}
				continue
			}
			w.sites[a] = s
			addrs = append(addrs, a)
		}
		if ln.Host != "" {
			binds[ln.Host] = true
		}
	}
	if len(addrs) == 0 {
		w.warn(s.Pos, "server", "every name and port is another server's: not converted")
		return
	}
	w.line(0, "")
	w.line(0, "# server (%s)", s.Pos)
	w.line(0, "%s {", strings.Join(addrs, ", "))
	if len(binds) > 0 && !anyHost {
		w.line(1, "bind %s", strings.Join(sortedKeys(binds), " "))
	}
	if s.Return != nil {
		var maps []argMap
		w.respond(&w.b, 1, s.Return, func(k Key, directive string) string {
			return caddyKey(k, &maps, func(format string, args ...any) { w.warn(k.Pos, directive, format, args...) })
		})
		w.writeMaps(1, maps)
	}
	locs := append([]*Location(nil), s.Locations...)
	// Caddy sorts handle blocks by path itself; writing them in that order
	// makes the file read as it runs.
	sort.SliceStable(locs, func(i, j int) bool { return matchRank(locs[i]) > matchRank(locs[j]) })
	for i, loc := range locs {
		w.location(loc, i)
	}
	w.line(0, "}")
}

// matchRank orders locations by nginx's preference: exact paths, regular
// expressions, then prefixes longest first; the catch-all last.
func matchRank(l *Location) int {
	switch {
	case l.Modifier == "=":
		return 2<<20 + len(l.Path)
	case l.Modifier == "~" || l.Modifier == "~*":
		return 1 << 20
	case l.Path == "/":
		return -1
	}
	return len(l.Path)
}

// location writes one location as a handle block.
func (w *caddyWriter) location(loc *Location, i int) {
	desc := strings.TrimSpace(loc.Modifier + " " + loc.Path)
	w.line(1, "# location %s (%s)", desc, loc.Pos)
	var matcher string
	switch loc.Modifier {
	case "=":
		matcher = " " + caddyToken(loc.Path)
	case "", "^~":
		if loc.Path != "/" {
			matcher = " " + caddyToken(loc.Path+"*")
		}
	case "~", "~*":
		re := loc.Path
		if loc.Modifier == "~*" {
			re = "(?i)" + re
		}
		name := fmt.Sprintf("@location%d", i)
		w.line(1, "%s path_regexp %s", name, caddyToken(re))
		matcher = " " + name
		w.warn(loc.Pos, "location", "%s: a regular expression: Caddy tries it in its own order (path matchers by length), nginx after the longest prefix; check that the same requests reach it", desc)
	}
	w.line(1, "handle%s {", matcher)
	var maps []argMap
	body := &caddyWriter{}
	keyOf := func(k Key, directive string) string {
		return caddyKey(k, &maps, func(format string, args ...any) {
			w.warn(k.Pos, directive, format, args...)
		})
	}
	for _, h := range loc.AddHeaders {
		if loc.Proxy != nil && usesVar(h.Value, "upstream_addr") {
			continue // set by reverse_proxy's header_down below
		}
		body.line(2, "header %s %s", caddyToken(h.Name), caddyToken(keyOf(h.Value, "add_header")))
	}
	switch {
	case loc.Proxy != nil:
		w.proxy(body, loc, keyOf)
	case loc.Return != nil:
		w.respond(&body.b, 2, loc.Return, keyOf)
	}
	w.writeMaps(2, maps)
	w.warnings = append(w.warnings, body.warnings...)
	w.b.WriteString(body.b.String())
	w.line(1, "}")
}

// respond writes a return directive: redir for 3xx with a URL, else
// respond.
func (w *caddyWriter) respond(b *strings.Builder, depth int, r *Return, keyOf func(Key, string) string) {
	text := keyOf(r.Text, "return")
	ind := strings.Repeat("\t", depth)
	switch {
	case r.Code >= 300 && r.Code < 400 && text != "":
		fmt.Fprintf(b, "%sredir %s %d\n", ind, caddyToken(text), r.Code)
	case text != "":
		fmt.Fprintf(b, "%srespond %s %d\n", ind, caddyToken(text), r.Code)
	default:
		fmt.Fprintf(b, "%srespond %d\n", ind, r.Code)
	}
}

// writeMaps writes the map directives that extract raw query arguments.
func (w *caddyWriter) writeMaps(depth int, maps []argMap) {
	for _, m := range maps {
		w.line(depth, "map {http.request.uri.query} %s {", m.placeholder())
		w.line(depth+1, "# $arg_%s: the raw argument, as nginx hashes it", m.name)
		w.line(depth+1, `%s "${1}"`, caddyToken(m.regexp()))
		w.line(depth, "}")
	}
}

func usesVar(k Key, name string) bool {
	for _, p := range k.Parts {
		if p.Var == name {
			return true
		}
	}
	return false
}

// proxy writes a location's reverse_proxy.
func (w *caddyWriter) proxy(b *caddyWriter, loc *Location, keyOf func(Key, string) string) {
	p := loc.Proxy
	var addrs []string
	u := p.Upstream
	if u != nil {
		for _, s := range u.Servers {
			addrs = append(addrs, s.Addr)
		}
		b.line(2, "# proxy_pass (%s) to upstream %s (%s)", p.Pos, u.Name, u.Pos)
	} else {
		addrs = []string{p.Addr}
		b.line(2, "# proxy_pass (%s)", p.Pos)
	}
	if p.Scheme == "https" {
		for i, a := range addrs {
			addrs[i] = "https://" + a
		}
	}
	w.rewrite(b, loc)
	inner := &caddyWriter{}
	if u != nil {
		w.policy(inner, u, p.Retry, keyOf)
	}
	w.retries(inner, p, u)
	if !hasHost(p.SetHeaders) {
		// nginx's default proxy_set_header Host $proxy_host: proxy_pass's
		// host, where Caddy would pass the client's.
		host := strings.TrimSuffix(strings.TrimSuffix(p.Host, ":80"), ":443")
		inner.line(3, "# nginx sends proxy_pass's host unless proxy_set_header Host says otherwise")
		inner.line(3, "header_up Host %s", caddyToken(host))
	}
	for _, h := range p.SetHeaders {
		w.setHeader(inner, h, keyOf)
	}
	for _, h := range loc.AddHeaders {
		if usesVar(h.Value, "upstream_addr") {
			inner.line(3, "header_down %s %s", caddyToken(h.Name), caddyToken(keyOf(h.Value, "add_header")))
		}
	}
	w.transport(inner, p, u, keyOf)
	if inner.b.Len() == 0 {
		b.line(2, "reverse_proxy %s", strings.Join(addrs, " "))
		return
	}
	b.line(2, "reverse_proxy %s {", strings.Join(addrs, " "))
	b.b.WriteString(inner.b.String())
	b.line(2, "}")
}

// caddyPolicies are the lbpack Caddy policies by nginx method.
var caddyPolicies = map[string]string{
	RoundRobin: "smooth_wrr",
	LeastConn:  "weighted_least_conn",
	IPHash:     "nginx_ip_hash",
	Hash:       "url_hash",
	Random:     "weighted_least_conn", // with two_choices; plain random below
	LeastTime:  "fair",
}

// policy writes lb_policy with the upstream's weights and per-server
// settings, and the statuses that retry (the location's proxy_next_upstream)
// counts as failures.
func (w *caddyWriter) policy(b *caddyWriter, u *Upstream, retry Retry, keyOf func(Key, string) string) {
	name := caddyPolicies[u.Method]
	if u.Method == Random {
		switch {
		case u.TwoLeastTime:
			name = "fair"
		case !u.Two:
			// lbpack's Caddy policies have no weighted random: smooth
			// weighted round robin gives the same shares, in a fixed order.
			name = "smooth_wrr"
			w.warn(u.MethodPos, "random", "converted to smooth_wrr: the same shares by weight, in nginx's round robin order instead of at random")
		}
	}
	var lines []string
	if u.Method == Hash {
		lines = append(lines, "key "+caddyToken(keyOf(u.Key, "hash")))
		if u.Consistent {
			lines = append(lines, "mode ketama")
		} else {
			lines = append(lines, "mode modulo")
		}
	}
	if u.Method == Random && u.Two && !u.TwoLeastTime {
		lines = append(lines, "two_choices")
	}
	weighted := false
	for _, s := range u.Servers {
		weighted = weighted || s.Weight != 1
	}
	var backup, down []string
	for _, s := range u.Servers {
		if s.Backup {
			backup = append(backup, s.Addr)
		}
		if s.Down {
			down = append(down, s.Addr)
		}
	}
	if len(backup) > 0 {
		lines = append(lines, "backup "+strings.Join(backup, " "))
	}
	if len(down) > 0 {
		lines = append(lines, "down "+strings.Join(down, " "))
	}
	lines = append(lines, caddySticky(u)...)
	for _, s := range u.Servers {
		if s.SlowStart > 0 {
			lines = append(lines, fmt.Sprintf("slow_start %s %s", s.Addr, caddyDuration(s.SlowStart)))
		}
	}
	lines = append(lines, failureOptions(u)...)
	lines = append(lines, failStatus(name, u, retry)...)
	head := "lb_policy " + name
	if weighted {
		for _, s := range u.Servers {
			head += " " + strconv.Itoa(s.Weight)
		}
	}
	if len(lines) == 0 {
		b.line(3, "%s", head)
		return
	}
	b.line(3, "%s {", head)
	for _, l := range lines {
		b.line(4, "%s", l)
	}
	b.line(3, "}")
}

// failureOptions writes max_fails, fail_timeout and max_conns: nginx's
// accounting, which the lbpack policy keeps per upstream as nginx does
// (nginx's max_fails=1 fail_timeout=10s apply where nothing is written).
// The value most servers share goes policy-wide, the others per address;
// a server with max_fails=0 among others with failures counted leaves
// every value per address, since a per-address 0 cannot override a
// policy-wide count.
func failureOptions(u *Upstream) []string {
	type pair struct {
		fails   int
		timeout time.Duration
	}
	count := map[pair]int{}
	var common pair
	zero, conns := false, map[int]int{}
	for _, s := range u.Servers {
		p := pair{s.MaxFails, s.FailTimeout}
		count[p]++
		if count[p] > count[common] || count[p] == count[common] && p == (pair{u.Servers[0].MaxFails, u.Servers[0].FailTimeout}) {
			common = p
		}
		zero = zero || s.MaxFails == 0
		conns[s.MaxConns]++
	}
	var out []string
	if zero && common.fails > 0 || common.fails == 0 {
		common = pair{}
	} else {
		out = append(out, "# nginx's max_fails and fail_timeout (1 and 10s unless written)",
			fmt.Sprintf("max_fails %d", common.fails), "fail_timeout "+caddyDuration(common.timeout))
	}
	sharedConns := 0
	if len(conns) == 1 {
		sharedConns = u.Servers[0].MaxConns
	}
	if sharedConns > 0 {
		out = append(out, fmt.Sprintf("max_conns %d", sharedConns))
	}
	for _, s := range u.Servers {
		if s.MaxFails > 0 && s.MaxFails != common.fails {
			out = append(out, fmt.Sprintf("max_fails %s %d", s.Addr, s.MaxFails))
		}
		if s.MaxFails > 0 && s.FailTimeout != common.timeout {
			out = append(out, fmt.Sprintf("fail_timeout %s %s", s.Addr, caddyDuration(s.FailTimeout)))
		}
		if s.MaxConns > 0 && sharedConns == 0 {
			out = append(out, fmt.Sprintf("max_conns %s %d", s.Addr, s.MaxConns))
		}
	}
	return out
}

// failStatus writes fail_status for the statuses proxy_next_upstream names
// (see failCodes).
func failStatus(policy string, u *Upstream, r Retry) []string {
	conds, codes := failCodes(policy, u, r)
	if len(codes) == 0 {
		return nil
	}
	return []string{"# proxy_next_upstream " + strings.Join(conds, " ") + ": nginx counts these answers as failures",
		"fail_status " + strings.Join(codes, " ")}
}

// failCodes returns the http_ conditions of proxy_next_upstream that make an
// answer the server's failure, and the statuses lbpack's fail_status (Caddy)
// or failStatus (Traefik) must list for them; none when nothing is to be
// written. nginx counts such an answer as a failure towards max_fails
// (http_403 and http_404 never), so outside fair they matter only where
// max_fails counts. fair (policy "fair" in both hosts) counts 5xx already
// (lbpack's default, so that a server failing fast does not look fastest)
// and needs telling of 429 only.
func failCodes(policy string, u *Upstream, r Retry) (conds, codes []string) {
	if r.Off() {
		return nil, nil
	}
	counted := policy == "fair"
	for _, s := range u.Servers {
		counted = counted || s.MaxFails > 0
	}
	seen := map[string]bool{}
	for _, c := range r.Conditions {
		code, ok := strings.CutPrefix(c, "http_")
		if !ok || code == "403" || code == "404" || seen[code] {
			continue
		}
		seen[code] = true
		conds = append(conds, c)
		if policy != "fair" || code[0] != '5' {
			codes = append(codes, code)
		}
	}
	if !counted || len(codes) == 0 {
		return nil, nil
	}
	if policy == "fair" {
		codes = append([]string{"5xx"}, codes...)
	}
	return conds, codes
}

// retries writes proxy_next_upstream's meaning: lb_retries (each server once
// unless proxy_next_upstream_tries is written), lb_try_duration, and
// lb_retry_match for the methods nginx retries after sending and for the
// statuses it retries.
func (w *caddyWriter) retries(b *caddyWriter, p *Proxy, u *Upstream) {
	r := p.Retry
	if r.Off() {
		return // Caddy does not retry unless told to
	}
	n := 1
	if u != nil {
		n = 0
		for _, s := range u.Servers {
			if !s.Down && !s.Drain { // nginx's tries count neither
				n++
			}
		}
	}
	if r.Tries > 0 && r.Tries < n {
		n = r.Tries
	}
	if n > 1 {
		b.line(3, "# proxy_next_upstream %s: each server at most once", strings.Join(r.Conditions, " "))
		b.line(3, "lb_retries %d", n-1)
	}
	if r.Timeout > 0 {
		b.line(3, "lb_try_duration %s", caddyDuration(r.Timeout))
	}
	if n <= 1 && r.Timeout == 0 {
		return
	}
	// After the request was sent, nginx retries every method but POST, LOCK
	// and PATCH (all with non_idempotent); Caddy only GET unless matched.
	methods := "GET HEAD PUT DELETE OPTIONS TRACE"
	if r.Has("non_idempotent") {
		methods += " POST LOCK PATCH"
	}
	if r.Has("error") || r.Has("timeout") || r.Has("invalid_header") {
		b.line(3, "lb_retry_match {")
		b.line(4, "method %s", methods)
		b.line(3, "}")
	}
	var codes []string
	for _, c := range r.Conditions {
		if s, ok := strings.CutPrefix(c, "http_"); ok {
			codes = append(codes, s)
		}
	}
	if len(codes) > 0 {
		b.line(3, "lb_retry_match {")
		b.line(4, "expression `{rp.status_code} in [%s]`", strings.Join(codes, ", "))
		b.line(3, "}")
	}
}

// hasHost reports whether the headers set Host.
func hasHost(hs []Header) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Name, "Host") {
			return true
		}
	}
	return false
}

// rewrite writes what the URI part of proxy_pass does: nginx replaces the
// part of the path the location matched with it. Caddy carries it over for
// a prefix location and a URI that both end in "/" (location /api/ with
// proxy_pass http://app/ or http://app/v2/); others are warned of.
func (w *caddyWriter) rewrite(b *caddyWriter, loc *Location) {
	uri := loc.Proxy.URI
	switch {
	case uri == "" || uri == loc.Path && loc.Modifier != "~" && loc.Modifier != "~*":
		return // nothing replaced, or the same text
	case (loc.Modifier == "" || loc.Modifier == "^~") && strings.HasSuffix(loc.Path, "/") && strings.HasSuffix(uri, "/"):
		b.line(2, "# proxy_pass's URI %s replaces the location's prefix %s", uri, loc.Path)
		b.line(2, "uri path_regexp %s %s", caddyToken("^"+regexp.QuoteMeta(loc.Path)), caddyToken(uri))
	default:
		w.warn(loc.Proxy.Pos, "proxy_pass", "the URI part %s, which replaces what location %s matched, is not converted: Caddy passes the path unchanged", uri, loc.Path)
	}
}

// hostDefault reports whether proxy_set_header h asks for what Caddy and
// the Traefik plugin do anyway: pass the client's Host, append the client
// to X-Forwarded-For.
func hostDefault(h Header) bool {
	one := func(name, v string) bool {
		return strings.EqualFold(h.Name, name) && len(h.Value.Parts) == 1 && h.Value.Parts[0].Var == v
	}
	return one("Host", "host") || one("X-Forwarded-For", "proxy_add_x_forwarded_for")
}

// setHeader writes proxy_set_header as header_up.
func (w *caddyWriter) setHeader(b *caddyWriter, h Header, keyOf func(Key, string) string) {
	if hostDefault(h) {
		return
	}
	v := keyOf(h.Value, "proxy_set_header")
	if v == "" {
		b.line(3, "header_up -%s", caddyToken(h.Name))
		return
	}
	b.line(3, "header_up %s %s", caddyToken(h.Name), caddyToken(v))
}

// transport writes the timeouts, keepalive and TLS as the http transport's.
func (w *caddyWriter) transport(b *caddyWriter, p *Proxy, u *Upstream, keyOf func(Key, string) string) {
	var lines []string
	if p.ConnectTimeout > 0 {
		lines = append(lines, "dial_timeout "+caddyDuration(p.ConnectTimeout))
	}
	if p.ReadTimeout > 0 {
		lines = append(lines, "read_timeout "+caddyDuration(p.ReadTimeout))
	}
	if p.SendTimeout > 0 {
		lines = append(lines, "write_timeout "+caddyDuration(p.SendTimeout))
	}
	if u != nil && u.Keepalive > 0 {
		lines = append(lines, fmt.Sprintf("keepalive_idle_conns %d", u.Keepalive))
	}
	if u != nil && u.KeepaliveTimeout > 0 {
		lines = append(lines, "keepalive "+caddyDuration(u.KeepaliveTimeout))
	}
	if p.Scheme == "https" {
		lines = append(lines, "tls")
		lines = append(lines, w.tls(p, keyOf)...)
	}
	if len(lines) == 0 {
		return
	}
	b.line(3, "transport http {")
	for _, l := range lines {
		b.line(4, "%s", l)
	}
	b.line(3, "}")
}

// tls writes the proxy_ssl_ settings of an https proxy_pass as the
// transport's tls_ options. nginx checks no certificate unless
// proxy_ssl_verify is on, and then against proxy_ssl_name (its
// $proxy_host by default); Caddy checks every certificate, against the
// upstream's address, unless told otherwise.
func (w *caddyWriter) tls(p *Proxy, keyOf func(Key, string) string) []string {
	t := p.TLS
	name := sslName(p.Host)
	if t.Name.Text != "" {
		name = keyOf(t.Name, "proxy_ssl_name")
	}
	var out []string
	if t.Verify {
		out = append(out, "# proxy_ssl_verify on: the certificate is checked against proxy_ssl_name, as nginx checks it",
			"tls_trust_pool file "+caddyToken(t.Trusted), "tls_server_name "+caddyToken(name))
	} else {
		out = append(out, "# proxy_ssl_verify off (nginx's default): the upstream's certificate is not checked",
			"tls_insecure_skip_verify")
		w.warn(p.Pos, "proxy_pass", "%s://%s: nginx does not check the upstream's certificate (proxy_ssl_verify off, its default), so Caddy is told not to either (tls_insecure_skip_verify); to check it, write proxy_ssl_verify on and proxy_ssl_trusted_certificate CA.pem (Caddy: tls_trust_pool file CA.pem)", p.Scheme, p.Host)
		if t.SNI {
			out = append(out, "tls_server_name "+caddyToken(name))
		}
	}
	switch {
	case t.Cert != "" && t.Key != "":
		out = append(out, "tls_client_auth "+caddyToken(t.Cert)+" "+caddyToken(t.Key))
	case t.Key != "":
		w.warn(p.Pos, "proxy_ssl_certificate_key", "without proxy_ssl_certificate: nginx presents no certificate, nor does Caddy")
	}
	return out
}

// sslName is nginx's default proxy_ssl_name for a proxy_pass host,
// $proxy_host, without its port, as nginx sends and checks it.
func sslName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
}

// caddyDuration writes a duration as Caddy and Traefik parse it, without
// Go's trailing zero units ("1m", not "1m0s").
func caddyDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// caddyToken quotes a Caddyfile token when it needs it.
func caddyToken(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"`") || strings.HasPrefix(s, "#") {
		if !strings.Contains(s, "`") {
			return "`" + s + "`"
		}
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
	}
	return s
}
