package caddyplugin

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// benchPool returns n static upstreams with Caddy's host state attached (its
// own policies read it) and weights 1..10 repeating.
func benchPool(n int) (reverseproxy.UpstreamPool, []int) {
	p := make(reverseproxy.UpstreamPool, n)
	w := make([]int, n)
	for i := range p {
		p[i] = &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: "10.1." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250+1) + ":80"}
		w[i] = 1 + i%10
	}
	return p, w
}

// benchRequests returns 1024 requests with distinct URIs and client IPs.
func benchRequests() []*http.Request {
	rs := make([]*http.Request, 1024)
	for i := range rs {
		r := request("/item/"+strconv.Itoa(i*7919), nil)
		r.RequestURI = r.URL.RequestURI()
		r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("http.request.uri", r.RequestURI)
		ip := "10.9." + strconv.Itoa(i/4) + "." + strconv.Itoa(i%4+1)
		caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, ip)
		r.RemoteAddr = ip + ":5555"
		rs[i] = r
	}
	return rs
}

// BenchmarkSelect compares lbpack's Select with Caddy's built-in policies
// over the same static pools in one run. The ratios to report are
// caddy_weighted_round_robin / smooth_wrr, caddy_uri_hash / url_hash_*,
// caddy_client_ip_hash / nginx_ip_hash and caddy_least_conn /
// weighted_least_conn.
func BenchmarkSelect(b *testing.B) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	reqs := benchRequests()
	for _, n := range []int{10, 100, 1000} {
		up, weights := benchPool(n)
		caddyWRR := &reverseproxy.WeightedRoundRobinSelection{Weights: weights}
		if err := caddyWRR.Provision(ctx); err != nil {
			b.Fatal(err)
		}
		// With one upstream unhealthy lbpack's policies pick with a filter
		// that leaves it out (see seen); smooth_wrr makes nginx's O(n) pass
		// until it has learnt the schedule over the others (core's
		// a Filter's Version), within two of its periods: the warm-up below.
		oneDown := up[n/2]
		period := 0
		for _, w := range weights {
			period += w
		}
		policies := []struct {
			name string
			sel  reverseproxy.Selector
			down *reverseproxy.Upstream // seen unhealthy by the lbpack policy
			// noRetries: in a reverse proxy without lb_retries or
			// lb_try_duration, whose Selects are all first tries.
			noRetries bool
		}{
			{"caddy_round_robin", new(reverseproxy.RoundRobinSelection), nil, false},
			{"caddy_weighted_round_robin", caddyWRR, nil, false},
			{"caddy_least_conn", reverseproxy.LeastConnSelection{}, nil, false},
			{"caddy_uri_hash", reverseproxy.URIHashSelection{}, nil, false},
			{"caddy_client_ip_hash", reverseproxy.ClientIPHashSelection{}, nil, false},
			{"smooth_wrr", &SmoothWRR{base: base{Options: Options{Weights: weights}}}, nil, false},
			{"smooth_wrr_no_retries", &SmoothWRR{base: base{Options: Options{Weights: weights}}}, nil, true},
			{"smooth_wrr_one_unhealthy", &SmoothWRR{base: base{Options: Options{Weights: weights}}}, oneDown, false},
			{"gcd_wrr", &GCDWRR{base: base{Options: Options{Weights: weights}}}, nil, false},
			{"url_hash_ketama", &URLHash{base: base{Options: Options{Weights: weights}}}, nil, false},
			{"url_hash_maglev", &URLHash{base: base{Options: Options{Weights: weights}}, Mode: "maglev"}, nil, false},
			{"nginx_ip_hash", &NginxIPHash{base: base{Options: Options{Weights: weights}}}, nil, false},
			{"weighted_least_conn", &WeightedLeastConn{base: base{Options: Options{Weights: weights}}}, nil, false},
			{"weighted_least_conn_two_choices", &WeightedLeastConn{base: base{Options: Options{Weights: weights}}, TwoChoices: true}, nil, false},
			{"fair", &Fair{base: base{Options: Options{Weights: weights}}}, nil, false},
		}
		for _, pc := range policies {
			if s, ok := pc.sel.(selector); ok {
				// Caddy's own health predicates, as Select uses them in Caddy.
				provision(b, s, &health{})
				down := pc.down
				s.pol().healthy = func(u *reverseproxy.Upstream) bool { return u != down && u.Healthy() }
				s.pol().available = func(u *reverseproxy.Upstream) bool { return u != down && u.Available() }
				if pc.noRetries {
					s.pol().retries = false // as checkAgainstHandler sets it
				}
			}
			// Each Select is a new request's first try: forget ends the
			// try and drops what the policy remembers of the request, as
			// if it had ended (Caddy's policies remember nothing).
			forget := func(*http.Request) {}
			if s, ok := pc.sel.(selector); ok {
				forget = s.pol().forget
			}
			// Build the balancer outside the timing, and with an upstream
			// down let smooth_wrr learn its schedule.
			warm := 1
			if pc.down != nil {
				warm = 3 * period
			}
			for i := 0; i < warm; i++ {
				pc.sel.Select(up, reqs[0], nil)
				forget(reqs[0])
			}
			b.Run("n="+strconv.Itoa(n)+"/"+pc.name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					r := reqs[i&1023]
					if pc.sel.Select(up, r, nil) == nil {
						b.Fatal("nil pick")
					}
					forget(r)
				}
			})
		}
	}
	for _, r := range reqs {
		cancelRequest(r)
	}
}
