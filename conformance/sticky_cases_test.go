package conformance

import (
	"fmt"
	"strings"
)

// The cases the sticky recorder runs through nginx. Each family becomes one
// file under testdata/sticky. Servers are named by slot: slot i listens on
// 127.0.0.1:44101+i, but stickyIPv6Slot listens on [::1]:44110; stickyDeadSlot is
// an address nothing listens on.

// srvSpec is a server line: the slot and its parameters as written.
type srvSpec struct {
	slot   int
	params string
}

func sv(slot int, params string) srvSpec { return srvSpec{slot, params} }

// stickyServerOf reads a server line's parameters as nginx does: "down" and
// "drain" set one field, so the last one written wins.
func stickyServerOf(s srvSpec) stickyServer {
	out := stickyServer{Address: stickyAddr(s.slot), Weight: 1, Listening: s.slot != stickyDeadSlot}
	for _, p := range strings.Fields(s.params) {
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "weight":
			fmt.Sscan(v, &out.Weight)
		case "max_conns":
			fmt.Sscan(v, &out.MaxConns)
		case "route":
			out.Route = v
		case "down":
			out.Down, out.Drain = true, false
		case "drain":
			out.Down, out.Drain = false, true
		case "backup":
			out.Backup = true
		}
	}
	return out
}

// caseB builds one case.
type caseB struct {
	c     stickyCase
	specs []srvSpec
	// stickyFirst writes the sticky directive before the method's.
	stickyFirst bool
	// extra lines in the upstream block, after the sticky directive.
	extra []string
	// nextUpstream is the location's proxy_next_upstream.
	nextUpstream string
	// via says where route mode carries its value: "arg:NAME",
	// "cookie:NAME" or "header:NAME"; "" sends nothing by itself (the
	// request's extras carry the value).
	via string
	// noCarry leaves the sticky value to the request's extras.
	noCarry bool
}

// methodDirective is the line that selects each method.
var methodDirective = map[string]string{
	"round_robin":     "",
	"least_conn":      "least_conn;",
	"ip_hash":         "ip_hash;",
	"hash":            "hash $arg_k;",
	"hash_consistent": "hash $arg_k consistent;",
}

func newCase(name, about, method, sticky string, servers ...srvSpec) *caseB {
	b := &caseB{specs: servers, nextUpstream: "off", via: "arg:route"}
	b.c = stickyCase{Name: name, About: about, Method: method, Sticky: sticky}
	if strings.HasPrefix(method, "hash") {
		b.c.HashKey = "$arg_k"
	}
	f := strings.Fields(sticky)
	if len(f) > 1 {
		b.c.Mode = f[1]
	}
	if b.c.Mode == "cookie" && len(f) > 2 {
		b.c.CookieName = strings.TrimSuffix(f[2], ";")
		for _, p := range f[3:] {
			if v, ok := strings.CutPrefix(p, "expires="); ok {
				secs := int64(-1)
				if v != "max" {
					secs = parseNginxSeconds(v)
				}
				b.c.ExpiresSeconds = &secs
			}
		}
	}
	for _, s := range servers {
		b.c.Servers = append(b.c.Servers, stickyServerOf(s))
	}
	return b
}

// parseNginxSeconds reads an nginx time in seconds ("90", "1h", "1d12h").
func parseNginxSeconds(v string) int64 {
	units := map[byte]int64{'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400, 'M': 30 * 86400, 'y': 365 * 86400}
	var total, n int64
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if ch >= '0' && ch <= '9' {
			n = n*10 + int64(ch-'0')
			continue
		}
		total += n * units[ch]
		n = 0
	}
	return total + n
}

