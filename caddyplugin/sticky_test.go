package caddyplugin

import (
	"strings"
	"testing"
)

// The sticky options adapt to their JSON, in every form.
func TestStickyCaddyfileAdapt(t *testing.T) {
	const three = "10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 {\n\t\tlb_policy "
	tests := []struct {
		name, proxy, want string
	}{
		{"cookie with every attribute",
			three + "smooth_wrr {\n\t\t\tsticky cookie srv_id {\n\t\t\t\texpires 1h\n\t\t\t\tdomain example.com\n\t\t\t\tpath /\n\t\t\t\thttponly\n\t\t\t\tsecure\n\t\t\t\tsamesite Lax\n\t\t\t\tvalue caddy\n\t\t\t\tsecret s3\n\t\t\t}\n\t\t}\n\t}",
			`{"policy":"smooth_wrr","sticky":{"cookie":{"domain":"example.com","expires":"1h","httponly":true,"name":"srv_id","path":"/","samesite":"Lax","secret":"s3","secure":true,"value":"caddy"}}}`},
		{"cookie without block",
			three + "weighted_least_conn {\n\t\t\tsticky cookie srv\n\t\t}\n\t}",
			`{"policy":"weighted_least_conn","sticky":{"cookie":{"name":"srv"}}}`},
		{"route, drain and routes",
			three + "nginx_ip_hash {\n\t\t\troute 10.0.0.1:80 a\n\t\t\troute 10.0.0.2:80 b\n\t\t\tdrain 10.0.0.2:80 10.0.0.3:80\n\t\t\tsticky route query:route cookie:route header:X-Route\n\t\t}\n\t}",
			`{"policy":"nginx_ip_hash","sticky":{"route":["query:route","cookie:route","header:X-Route"]},"upstreams":{"10.0.0.1:80":{"route":"a"},"10.0.0.2:80":{"drain":true,"route":"b"},"10.0.0.3:80":{"drain":true}}}`},
		{"learn",
			three + "url_hash {\n\t\t\tsticky learn {\n\t\t\t\tcreate upstream_cookie:sess\n\t\t\t\tcreate upstream_header:X-Sess query:s\n\t\t\t\tlookup cookie:sess\n\t\t\t\ttimeout 1h\n\t\t\t\theader\n\t\t\t\tmax_sessions 100\n\t\t\t}\n\t\t}\n\t}",
			`{"policy":"url_hash","sticky":{"learn":{"create":["upstream_cookie:sess","upstream_header:X-Sess","query:s"],"header":true,"lookup":["cookie:sess"],"max_sessions":100,"timeout":3600000000000}}}`},
		{"traefik value",
			three + "fair {\n\t\t\tsticky cookie _tr {\n\t\t\t\tvalue traefik\n\t\t\t\texpires max\n\t\t\t}\n\t\t}\n\t}",
			`{"policy":"fair","sticky":{"cookie":{"expires":"max","name":"_tr","value":"traefik"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := adapt(t, site(tt.proxy))
			if err != nil {
				t.Fatal(err)
			}
			if got := selectionPolicy(t, cfg); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if err := validate(cfg); err != nil {
				t.Errorf("does not load: %v", err)
			}
		})
	}
}

// Every mistake in a sticky option fails when the Caddyfile is adapted,
// in the Caddyfile's words, naming the value.
func TestStickyCaddyfileAdaptErrors(t *testing.T) {
	const three = "10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 {\n\t\tlb_policy smooth_wrr {\n\t\t\t"
	const end = "\n\t\t}\n\t}"
	tests := []struct{ name, opts, want string }{
		{"no kind", "sticky", `lb_policy smooth_wrr: sticky: missing the kind (want cookie, route or learn)`},
		{"unknown kind", "sticky hash $cookie_x", `lb_policy smooth_wrr: sticky "hash": unknown kind`},
		{"twice", "sticky cookie a\n\t\t\tsticky cookie b", `lb_policy smooth_wrr: sticky: given twice`},
		{"cookie without name", "sticky cookie", `lb_policy smooth_wrr: sticky cookie: missing the cookie's name`},
		{"cookie name extra", "sticky cookie a b", `sticky cookie a: unexpected argument "b"`},
		{"cookie bad name", "sticky cookie a;b", `sticky cookie "a;b": the name may not hold ';'`},
		{"samesite", "sticky cookie srv {\n\t\t\t\tsamesite x\n\t\t\t}", `lb_policy smooth_wrr: sticky cookie samesite "x": want strict, lax or none`},
		{"expires", "sticky cookie srv {\n\t\t\t\texpires 1x\n\t\t\t}", `lb_policy smooth_wrr: sticky cookie expires "1x": want a time such as 1h or 1d12h, max, or 0`},
		{"expires twice", "sticky cookie srv {\n\t\t\t\texpires 1h\n\t\t\t\texpires 2h\n\t\t\t}", `sticky cookie expires: given twice`},
		{"unknown cookie option", "sticky cookie srv {\n\t\t\t\tmax-age 10\n\t\t\t}", `sticky cookie: unknown option "max-age"`},
		{"domain without value", "sticky cookie srv {\n\t\t\t\tdomain\n\t\t\t}", `sticky cookie domain: missing the value`},
		{"path with semicolon", "sticky cookie srv {\n\t\t\t\tpath \"/a;b\"\n\t\t\t}", `sticky cookie path "/a;b": may not hold ';' or a line break`},
		{"httponly argument", "sticky cookie srv {\n\t\t\t\thttponly yes\n\t\t\t}", `sticky cookie httponly: unexpected argument "yes"`},
		{"value", "sticky cookie srv {\n\t\t\t\tvalue haproxy\n\t\t\t}", `sticky cookie value "haproxy": want nginx, caddy or traefik`},
		{"traefik secret", "sticky cookie srv {\n\t\t\t\tvalue traefik\n\t\t\t\tsecret s\n\t\t\t}", `sticky cookie secret: Traefik's value has no secret`},
		{"route without sources", "sticky route", `sticky route: missing the sources`},
		{"route bad source", "sticky route $arg_route", `sticky route "$arg_route": want query:NAME, cookie:NAME or header:NAME`},
		{"route upstream source", "sticky route upstream_cookie:x", `sticky route "upstream_cookie:x": the upstream's answer cannot name the request's backend`},
		{"learn without create", "sticky learn {\n\t\t\t\tlookup cookie:sess\n\t\t\t}", `sticky learn: create: missing`},
		{"learn without lookup", "sticky learn {\n\t\t\t\tcreate upstream_cookie:sess\n\t\t\t}", `sticky learn: lookup: missing`},
		{"learn lookup upstream", "sticky learn {\n\t\t\t\tcreate upstream_cookie:sess\n\t\t\t\tlookup upstream_cookie:sess\n\t\t\t}", `sticky learn lookup "upstream_cookie:sess": the upstream's answer cannot name the request's backend`},
		{"learn bad create", "sticky learn {\n\t\t\t\tcreate $upstream_cookie_sess\n\t\t\t\tlookup cookie:sess\n\t\t\t}", `sticky learn create "$upstream_cookie_sess": want query:NAME, cookie:NAME, header:NAME, upstream_cookie:NAME or upstream_header:NAME`},
		{"learn timeout 0", "sticky learn {\n\t\t\t\ttimeout 0\n\t\t\t}", `sticky learn timeout "0": want a positive duration`},
		{"learn max_sessions 0", "sticky learn {\n\t\t\t\tmax_sessions 0\n\t\t\t}", `sticky learn max_sessions "0": want a whole number of at least 1`},
		{"learn unknown", "sticky learn {\n\t\t\t\tzone z:1m\n\t\t\t}", `sticky learn: unknown option "zone"`},
		{"learn header argument", "sticky learn {\n\t\t\t\theader yes\n\t\t\t}", `sticky learn header: unexpected argument "yes"`},
		{"route empty", "route 10.0.0.1:80 \"\"", `lb_policy smooth_wrr: route 10.0.0.1:80: empty`},
		{"route too long", "route 10.0.0.1:80 " + strings.Repeat("r", 33), `route 10.0.0.1:80 "` + strings.Repeat("r", 33) + `": longer than 32 bytes`},
		{"route with semicolon", "route 10.0.0.1:80 \"a;b\"", `route 10.0.0.1:80 "a;b": ';' cannot be in a cookie's value`},
		{"route without value", "route 10.0.0.1:80", `route 10.0.0.1:80: missing the value`},
		{"route twice", "route 10.0.0.1:80 a\n\t\t\troute 10.0.0.1:80 b", `route 10.0.0.1:80: given twice`},
		{"drain without address", "drain", `drain: missing the upstream address`},
		{"drain bad address", "drain 10.0.0.1", `drain "10.0.0.1": want host:port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, site(three+tt.opts+end))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v\nwant one containing %s", err, tt.want)
			}
		})
	}
}

// What needs the upstreams or the whole policy fails when the config loads:
// the Caddyfile, and the JSON for each error of the options alone.
func TestStickyProvisionErrors(t *testing.T) {
	const three = "10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 {\n\t\tlb_policy "
	for _, tt := range []struct{ name, proxy, want string }{
		{"drain not an upstream", three + "smooth_wrr {\n\t\t\tdrain 10.0.0.9:80\n\t\t}\n\t}", `lb_policy smooth_wrr: drain 10.0.0.9:80: not one of the reverse proxy's upstreams`},
		{"route not an upstream", three + "weighted_least_conn {\n\t\t\troute 10.0.0.9:80 a\n\t\t}\n\t}", `lb_policy weighted_least_conn: route 10.0.0.9:80: not one of the reverse proxy's upstreams`},
		{"down and drain", three + "smooth_wrr {\n\t\t\tdown 10.0.0.2:80\n\t\t\tdrain 10.0.0.2:80\n\t\t}\n\t}", `lb_policy smooth_wrr: down and drain 10.0.0.2:80: an upstream is down or draining, not both`},
		{"sticky with fallback", three + "url_hash {\n\t\t\tfallback random\n\t\t\tsticky cookie srv\n\t\t}\n\t}", `lb_policy url_hash: sticky and fallback: the fallback policy would pick without the sticky binding`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := adapt(t, site(tt.proxy))
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			if err := validate(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v\nwant one containing %s", err, tt.want)
			}
		})
	}
	const ups = `[{"dial":"10.0.0.1:80"},{"dial":"10.0.0.2:80"}]`
	cfg := func(policy string) []byte {
		return []byte(`{"admin":{"disabled":true},"apps":{"http":{"servers":{"s":{"listen":[":0"],"routes":[{"handle":[{"handler":"reverse_proxy","upstreams":` + ups + `,"load_balancing":{"selection_policy":` + policy + `}}]}]}}}}}`)
	}
	for _, tt := range []struct{ policy, want string }{
		{`{"policy":"smooth_wrr","sticky":{}}`, `lb_policy smooth_wrr: sticky: give exactly one of cookie, route and learn`},
		{`{"policy":"smooth_wrr","sticky":{"cookie":{"name":"a"},"route":["cookie:r"]}}`, `sticky: give exactly one of cookie, route and learn`},
		{`{"policy":"gcd_wrr","sticky":{"cookie":{"name":""}}}`, `lb_policy gcd_wrr: sticky cookie: empty cookie name`},
		{`{"policy":"fair","sticky":{"cookie":{"name":"s","samesite":"x"}}}`, `lb_policy fair: sticky cookie samesite "x": want strict, lax or none`},
		{`{"policy":"fair","sticky":{"cookie":{"name":"s","expires":"soon"}}}`, `lb_policy fair: sticky cookie expires "soon"`},
		{`{"policy":"fair","sticky":{"cookie":{"name":"s","value":"x"}}}`, `sticky cookie value "x": want nginx, caddy or traefik`},
		{`{"policy":"url_hash","sticky":{"route":["arg:x"]}}`, `lb_policy url_hash: sticky route "arg:x"`},
		{`{"policy":"url_hash","sticky":{"learn":{"create":["upstream_cookie:s"],"lookup":["cookie:s"],"timeout":-1}}}`, `sticky learn timeout -1ns: want a positive duration`},
		{`{"policy":"url_hash","sticky":{"learn":{"create":["upstream_cookie:s"],"lookup":["cookie:s"],"max_sessions":-1}}}`, `sticky learn max_sessions -1`},
		{`{"policy":"smooth_wrr","upstreams":{"10.0.0.2:80":{"route":"` + strings.Repeat("x", 33) + `"}}}`, `lb_policy smooth_wrr: route 10.0.0.2:80 "` + strings.Repeat("x", 33) + `": longer than 32 bytes`},
		{`{"policy":"smooth_wrr","upstreams":{"10.0.0.2:80":{"down":true,"drain":true}}}`, `lb_policy smooth_wrr: down and drain 10.0.0.2:80`},
	} {
		if err := validate(cfg(tt.policy)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v\nwant an error containing %s", tt.policy, err, tt.want)
		}
	}
}
