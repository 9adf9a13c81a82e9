package caddyplugin

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
)

// fuzzModules returns a fresh module of every policy.
func fuzzModules() []interface {
	selector
	caddyfile.Unmarshaler
	caddy.Validator
} {
	return []interface {
		selector
		caddyfile.Unmarshaler
		caddy.Validator
	}{new(SmoothWRR), new(GCDWRR), new(URLHash), new(Fair), new(WeightedLeastConn), new(NginxIPHash)}
}

// FuzzUnmarshalCaddyfile feeds the tokens of an lb_policy line and block to
// every policy's UnmarshalCaddyfile. Nothing may panic; an error must say
// something; and what a policy accepts must survive Caddy's JSON round trip,
// Validate, Provision (which builds the balancer over the addresses the
// options name) and a Select over those addresses.
func FuzzUnmarshalCaddyfile(f *testing.F) {
	for _, seed := range []string{
		"smooth_wrr 5 3 2",
		"smooth_wrr {\n\tweight 10.0.0.1:80 5\n\tslow_start 10.0.0.1:80 30s\n\tbackup 10.0.0.3:80\n\tdown 10.0.0.4:80\n\tstagger\n}",
		"gcd_wrr 4 2 {\n\tstagger\n}",
		"url_hash {\n\tkey {http.request.header.X-User}\n\tmode maglev\n}",
		"url_hash 2 1 {\n\tkey {http.request.cookie.sid}\n\tmode bounded\n\tload_factor 1.5\n}",
		"url_hash {\n\tkey {client_ip}\n\tmode ketama\n\tdown 10.0.0.2:80\n\tfallback smooth_wrr {\n\t\tstagger\n\t}\n}",
		"url_hash {\n\tmode modulo\n\tmode modulo\n}",
		"url_hash {\n\tkey \"\"\n}",
		"fair 3 1 {\n\tdecay_time 5s\n}",
		"fair {\n\tdecay_time -5s\n}",
		"weighted_least_conn {\n\tweight 10.0.0.2:80 3\n\ttwo_choices\n\tmax_conns 10.0.0.2:80 4\n}",
		"nginx_ip_hash 2 1 1",
		"smooth_wrr {\n\tmax_fails 2\n\tfail_timeout 30s\n\tmax_conns 100\n\tmax_fails 10.0.0.1:80 3\n\tfail_timeout 10.0.0.1:80 5s\n}",
		"smooth_wrr {\n\tbackup 10.0.0.3:80\n\tdown 10.0.0.3:80\n}",
		"smooth_wrr 5 x 2",
		"smooth_wrr 5 2000000 2",
		"smooth_wrr {\n\tweight [::1]:8080 7\n\tdown \"h\nk:80\"\n}",
		"url_hash 40000 40000 {\n\tweight 10.0.0.1:80 2\n}",
		"smooth_wrr {\n\tbogus\n}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		tokens, err := caddyfile.Tokenize([]byte(input), "Caddyfile")
		if err != nil || len(tokens) == 0 {
			return
		}
		for i, m := range fuzzModules() {
			err := m.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens))
			if err != nil {
				if err.Error() == "" {
					t.Fatalf("%T: empty error for %q", m, input)
				}
				continue
			}
			checkAccepted(t, m, fuzzModules()[i], input)
		}
	})
}

// checkAccepted runs what a policy m accepted from input through Caddy's
// JSON round trip, Validate, Provision and Select.
// again is a fresh module of m's type.
func checkAccepted(t *testing.T, m, again interface {
	selector
	caddy.Validator
}, input string) {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("%T from %q: marshal: %v", m, input, err)
	}
	if err := json.Unmarshal(raw, again); err != nil {
		t.Fatalf("%T from %q: JSON %s does not read back: %v", m, input, raw, err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	again.pol().logger = zap.NewNop()
	if err := again.Provision(ctx); err != nil {
		if err.Error() == "" {
			t.Fatalf("%T from %q: empty Provision error", m, input)
		}
		return
	}
	defer again.pol().cleanup()
	if err := again.Validate(); err != nil {
		t.Fatalf("%T from %q: provisioned but Validate says %v", m, input, err)
	}
	// A pool of the addresses the options name, plus one.
	dials := append(again.pol().opts.addresses(), "192.0.2.1:80")
	p := make(reverseproxy.UpstreamPool, len(dials))
	for i, d := range dials {
		p[i] = &reverseproxy.Upstream{Dial: d}
	}
	for i := 0; i < 3; i++ {
		r := request("/", nil)
		again.Select(p, r, nil)
		again.Select(p, r, nil) // a retry
		cancelRequest(r)
	}
}