// finish writes the upstream block and location text.
func (b *caseB) finish() stickyCase {
	c := b.c
	var u strings.Builder
	fmt.Fprintf(&u, "    upstream %s {\n", c.Name)
	lines := []string{}
	if d := methodDirective[c.Method]; d != "" {
		lines = append(lines, d)
	}
	if c.Sticky != "" {
		if b.stickyFirst {
			lines = append([]string{c.Sticky + ";"}, lines...)
		} else {
			lines = append(lines, c.Sticky+";")
		}
	}
	lines = append(lines, b.extra...)
	for _, s := range b.specs {
		line := "server " + stickyAddr(s.slot)
		if s.params != "" {
			line += " " + s.params
		}
		lines = append(lines, line+";")
	}
	for _, l := range lines {
		fmt.Fprintf(&u, "        %s\n", l)
	}
	u.WriteString("    }\n")
	c.Upstream = u.String()
	c.Location = fmt.Sprintf("        location = /%s { proxy_pass http://%s; proxy_next_upstream %s; add_header X-Upstream $upstream_addr always; }\n",
		c.Name, c.Name, b.nextUpstream)
	return c
}

// What a request carries for sticky.
func none() stickySends            { return stickySends{Kind: "none"} }
func to(i int) stickySends         { return stickySends{Kind: "server", Server: &i} }
func stale() stickySends           { return stickySends{Kind: "stale", Value: stickyStaleAddr} }
func garbage(v string) stickySends { return stickySends{Kind: "garbage", Value: v} }
func empty() stickySends           { return stickySends{Kind: "empty"} }
func session(v string) stickySends {
	return stickySends{Kind: "session", Value: v}
}

// creating asks the backend to set its own session cookie sess=id.
func creating(s stickySends, id string) stickySends {
	s.Creates = id
	return s
}

// value is the sticky value a request sends.
func (b *caseB) value(s stickySends) string {
	switch s.Kind {
	case "server":
		return stickySID(b.c.Servers[*s.Server])
	case "stale":
		return md5hex(s.Value)
	case "garbage", "session":
		return s.Value
	}
	return ""
}

// send adds a request with key (hash's k argument, ip_hash's client address)
// carrying s; extras are more query parts ("q:a=b") and headers ("h:Name: value").
func (b *caseB) send(key string, s stickySends, extras ...string) *stickyExchange {
	var query []string
	var headers []string
	switch b.c.Method {
	case "hash", "hash_consistent":
		query = append(query, "k="+key)
	case "ip_hash":
		headers = append(headers, "X-Real-IP: "+key)
	}
	via := b.via
	switch b.c.Mode {
	case "cookie":
		via = "cookie:" + b.c.CookieName
	case "learn":
		via = "cookie:sess"
	}
	if s.Kind != "none" && !b.noCarry {
		v := b.value(s)
		where, name, _ := strings.Cut(via, ":")
		switch where {
		case "arg":
			query = append(query, name+"="+v)
		case "cookie":
			headers = append(headers, "Cookie: "+name+"="+v)
		case "header":
			headers = append(headers, name+": "+v)
		}
	}
	if s.Creates != "" {
		query = append(query, "set="+s.Creates)
	}
	for _, e := range extras {
		if q, ok := strings.CutPrefix(e, "q:"); ok {
			query = append(query, q)
		} else if h, ok := strings.CutPrefix(e, "h:"); ok {
			headers = append(headers, h)
		}
	}
	target := "/" + b.c.Name
	if len(query) > 0 {
		target += "?" + strings.Join(query, "&")
	}
	b.c.Requests = append(b.c.Requests, stickyExchange{Method: "GET", Target: target, Headers: headers, Sends: s})
	return &b.c.Requests[len(b.c.Requests)-1]
}

// raw adds a request whose extras carry its sticky value by hand.
func (b *caseB) raw(key string, s stickySends, extras ...string) *stickyExchange {
	b.noCarry = true
	defer func() { b.noCarry = false }()
	return b.send(key, s, extras...)
}

// unbound adds n requests without a sticky value, all with key.
func (b *caseB) unbound(n int, key string) {
	for i := 0; i < n; i++ {
		b.send(key, none())
	}
}

// rrKinds sends, without keys, one request per item: a server position, or
// -1 for no sticky value.
func (b *caseB) rr(items ...int) {
	for _, i := range items {
		if i < 0 {
			b.send("", none())
		} else {
			b.send("", to(i))
		}
	}
}

