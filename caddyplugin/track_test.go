package caddyplugin

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// A try the upstream answered counts as its failure when the answer's
// status is one of the policy's fail_status (fair's default: 5xx; none for
// the others, as nginx without http_ conditions), and as a success, timed,
// otherwise.
func TestAnsweredStatusOutcome(t *testing.T) {
	fair := func(codes ...int) selector { return &Fair{base: base{Options: Options{FailStatus: codes}}} }
	wlc := func(codes ...int) selector {
		return &WeightedLeastConn{base: base{Options: Options{MaxFails: 100, FailStatus: codes}}}
	}
	smooth := func(codes ...int) selector {
		return &SmoothWRR{base: base{Options: Options{MaxFails: 100, FailStatus: codes}}}
	}
	tests := []struct {
		name   string
		m      selector
		status int
		failed bool
	}{
		{"fair default 500", fair(), 500, true},
		{"fair default 503", fair(), 503, true},
		{"fair default 599", fair(), 599, true},
		{"fair default 200", fair(), 200, false},
		{"fair default 404", fair(), 404, false},
		{"fair default 429", fair(), 429, false},
		{"fair 502 503: 502", fair(502, 503), 502, true},
		{"fair 502 503: 500", fair(502, 503), 500, false},
		{"fair 5xx 429: 429", fair(5, 429), 429, true},
		{"fair 4xx: 404", fair(4), 404, true},
		{"weighted_least_conn default 500", wlc(), 500, false},
		{"weighted_least_conn 5xx: 502", wlc(5), 502, true},
		{"weighted_least_conn 5xx: 302", wlc(5), 302, false},
		{"smooth_wrr default 503", smooth(), 503, false},
		{"smooth_wrr 503: 503", smooth(503), 503, true},
		{"smooth_wrr 503: 504", smooth(503), 504, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provision(t, tt.m, &health{})
			p := tt.m.pol()
			r := request("/", nil)
			u := tt.m.Select(pool(abc...), r, nil)
			repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
			repl.Set(latencyPlaceholder, time.Millisecond)
			repl.Set(statusPlaceholder, tt.status)
			cancelRequest(r)
			waitIdle(t, p)
			bal, _, stats := p.current()
			i := bal.Index(u.Dial)
			fails, counted, avg := bal.Fails(i), stats[i].failures.Load(), time.Duration(stats[i].latency.Load())
			switch {
			case tt.failed && (fails != 1 || counted != 1 || avg != 0):
				t.Errorf("answered %d: %d failures (%d counted), average %v; want 1 and no latency sample", tt.status, fails, counted, avg)
			case !tt.failed && (fails != 0 || counted != 0 || avg != time.Millisecond):
				t.Errorf("answered %d: %d failures (%d counted), average %v; want 0 and the 1ms answer", tt.status, fails, counted, avg)
			}
		})
	}
}

// fair does not reward an upstream that fails fast: one answering 500 in
// 1 ms while the others answer 200 in 20 ms gets few of the picks.
func TestFairAvoidsFastFailures(t *testing.T) {
	m := &Fair{}
	provision(t, m, &health{})
	static := pool("10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80")
	const n = 2000
	picks := map[string]int{}
	for k := 0; k < n; k++ {
		r := request("/", nil)
		u := m.Select(static, r, nil)
		picks[u.Dial]++
		repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if u.Dial == "10.0.0.4:80" {
			repl.Set(latencyPlaceholder, time.Millisecond)
			repl.Set(statusPlaceholder, 500)
		} else {
			repl.Set(latencyPlaceholder, 20*time.Millisecond)
			repl.Set(statusPlaceholder, 200)
		}
		cancelRequest(r)
		waitIdle(t, &m.p)
	}
	t.Logf("the failing upstream got %d of %d picks (%v)", picks["10.0.0.4:80"], n, picks)
	if got := picks["10.0.0.4:80"]; got > n/20 {
		t.Errorf("the upstream failing in 1ms got %d of %d picks (%v); want at most 5%%", got, n, picks)
	}
}

// A Select ends the try of its connection's previous request, if that
// request is over, before it picks: requests one after another on a
// connection see the earlier ones out of flight, whenever the callback of
// the earlier request's end runs. Requests of another connection are not
// touched.
func TestSelectEndsPreviousTryOfConnection(t *testing.T) {
	m := &WeightedLeastConn{}
	provision(t, m, &health{})
	static := pool(abc...)
	inflight := func() (sum int64) {
		bal, _, _ := m.p.current()
		for i := 0; i < bal.Len(); i++ {
			sum += bal.InFlight(i)
		}
		return sum
	}
	other := request("/", nil)
	other.RemoteAddr = "192.0.2.9:4321"
	m.Select(static, other, nil) // in flight all along, on its own connection
	for n := 0; n < 100; n++ {
		r := request("/", nil)
		if m.Select(static, r, nil) == nil {
			t.Fatal("nil")
		}
		if got := inflight(); got != 2 {
			t.Fatalf("request %d: %d tries in flight, want 2 (this one and the other connection's)", n, got)
		}
		cancelRequest(r)
	}
	cancelRequest(other)
	waitIdle(t, &m.p)
}
