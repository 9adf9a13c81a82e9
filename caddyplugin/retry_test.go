package caddyplugin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/lbpack/lbpack/core"
)

// allPolicies returns a fresh module of every policy (and url_hash's
// modes) with the given positional weights.
func allPolicies(weights ...int) []selector {
	w := func() base { return base{Options: Options{Weights: weights}} }
	return []selector{
		&SmoothWRR{base: w()},
		&GCDWRR{base: w()},
		&URLHash{base: w()},
		&URLHash{base: w(), Mode: core.HashModulo},
		&URLHash{base: w(), Mode: core.HashMaglev},
		&URLHash{base: w(), Mode: core.HashBounded},
		&Fair{base: w()},
		&WeightedLeastConn{base: w()},
		&NginxIPHash{base: w()},
	}
}

func label(m selector) string {
	if u, ok := m.(*URLHash); ok && u.Mode != "" {
		return "url_hash " + u.Mode
	}
	return m.pol().name
}

// A retry of one request (a second Select with the same request) never gets
// an upstream the request has tried: three Selects of one request over three
// upstreams give the three, and a fourth gets nil (Caddy then answers with
// the last try's error). A new request starts afresh.
func TestRetryNeverRepeats(t *testing.T) {
	static := pool(abc...)
	for _, m := range allPolicies(5, 3, 2) {
		provision(t, m, &health{})
		for n := 0; n < 20; n++ {
			r := request("/k"+strconv.Itoa(n), nil)
			caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, "198.51."+strconv.Itoa(n)+".7")
			seen := map[string]bool{}
			for try := 1; try <= 3; try++ {
				u := m.Select(static, r, nil)
				if u == nil {
					t.Fatalf("%s, request %d, try %d: nil with %d of 3 upstreams untried", label(m), n, try, 3-len(seen))
				}
				if seen[u.Dial] {
					t.Fatalf("%s, request %d, try %d: %s again", label(m), n, try, names[u.Dial])
				}
				seen[u.Dial] = true
			}
			if u := m.Select(static, r, nil); u != nil {
				t.Errorf("%s, request %d: fourth try got %s; every upstream was tried", label(m), n, names[u.Dial])
			}
			cancelRequest(r)
		}
		waitIdle(t, m.pol())
	}
}

// With lb_try_duration (rounds) a request that has tried every upstream
// starts a new round, which again visits each once.
func TestRetryRoundsWithTryDuration(t *testing.T) {
	m := &SmoothWRR{}
	provision(t, m, &health{})
	m.p.rounds = true
	static := pool(abc...)
	r := request("/", nil)
	got := map[string]int{}
	for try := 0; try < 6; try++ {
		u := m.Select(static, r, nil)
		if u == nil {
			t.Fatalf("try %d: nil", try+1)
		}
		got[names[u.Dial]]++
	}
	if fmt.Sprint(got) != "map[a:2 b:2 c:2]" {
		t.Errorf("six tries over a b c in rounds: %v, want each twice", got)
	}
}

// The hash policies pass a retried request on in nginx's order: to the
// upstream nginx would pick were the tried ones down (ketama: the next ring
// point; plain hash and ip_hash: nginx's next rehash), which core's
// conformance tests hold to nginx.
func TestRetryHashOrder(t *testing.T) {
	dials := []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"}
	static := pool(dials...)
	weights := []int{5, 3, 2, 1}
	for _, tt := range []struct {
		m   selector
		cfg core.Config
		key func(n int) string
	}{
		{&URLHash{}, core.Config{Strategy: core.URLHash}, func(n int) string { return "/k" + strconv.Itoa(n) }},
		{&URLHash{Mode: core.HashModulo}, core.Config{Strategy: core.URLHash, HashMode: core.HashModulo}, func(n int) string { return "/k" + strconv.Itoa(n) }},
		{&NginxIPHash{}, core.Config{Strategy: core.IPHash}, func(n int) string { return "203.0." + strconv.Itoa(n) + ".9" }},
	} {
		switch m := tt.m.(type) {
		case *URLHash:
			m.Weights = weights
		case *NginxIPHash:
			m.Weights = weights
		}
		provision(t, tt.m, &health{})
		// want is core's pick for key with the backends in down marked down.
		want := func(key string, down map[string]bool) string {
			cfg := tt.cfg
			for i, d := range dials {
				cfg.Backends = append(cfg.Backends, core.Backend{Address: d, Weight: weights[i], Down: down[d]})
			}
			b, err := core.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			i, _ := core.Pick(b, key, core.Filter{}) // a fresh balancer per key: nothing to end
			if i < 0 {
				return "-"
			}
			return dials[i]
		}
		for n := 0; n < 200; n++ {
			key := tt.key(n)
			target := key
			if target[0] != '/' {
				target = "/"
			}
			r := request(target, nil)
			caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, key)
			down := map[string]bool{}
			for try := 1; try <= 3; try++ {
				u := tt.m.Select(static, r, nil)
				if u == nil {
					t.Fatalf("%s, key %s, try %d: nil", label(tt.m), key, try)
				}
				if w := want(key, down); u.Dial != w {
					t.Fatalf("%s, key %s, try %d (tried %v): got %s, want %s", label(tt.m), key, try, down, u.Dial, w)
				}
				down[u.Dial] = true
			}
			cancelRequest(r)
		}
	}
}