const nb = -1 // an unbound request in rr's lists

// Request patterns shared by round robin and least_conn.

// weightsPattern: a period unbound, then bound requests interleaved with
// unbound ones (round robin's low-limit rule shows in the unbound picks), then
// a stale cookie, garbage and an empty value.
func weightsPattern(b *caseB) *caseB {
	b.rr(nb, nb, nb, nb, nb, nb, nb, nb, nb, nb)
	b.rr(2, nb, 2, 2, nb, nb, 0, nb, 1, 1, nb, nb, nb)
	b.send("", stale())
	b.rr(nb)
	b.send("", garbage(stickyGarbage))
	b.send("", empty())
	b.rr(nb, nb, nb, nb, nb, nb)
	return b
}

// boundRunPattern: a run of requests bound to server 2, then a period unbound.
func boundRunPattern(b *caseB) *caseB {
	b.rr(2, 2, 2, 2, 2, 2, nb, nb, nb, nb, nb, nb, nb, nb, nb, nb)
	return b
}

// downDrainPattern for servers a=5 b=3 c=2 drain d down e=1.
func downDrainPattern(b *caseB) *caseB {
	b.rr(nb, nb, nb, nb, nb, nb, nb, nb, nb)
	b.rr(2, nb, 2, 3, nb, 2, 4, nb, nb, nb, nb, 2, 2, nb)
	b.send("", stale())
	return b
}

// backupOnlyPattern for primaries a, b down and backups c, d=2, e drain.
func backupOnlyPattern(b *caseB) *caseB {
	b.rr(nb, nb, nb, 2, nb, 4, nb, 4, 0, 3, nb, nb, nb)
	return b
}

var (
	rr532         = []srvSpec{sv(0, "weight=5"), sv(1, "weight=3"), sv(2, "weight=2")}
	rrDownDrain   = []srvSpec{sv(0, "weight=5"), sv(1, "weight=3"), sv(2, "weight=2 drain"), sv(3, "down"), sv(4, "")}
	rrBackups     = []srvSpec{sv(0, "down"), sv(1, "down"), sv(2, "backup"), sv(3, "backup weight=2"), sv(4, "backup drain")}
	three         = []srvSpec{sv(0, ""), sv(1, ""), sv(2, "")}
	four          = []srvSpec{sv(0, ""), sv(1, ""), sv(2, ""), sv(3, "")}
	hashDrain     = []srvSpec{sv(0, ""), sv(1, "drain"), sv(2, "down"), sv(3, "weight=2")}
	stickyClients = []string{"10.1.0.5", "10.2.0.5", "10.3.0.5", "10.4.0.5", "10.5.0.5", "10.6.0.5", "10.7.0.5", "10.8.0.5"}
	hashKeys      = []string{"user1", "user2", "user3", "user4", "user5", "user6", "user7", "user8"}
)

// keyedPattern for the keyed methods over four servers: every key unbound,
// then keys bound to servers (some to their own), every key unbound again,
// then a stale cookie and garbage.
func keyedPattern(b *caseB, keys []string) *caseB {
	for _, k := range keys {
		b.send(k, none())
	}
	for i, k := range keys {
		b.send(k, to(i%4))
	}
	for _, k := range keys {
		b.send(k, none())
	}
	b.send(keys[0], stale())
	b.send(keys[1], garbage(stickyGarbage))
	b.send(keys[2], empty())
	return b
}

// keyedDrainPattern for hashDrain: every key unbound (none reaches b or c),
// then keys bound to the draining b and the down c.
func keyedDrainPattern(b *caseB, keys []string) *caseB {
	for _, k := range keys {
		b.send(k, none())
	}
	b.send(keys[0], to(1))
	b.send(keys[1], to(1))
	b.send(keys[2], to(2))
	b.send(keys[3], to(2))
	b.send(keys[4], to(0))
	return b
}

// maxConnsCase: a request held at server a (max_conns=1), a request bound
// to a while it is full, and one after its release.
func maxConnsCase(name, method string) *caseB {
	b := newCase(name, "a bound server full at max_conns", method, "sticky cookie srv", sv(0, "max_conns=1"), sv(1, ""), sv(2, ""))
	b.send("", to(0)).Held = true
	b.rr(0, nb)
	withRelease(b.send("", to(0)), 0)
	b.rr(nb)
	return b
}

func cases(bs ...*caseB) []stickyCase {
	out := make([]stickyCase, len(bs))
	for i, b := range bs {
		out[i] = b.finish()
	}
	return out
}

func withRelease(ex *stickyExchange, held ...int) { ex.ReleaseBefore = held }

// stickyFamilies is every family the recorder writes.
func stickyFamilies() []*stickyFamily {
	return []*stickyFamily{
		cookieAttributes(), cookieRoundRobin(), cookieLeastConn(), cookieKeyed("ip_hash", stickyClients),
		cookieKeyed("hash", hashKeys), cookieKeyed("hash_consistent", hashKeys),
		stickyRoute(), stickyLearn(), stickyFailover(), stickyConfig(),
	}
}

func cookieAttributes() *stickyFamily {
	sid1 := md5hex(stickyAddr(1))
	forms := newCase("attr_cookie_header_forms", "the cookie among others, repeated (the first counts), in two Cookie lines, with its name in capitals (found), quoted (not unquoted), and in upper-case hex (no match)", "round_robin", "sticky cookie srv", three...)
	forms.raw("", to(1), "h:Cookie: a=1; srv="+sid1+"; z=2")
	forms.raw("", garbage(stickyGarbage), "h:Cookie: srv="+stickyGarbage+"; srv="+sid1)
	forms.raw("", to(1), "h:Cookie: srv="+sid1+"; srv="+stickyGarbage)
	forms.raw("", to(1), "h:Cookie: a=1", "h:Cookie: srv="+sid1)
	forms.raw("", to(1), "h:Cookie: SRV="+sid1)
	forms.raw("", garbage("\""+sid1+"\""), "h:Cookie: srv=\""+sid1+"\"")
	forms.send("", garbage(strings.ToUpper(sid1)))

	plain := newCase("attr_none", "no attribute: the cookie is NAME=ID alone, on every answer", "round_robin", "sticky cookie srv", three...)
	plain.rr(nb, nb, 1, nb)
	plain.send("", garbage(stickyGarbage))
	plain.rr(0)
	ex := newCase("attr_expires_path_httponly", "the issue's example", "round_robin", "sticky cookie srv_id expires=1h path=/ httponly", three...)
	ex.rr(nb, 2, nb)
	mx := newCase("attr_max_domain_secure_strict", "expires=max is a fixed date and max-age", "round_robin", "sticky cookie srv expires=max domain=.example.com secure samesite=strict", three...)
	mx.rr(nb, 0)
	lax := newCase("attr_samesite_lax", "", "round_robin", "sticky cookie srv samesite=lax", three...)
	lax.rr(nb)
	sn := newCase("attr_samesite_none", "", "round_robin", "sticky cookie srv samesite=none secure", three...)
	sn.rr(nb)
	mc := newCase("attr_samesite_capitals", "samesite is matched without case and written as configured", "round_robin", "sticky cookie srv samesite=Lax", three...)
	mc.rr(nb)
	rev := newCase("attr_reverse_order", "parameters written in the reverse of the output order", "round_robin", "sticky cookie srv_id path=/app samesite=lax secure httponly domain=example.com expires=30m", three...)
	rev.rr(nb, nb)
	e0 := newCase("attr_expires_0", "", "round_robin", "sticky cookie srv expires=0", three...)
	e0.rr(nb)
	eu := newCase("attr_expires_units", "expires in combined units", "round_robin", "sticky cookie srv expires=1d12h", three...)
	eu.rr(nb)
	ssv := newCase("attr_samesite_variable", "samesite from a variable: an invalid value becomes strict, an empty one leaves the attribute out", "round_robin", "sticky cookie srv samesite=$arg_ss", three...)
	ssv.send("", none(), "q:ss=lax")
	ssv.send("", none(), "q:ss=NONE")
	ssv.send("", none(), "q:ss=bogus")
	ssv.send("", none(), "q:ss=")
	ssv.send("", none())
	dv := newCase("attr_domain_variable", "domain from a variable: empty leaves the attribute out", "round_robin", "sticky cookie srv domain=$arg_d path=/", three...)
	dv.send("", none(), "q:d=.x.test")
	dv.send("", none())
	v6 := newCase("attr_ipv6_server", "a server on [::1]: its id is the md5 of the address with brackets", "round_robin", "sticky cookie srv", sv(0, ""), sv(stickyIPv6Slot, ""))
	v6.rr(nb, nb, 1, 0)
	bc := newCase("attr_backend_cookie", "the backend sets a cookie of its own: both Set-Cookie headers, nginx's first", "round_robin", "sticky cookie srv expires=1h", three...)
	bc.send("", creating(none(), "S1"))
	bc.send("", creating(to(2), "S2"))
	return &stickyFamily{
		Family: "cookie_attributes",
		About:  "sticky cookie's Set-Cookie header, byte for byte, for each attribute, and the request's Cookie header forms; round robin over three equal servers",
		Cases:  cases(plain, ex, mx, lax, sn, mc, rev, e0, eu, ssv, dv, v6, bc, forms),
	}
}