// A request seen outside Caddy's HTTP server (no variables) still gets a
// pick, and nothing panics.
func TestSelectWithoutVars(t *testing.T) {
	for _, m := range allPolicies(5, 3, 2) {
		provision(t, m, &health{})
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if u := m.Select(pool(abc...), r, nil); u == nil {
			t.Errorf("%s: nil pick without request variables", label(m))
		}
	}
}

// A client that goes away before the upstream answers is no failure of the
// upstream: 200 abandoned requests leave fair's failure counts at 0 and its
// estimates finite; a request Caddy ends with an error, and a retried one,
// are failures.
func TestAbandonedIsNotFailure(t *testing.T) {
	m := &Fair{}
	provision(t, m, &health{})
	static := pool(abc...)
	for n := 0; n < 200; n++ {
		r := request("/", nil)
		if m.Select(static, r, nil) == nil {
			t.Fatal("nil pick")
		}
		cancelRequest(r) // no answer, no error: the client left
	}
	waitIdle(t, &m.p)
	bal, _, _ := m.p.current()
	for i := 0; i < bal.Len(); i++ {
		if f, l := bal.Fails(i), bal.Latency(i); f != 0 || l < 0 || l > time.Second {
			t.Errorf("%s after 200 abandoned requests: %d failures, estimate %v; want 0 and a finite estimate", names[bal.Backend(i).Address], f, l)
		}
	}

	// Caddy ends a request with an error: its try failed.
	r := request("/", nil)
	u := m.Select(static, r, nil)
	r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("http.error", errors.New("dial tcp: connection refused"))
	cancelRequest(r)
	waitIdle(t, &m.p)
	if f := bal.Fails(bal.Index(u.Dial)); f != 1 {
		t.Errorf("a request ended with an error: %d failures of %s, want 1", f, names[u.Dial])
	}
	// A retry: the previous try failed.
	r = request("/", nil)
	u = m.Select(static, r, nil)
	before := bal.Fails(bal.Index(u.Dial))
	m.Select(static, r, nil)
	if f := bal.Fails(bal.Index(u.Dial)); f != before+1 {
		t.Errorf("a retried try: %d failures of %s, want %d", f, names[u.Dial], before+1)
	}
	cancelRequest(r)
	waitIdle(t, &m.p)
}

// What the tracking policies time is Caddy's upstream latency (to the
// response headers), not the life of the client's request: an answer in
// 2 ms whose body streams for 40 ms more counts 2 ms. (Which upstreams
// fair's first three picks reach is its weighted draw's: every upstream
// picked is checked.)
func TestAttemptTimesUpstreamLatency(t *testing.T) {
	m := &Fair{}
	provision(t, m, &health{})
	static := pool(abc...)
	for n := 0; n < 3; n++ {
		r := request("/", nil)
		m.Select(static, r, nil)
		r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("http.reverse_proxy.upstream.latency", 2*time.Millisecond)
		time.Sleep(40 * time.Millisecond)
		cancelRequest(r)
	}
	waitIdle(t, &m.p)
	bal, _, stats := m.p.current()
	picks := int64(0)
	for i := 0; i < bal.Len(); i++ {
		if stats[i].picks.Load() == 0 {
			continue
		}
		picks += stats[i].picks.Load()
		if l, avg := bal.Latency(i), time.Duration(stats[i].latency.Load()); l != 2*time.Millisecond || avg != 2*time.Millisecond {
			t.Errorf("%s: estimate %v, average %v; want the upstream's 2ms", names[bal.Backend(i).Address], l, avg)
		}
	}
	if picks != 3 {
		t.Errorf("%d picks counted, want the 3 tries", picks)
	}
}

// Caddy calls Select again for a request only when the reverse proxy has
// lb_retries or lb_try_duration: without them a policy records nothing in
// the request (a context lookup and a map write saved on every request),
// and with them a retry still avoids the upstream tried.
func TestRetryOnlyWhenTheProxyRetries(t *testing.T) {
	for _, tt := range []struct {
		name     string
		m        selector
		lb       reverseproxy.LoadBalancing
		recorded bool
	}{
		{"smooth_wrr", &SmoothWRR{}, reverseproxy.LoadBalancing{}, false},
		{"fair", &Fair{}, reverseproxy.LoadBalancing{}, false},
		{"smooth_wrr lb_retries", &SmoothWRR{}, reverseproxy.LoadBalancing{Retries: 2}, true},
		{"fair lb_try_duration", &Fair{}, reverseproxy.LoadBalancing{TryDuration: caddy.Duration(time.Second)}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			provision(t, tt.m, &health{})
			static := pool(abc...)
			// What Provision does inside this reverse proxy.
			h := &reverseproxy.Handler{Upstreams: static, LoadBalancing: &tt.lb}
			if err := tt.m.pol().checkAgainstHandler(h); err != nil {
				t.Fatal(err)
			}
			vars := map[string]any{}
			r := request("/", vars)
			defer cancelRequest(r)
			first := tt.m.Select(static, r, nil)
			_, recorded := vars[tt.m.pol().attemptVar]
			if first == nil || recorded != tt.recorded {
				t.Fatalf("first try %v, recorded in the request: %v, want %v", first, recorded, tt.recorded)
			}
			if !tt.recorded {
				return
			}
			if again := tt.m.Select(static, r, nil); again == nil || again == first {
				t.Errorf("retry went to %v after %v", again, first)
			}
		})
	}
}