func cookieRoundRobin() *stickyFamily {
	const ck = "sticky cookie srv"
	single := newCase("rr_single_drain", "one primary, draining: bound requests reach it, unbound ones fail", "round_robin", ck, sv(0, "drain"))
	single.rr(0, nb, 0)
	singleB := newCase("rr_single_drain_backup", "one draining primary and a backup", "round_robin", ck, sv(0, "drain"), sv(1, "backup"))
	singleB.rr(0, nb, 1, nb)
	singleDown := newCase("rr_single_down", "", "round_robin", ck, sv(0, "down"))
	singleDown.rr(0, nb)
	allDown := newCase("rr_all_down", "no live upstream: no Set-Cookie", "round_robin", ck, sv(0, "down"), sv(1, "down"))
	allDown.rr(nb, 0)
	routes := newCase("rr_routes", "route= ids; the md5 of a routed server's address is not its id; ids match case-sensitively", "round_robin", ck, sv(0, "weight=2 route=alpha"), sv(1, "route=beta"), sv(2, ""))
	routes.rr(nb, nb, nb, nb, 0, 1, 2)
	routes.send("", garbage(md5hex(stickyAddr(0))))
	routes.send("", garbage("ALPHA"))
	routes.rr(nb, nb)
	dupDown := newCase("rr_duplicate_route_down", "two servers with one route, the first down", "round_robin", ck, sv(0, "route=x down"), sv(1, "route=x"), sv(2, "route=y"))
	dupDown.rr(0, 1, 2, nb, nb, nb, 1)
	dup := newCase("rr_duplicate_route", "two servers with one route", "round_robin", ck, sv(0, "route=x"), sv(1, "route=x"), sv(2, "route=y"))
	dup.rr(1, 1, 0, nb, nb, nb)
	backup := newCase("rr_backup", "a cookie naming a backup while a primary is up", "round_robin", ck, sv(0, ""), sv(1, "down"), sv(2, "backup"), sv(3, "backup weight=2"))
	backup.rr(2, 3, 1, nb, nb, 0)
	mc := maxConnsCase("rr_max_conns", "round_robin")
	return &stickyFamily{
		Family: "cookie_round_robin",
		About:  "sticky cookie over smooth weighted round robin: the low-limit rule, down, drain, backup, route=, max_conns, stale and garbage cookies",
		Cases: cases(
			weightsPattern(newCase("rr_weights_5_3_2", "", "round_robin", ck, rr532...)),
			boundRunPattern(newCase("rr_bound_run", "a run of bound requests, then unbound ones", "round_robin", ck, rr532...)),
			downDrainPattern(newCase("rr_down_drain", "", "round_robin", ck, rrDownDrain...)),
			boundRunPattern(newCase("rr_drain_bound_run", "a run bound to the draining server", "round_robin", ck, sv(0, "weight=5"), sv(1, "weight=3"), sv(2, "weight=2 drain"))),
			backupOnlyPattern(newCase("rr_backup_only", "every primary down: the backups, one draining", "round_robin", ck, rrBackups...)),
			routes, dupDown, dup, backup, single, singleB, singleDown, allDown, mc,
		),
	}
}

func cookieLeastConn() *stickyFamily {
	const ck = "sticky cookie srv expires=2h secure"
	held := newCase("lc_held", "bound requests go to their server whatever its connections", "least_conn", ck, three...)
	held.rr(nb, nb, 0, nb)
	held.c.Requests[0].Held = true
	held.c.Requests[1].Held = true
	held.rr(1)
	withRelease(held.send("", none()), 0, 1)
	held.rr(nb, nb)
	mc := maxConnsCase("lc_max_conns", "least_conn")
	return &stickyFamily{
		Family: "cookie_least_conn",
		About:  "sticky cookie over least_conn: ties shared by smooth weights, a bound request changes no weight; down, drain, backup, max_conns",
		Cases: cases(
			weightsPattern(newCase("lc_weights_5_3_2", "", "least_conn", ck, rr532...)),
			boundRunPattern(newCase("lc_bound_run", "a run of bound requests, then unbound ones", "least_conn", ck, rr532...)),
			downDrainPattern(newCase("lc_down_drain", "", "least_conn", ck, rrDownDrain...)),
			backupOnlyPattern(newCase("lc_backup_only", "every primary down: the backups, one draining", "least_conn", ck, rrBackups...)),
			held, mc,
		),
	}
}

// cookieKeyed is the family of a keyed method: ip_hash (keys are client
// addresses) or hash $arg_k, plain or consistent.
func cookieKeyed(method string, keys []string) *stickyFamily {
	const ck = "sticky cookie srv_id expires=1h path=/ httponly"
	p := map[string]string{"ip_hash": "iph", "hash": "hash", "hash_consistent": "chash"}[method]
	emptyKey := newCase(p+"_single_drain", "one draining server: fewer than two peers, so round robin decides", method, ck, sv(0, "drain"))
	emptyKey.send(keys[0], to(0))
	emptyKey.send(keys[0], none())
	bs := []*caseB{
		keyedPattern(newCase(p+"_plain", "", method, ck, four...), keys),
		keyedPattern(newCase(p+"_weights", "", method, ck, sv(0, "weight=3"), sv(1, ""), sv(2, "weight=2"), sv(3, "")), keys),
		keyedDrainPattern(newCase(p+"_drainbdown", "no unbound key reaches the draining or the down server", method, ck, hashDrain...), keys),
		emptyKey,
	}
	if method != "ip_hash" {
		// An empty key makes hash fall back to round robin, with its
		// low-limit rule for bound requests.
		fb := newCase(p+"_empty_key", "an empty key: round robin decides, bound requests counted as round robin counts them", method, ck, rr532...)
		fb.send("", none())
		fb.send("", none())
		fb.send("", to(2))
		fb.send("", none())
		fb.send("", to(2))
		fb.send("", to(2))
		for i := 0; i < 8; i++ {
			fb.send("", none())
		}
		bs = append(bs, fb)
	}
	return &stickyFamily{
		Family: "cookie_" + method,
		About:  "sticky cookie over " + strings.ReplaceAll(methodDirective[method], ";", "") + ": a bound request overrides the key; drain and down",
		Cases:  cases(bs...),
	}
}

func stickyRoute() *stickyFamily {
	rr := newCase("route_rr", "the first non-empty source wins; ids match exactly (no decoding, case-sensitive); no Set-Cookie", "round_robin", "sticky route $arg_route $cookie_route", sv(0, "route=a1"), sv(1, "route=b1"), sv(2, ""))
	rr.send("", to(0))
	rr.via = "cookie:route"
	rr.send("", to(1))
	rr.via = "arg:route"
	rr.send("", to(2))
	rr.send("", garbage("zz"), "h:Cookie: route=b1")
	rr.raw("", to(1), "q:route=", "h:Cookie: route=b1")
	rr.rr(nb, nb, nb)
	rr.send("", garbage("A1"))
	rr.send("", garbage("a%31"))
	rr.send("", stale())
	rr.rr(nb)
	hh := newCase("route_hash_header", "a header and a cookie as sources, over hash", "hash", "sticky route $http_x_route $cookie_route", sv(0, "route=one"), sv(1, "route=two"), sv(2, "drain route=three"))
	hh.via = "header:X-Route"
	for _, k := range hashKeys[:4] {
		hh.send(k, none())
	}
	hh.send(hashKeys[0], to(2))
	hh.send(hashKeys[1], to(0))
	hh.via = "cookie:route"
	hh.send(hashKeys[2], to(1))
	hh.send(hashKeys[3], to(2))
	md := newCase("route_md5_ids", "sticky route with servers that have no route=: their ids are md5 of the address", "least_conn", "sticky route $cookie_srv", three...)
	md.via = "cookie:srv"
	md.rr(nb, nb, 0, 1, 2)
	md.send("", stale())
	return &stickyFamily{
		Family: "route",
		About:  "sticky route: sources in order, matched against route= values and md5 ids",
		Cases:  cases(rr, hh, md),
	}
}

func stickyLearn() *stickyFamily {
	// Over hash $arg_k with the four servers of the hash family, a key's
	// unbound server is known (user1 b, user2 a, user3 d, user7 c), so a
	// bound answer cannot be mistaken for an unbound one: lookups go with
	// user7, whose own server no session is bound to.
	const (
		keyB, keyA, keyD, keyC = "user1", "user2", "user3", "user7"
	)
	learn := func(name, extra string) *caseB {
		d := "sticky learn create=$upstream_cookie_sess lookup=$cookie_sess zone=" + name + ":1m timeout=2s" + extra
		b := newCase(name, "sessions learned from the backend's sess cookie, timeout 2s; lookups carry key user7 (unbound: the fourth server c)", "hash", d, four...)
		b.send(keyB, creating(none(), "S1"))
		b.send(keyA, creating(none(), "S2"))
		b.send(keyD, creating(none(), "S3"))
		b.send(keyC, session("S1"))
		b.send(keyC, session("S2"))
		b.send(keyC, session("S3"))
		b.send(keyC, none())
		b.send(keyC, session("S9"))
		b.send(keyC, session(md5hex(stickyAddr(1))))
		b.send(keyC, creating(session("S1"), "S4"))
		b.send(keyC, session("S4"))
		b.send(keyC, session("S1")).PauseBeforeMS = 1200
		b.send(keyC, session("S1")).PauseBeforeMS = 1200
		b.send(keyC, session("S2"))
		b.send(keyC, session("S3"))
		b.send(keyC, session("S4"))
		b.send(keyC, session("S1")).PauseBeforeMS = 2500
		b.send(keyC, none())
		return b
	}
	rebind := newCase("learn_rebind", "a session whose server is full at max_conns is served elsewhere and moves there; the held request, ending last, moves it back", "hash",
		"sticky learn create=$upstream_cookie_sess lookup=$cookie_sess zone=learn_rebind:1m", sv(0, ""), sv(1, "max_conns=1"), sv(2, ""), sv(3, ""))
	rebind.send(keyB, creating(none(), "R1"))
	rebind.send(keyB, session("R1")).Held = true
	rebind.send(keyC, session("R1"))
	rebind.send(keyA, session("R1"))
	withRelease(rebind.send(keyA, session("R1")), 1)
	rebind.send(keyA, session("R1"))
	return &stickyFamily{
		Family: "learn",
		About:  "sticky learn over hash $arg_k: creation from the backend's cookie, lookup, refresh, expiry after the timeout, rebinding",
		Cases:  cases(learn("learn_hash", ""), learn("learn_hash_header", " header"), rebind),
	}
}

func stickyFailover() *stickyFamily {
	const ck = "sticky cookie srv"
	next := newCase("fo_next_upstream", "bound to a server that refuses connections: nginx tries another, and the cookie names the one that answered; the failed server is then skipped for fail_timeout", "round_robin", ck, sv(0, ""), sv(1, ""), sv(stickyDeadSlot, ""))
	next.nextUpstream = "error timeout"
	next.rr(2, 2, nb, nb, nb, nb, 2)
	off := newCase("fo_off", "the same with proxy_next_upstream off: a 502", "round_robin", ck, sv(0, ""), sv(1, ""), sv(stickyDeadSlot, ""))
	off.rr(2, 2, nb, nb)
	return &stickyFamily{
		Family: "failover",
		About:  "sticky cookie with a server that refuses connections (failed within fail_timeout)",
		Cases:  cases(next, off),
	}
}

func stickyConfig() *stickyFamily {
	refused := func(name, method, sticky string, servers ...srvSpec) *caseB {
		if len(servers) == 0 {
			servers = []srvSpec{sv(0, ""), sv(1, "")}
		}
		return newCase(name, "refused by nginx -t", method, sticky, servers...)
	}
	dupl := refused("cfg_duplicate_sticky", "round_robin", "sticky cookie a")
	dupl.extra = []string{"sticky cookie b;"}
	before := newCase("cfg_sticky_before_hash", "sticky written before the method: nginx warns and drops sticky", "hash", "sticky cookie srv", three...)
	before.stickyFirst = true
	before.send("user1", none())
	before.send("user1", to(0))
	before.send("user1", to(1))
	before.send("user1", to(2))
	beforeLC := newCase("cfg_sticky_before_least_conn", "the same with least_conn", "least_conn", "sticky cookie srv", three...)
	beforeLC.stickyFirst = true
	beforeLC.rr(nb, 2, 2, nb)
	downDrain := newCase("cfg_down_drain_order", "down and drain share one field: the last written wins", "round_robin", "sticky cookie srv", sv(0, "down drain"), sv(1, "drain down"), sv(2, ""))
	downDrain.rr(0, 1, nb, nb, 0)
	return &stickyFamily{
		Family: "config",
		About:  "configurations nginx refuses (nginx -t's message) and ones it accepts with a surprising effect",
		Cases: cases(
			dupl,
			refused("cfg_ip_hash_backup", "ip_hash", "sticky cookie srv", sv(0, ""), sv(1, "backup")),
			refused("cfg_hash_backup", "hash", "sticky cookie srv", sv(0, ""), sv(1, "backup")),
			refused("cfg_expires_invalid", "round_robin", "sticky cookie srv expires=1x"),
			refused("cfg_expires_duplicate", "round_robin", "sticky cookie srv expires=1h expires=2h"),
			refused("cfg_samesite_invalid", "round_robin", "sticky cookie srv samesite=foo"),
			refused("cfg_unknown_cookie_parameter", "round_robin", "sticky cookie srv max-age=10"),
			refused("cfg_cookie_without_name", "round_robin", "sticky cookie"),
			refused("cfg_unknown_mode", "round_robin", "sticky hash $cookie_x"),
			refused("cfg_route_not_variable", "round_robin", "sticky route route_cookie"),
			refused("cfg_route_too_long", "round_robin", "sticky cookie srv", sv(0, "route="+strings.Repeat("r", 33)), sv(1, "")),
			refused("cfg_route_empty", "round_robin", "sticky cookie srv", sv(0, "route="), sv(1, "")),
			refused("cfg_learn_no_zone", "round_robin", "sticky learn create=$upstream_cookie_sess lookup=$cookie_sess"),
			refused("cfg_learn_no_create", "round_robin", "sticky learn lookup=$cookie_sess zone=nc:1m"),
			refused("cfg_learn_zone_small", "round_robin", "sticky learn create=$upstream_cookie_sess lookup=$cookie_sess zone=small:16k"),
			refused("cfg_learn_timeout_zero", "round_robin", "sticky learn create=$upstream_cookie_sess lookup=$cookie_sess zone=tz:1m timeout=0"),
			before, beforeLC, downDrain,
		),
	}
}
