package caddyplugin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
)

// selector is what every policy module is to these tests.
type selector interface {
	caddy.Provisioner
	reverseproxy.Selector
	pol() *policy
}

func (m *SmoothWRR) pol() *policy         { return &m.p }
func (m *GCDWRR) pol() *policy            { return &m.p }
func (m *URLHash) pol() *policy           { return &m.p }
func (m *Fair) pol() *policy              { return &m.p }
func (m *WeightedLeastConn) pol() *policy { return &m.p }
func (m *NginxIPHash) pol() *policy       { return &m.p }

// health is an injectable view of Caddy's health: upstreams whose dial
// address is in down are unhealthy, those in full are healthy but at their
// max_requests. It counts the questions asked; set changes it safely while
// Selects run.
type health struct {
	mu             sync.Mutex
	down, full     map[string]bool
	asked, checked atomic.Int64 // calls of available, of healthy
}

func (h *health) available(u *reverseproxy.Upstream) bool {
	h.asked.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down[u.Dial] && !h.full[u.Dial]
}

func (h *health) healthy(u *reverseproxy.Upstream) bool {
	h.checked.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down[u.Dial]
}

// isDown reports whether dial is unhealthy, asking nothing of the counters.
func (h *health) isDown(dial string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down[dial]
}

// set marks dial unhealthy (down) or healthy.
func (h *health) set(dial string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down == nil {
		h.down = map[string]bool{}
	}
	h.down[dial] = down
}

// provision provisions m outside any reverse proxy with a quiet logger, the
// health predicate h and state of its own; it registers m's cleanup.
func provision(t testing.TB, m selector, h *health) {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	p := m.pol()
	p.available = h.available
	p.healthy = h.healthy
	if err := m.Provision(ctx); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	// State of its own, as in a Caddy of its own: policies of one
	// identity share it otherwise (see acquire), and these tests give
	// each policy its own view of health.
	p.pools = newPools(p.strategy, p.config)
	p.logger = zap.NewNop()
	t.Cleanup(func() {
		_ = p.cleanup()
		forgetIdle()
	})
}

// pool returns fresh upstreams for the given dial addresses, as dynamic
// upstream sources return them on every call.
func pool(dials ...string) reverseproxy.UpstreamPool {
	p := make(reverseproxy.UpstreamPool, len(dials))
	for i, d := range dials {
		p[i] = &reverseproxy.Upstream{Dial: d}
	}
	return p
}

// names maps the test addresses to the one-letter names of the issue.
var names = map[string]string{
	"10.0.0.1:80": "a", "10.0.0.2:80": "b", "10.0.0.3:80": "c", "10.0.0.4:80": "d",
}

var abc = []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}

// request returns a cancellable request carrying Caddy's per-request variables and
// replacer, as the reverse proxy hands it to Select.
func request(target string, vars map[string]any) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if vars == nil {
		vars = map[string]any{}
	}
	ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars)
	repl := caddy.NewReplacer()
	ctx = context.WithValue(ctx, caddy.ReplacerCtxKey, repl)
	ctx, cancel := context.WithCancel(ctx)
	ctx = context.WithValue(ctx, cancelKey{}, cancel)
	r = r.WithContext(ctx)
	caddyhttp.SetVar(ctx, caddyhttp.ClientIPVarKey, "192.0.2.1")
	repl.Set("http.request.uri", r.RequestURI)
	return r
}

// sequence makes n picks from the pool returned by next and names them.
func sequence(t *testing.T, m selector, n int, next func() reverseproxy.UpstreamPool) string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		p := next()
		u := m.Select(p, request("/", nil), nil)
		switch {
		case u == nil:
			out[i] = "-"
		case !contains(p, u):
			t.Fatalf("pick %d: returned upstream %p is not in this call's pool", i, u)
		default:
			out[i] = names[u.Dial]
		}
	}
	return strings.Join(out, " ")
}

func contains(p reverseproxy.UpstreamPool, u *reverseproxy.Upstream) bool {
	for _, x := range p {
		if x == u {
			return true
		}
	}
	return false
}

func TestSelectWeightedSequences(t *testing.T) {
	tests := []struct {
		name string
		m    selector
		want string
	}{
		{"smooth_wrr positional", &SmoothWRR{base: base{Options: Options{Weights: []int{5, 3, 2}}}}, "a b c a a b a c b a"},
		{"smooth_wrr by address", &SmoothWRR{base: base{Options: Options{Upstreams: map[string]UpstreamOptions{
			"10.0.0.1:80": {Weight: 5}, "10.0.0.2:80": {Weight: 3}, "10.0.0.3:80": {Weight: 2}}}}}, "a b c a a b a c b a"},
		{"smooth_wrr unlisted weigh 1", &SmoothWRR{base: base{Options: Options{Upstreams: map[string]UpstreamOptions{
			"10.0.0.1:80": {Weight: 2}}}}}, "a b c a a b c a a b"},
		{"gcd_wrr", &GCDWRR{base: base{Options: Options{Weights: []int{5, 3, 2}}}}, "a a a b a b c a b c"},
		{"smooth_wrr down", &SmoothWRR{base: base{Options: Options{Weights: []int{5, 3, 2},
			Upstreams: map[string]UpstreamOptions{"10.0.0.2:80": {Down: true}}}}}, "a c a a a c a a c a"},
		{"smooth_wrr backup", &SmoothWRR{base: base{Options: Options{Upstreams: map[string]UpstreamOptions{
			"10.0.0.3:80": {Backup: true}}}}}, "a b a b a b a b a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provision(t, tt.m, &health{})
			static := pool(abc...)
			if got := sequence(t, tt.m, 10, func() reverseproxy.UpstreamPool { return static }); got != tt.want {
				t.Errorf("static pool: got %s, want %s", got, tt.want)
			}
		})
	}
}

// Dynamic upstreams: fresh *Upstream values on every call, in the
// resolver's order; the schedule is keyed by dial address and continues.
func TestSelectDynamicPool(t *testing.T) {
	m := &SmoothWRR{base: base{Options: Options{Upstreams: map[string]UpstreamOptions{
		"10.0.0.1:80": {Weight: 5}, "10.0.0.2:80": {Weight: 3}, "10.0.0.3:80": {Weight: 2}}}}}
	provision(t, m, &health{})
	orders := [][]string{
		{abc[0], abc[1], abc[2]},
		{abc[2], abc[0], abc[1]},
		{abc[1], abc[2], abc[0]},
	}
	call := 0
	got := sequence(t, m, 10, func() reverseproxy.UpstreamPool {
		call++
		return pool(orders[call%3]...)
	})
	if want := "a b c a a b a c b a"; got != want {
		t.Fatalf("fresh pointers, shuffled order: got %s, want %s", got, want)
	}

	// The pool grows: d joins with weight 1 and takes its share (1 of 11).
	counts := map[string]int{}
	for i := 0; i < 110; i++ {
		p := pool(abc[0], abc[1], abc[2], "10.0.0.4:80")
		u := m.Select(p, request("/", nil), nil)
		if u == nil || !contains(p, u) {
			t.Fatalf("pick %d after growth: %v", i, u)
		}
		counts[names[u.Dial]]++
	}
	if want := map[string]int{"a": 50, "b": 30, "c": 20, "d": 10}; !equalCounts(counts, want) {
		t.Errorf("after growth: counts %v, want %v", counts, want)
	}

	// And shrinks back: the old set's balancer is reused.
	counts = map[string]int{}
	for i := 0; i < 10; i++ {
		counts[names[m.Select(pool(abc...), request("/", nil), nil).Dial]]++
	}
	if want := map[string]int{"a": 5, "b": 3, "c": 2}; !equalCounts(counts, want) {
		t.Errorf("after shrink: counts %v, want %v", counts, want)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Caddy's health decides: an unavailable upstream is skipped as nginx skips
// a failed peer, and with none available Select returns nil (a 503).
func TestSelectAvailability(t *testing.T) {
	h := &health{down: map[string]bool{}}
	m := &SmoothWRR{base: base{Options: Options{Weights: []int{5, 3, 2}}}}
	provision(t, m, h)
	static := pool(abc...)
	next := func() reverseproxy.UpstreamPool { return static }

	h.down["10.0.0.1:80"] = true
	got := sequence(t, m, 10, next)
	if strings.Contains(got, "a") || strings.Count(got, "b") != 6 || strings.Count(got, "c") != 4 {
		t.Errorf("a unavailable: got %s, want no a and b:c = 6:4", got)
	}
	h.down["10.0.0.2:80"], h.down["10.0.0.3:80"] = true, true
	if got, want := sequence(t, m, 3, next), "- - -"; got != want {
		t.Errorf("all unavailable: got %s, want %s", got, want)
	}
	if m.Select(nil, request("/", nil), nil) != nil {
		t.Error("empty pool: want nil")
	}
}

// A positional weight count that does not match the pool is a
// configuration error found only at Select time when the policy could not
// see the upstreams: every Select returns nil rather than guessing.
func TestSelectPositionalCountMismatch(t *testing.T) {
	m := &SmoothWRR{base: base{Options: Options{Weights: []int{5, 3}}}}
	provision(t, m, &health{})
	if u := m.Select(pool(abc...), request("/", nil), nil); u != nil {
		t.Fatalf("2 weights for 3 upstreams: got %s, want nil", u.Dial)
	}
	if err := m.p.cur.Load().entry.err; err == nil || !strings.Contains(err.Error(), "2 positional weights for 3 upstreams") {
		t.Errorf("error = %v", err)
	}
	if u := m.Select(pool(abc[:2]...), request("/", nil), nil); u == nil {
		t.Error("2 weights for 2 upstreams: got nil")
	}
}

func TestSelectDuplicateUpstream(t *testing.T) {
	m := &SmoothWRR{}
	provision(t, m, &health{})
	if u := m.Select(pool(abc[0], abc[0]), request("/", nil), nil); u != nil {
		t.Errorf("duplicate dial: got %s, want nil", u.Dial)
	}
}

// The static path allocates nothing, whether every upstream is healthy (no
// filter) or one is not (core asks the filter about each).
func TestSelectStaticAllocs(t *testing.T) {
	for _, down := range []bool{false, true} {
		for _, m := range []selector{
			&SmoothWRR{base: base{Options: Options{Weights: []int{5, 3, 2}}}},
			&GCDWRR{base: base{Options: Options{Weights: []int{5, 3, 2}}}},
			&NginxIPHash{},
		} {
			h := &health{}
			h.set(abc[2], down)
			provision(t, m, h)
			static := pool(abc...)
			// A fresh request each time: a second Select of one request
			// is a retry.
			reqs := make([]*http.Request, 1001)
			for i := range reqs {
				reqs[i] = request("/", nil)
			}
			next := 0
			if n := testing.AllocsPerRun(1000, func() { m.Select(static, reqs[next], nil); next++ }); n != 0 {
				t.Errorf("%s, c unhealthy %v: %v allocations per Select, want 0", m.pol().name, down, n)
			}
			if got := seenDown(m.pol()); (got == 1) != down {
				t.Errorf("%s, c unhealthy %v: %d seen down", m.pol().name, down, got)
			}
		}
	}
}

func TestURLHashSticky(t *testing.T) {
	for _, mode := range []string{"", "ketama", "maglev", "bounded", "modulo"} {
		t.Run("mode="+mode, func(t *testing.T) {
			m := &URLHash{Mode: mode, Key: "{http.request.header.X-User}"}
			provision(t, m, &health{})
			first := map[string]string{}
			spread := map[string]int{}
			for round := 0; round < 3; round++ {
				for u := 0; u < 60; u++ {
					user := "user" + string(rune('A'+u%26)) + string(rune('a'+u/26))
					r := request("/any", nil)
					r.Header.Set("X-User", user)
					r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("http.request.header.X-User", user)
					up := m.Select(pool(abc...), r, nil) // fresh pointers each time
					if up == nil {
						t.Fatal("nil pick")
					}
					if round == 0 {
						first[user] = up.Dial
						spread[up.Dial]++
					} else if first[user] != up.Dial {
						t.Fatalf("round %d: %s moved from %s to %s", round, user, first[user], up.Dial)
					}
					// bounded mode counts attempts in flight: end this one.
					cancelRequest(r)
					waitIdle(t, m.pol())
				}
			}
			if len(spread) != 3 {
				t.Errorf("60 keys over 3 upstreams used only %v", spread)
			}
		})
	}
}

func TestURLHashDefaultKeyIsURI(t *testing.T) {
	m := &URLHash{}
	provision(t, m, &health{})
	if m.Key != "{http.request.uri}" {
		t.Fatalf("default key %q", m.Key)
	}
	static := pool(abc...)
	seen := map[string]bool{}
	for i := 0; i < 30; i++ {
		path := "/p/" + string(rune('a'+i))
		a := m.Select(static, request(path, nil), nil)
		c := m.Select(static, request(path, nil), nil)
		if a != c {
			t.Fatalf("%s mapped to %s then %s", path, a.Dial, c.Dial)
		}
		seen[a.Dial] = true
	}
	if len(seen) != 3 {
		t.Errorf("30 paths used only %v", seen)
	}
}

// nginx_ip_hash hashes Caddy's client_ip variable, by /24 for IPv4.
func TestNginxIPHashUsesClientIPVar(t *testing.T) {
	m := &NginxIPHash{}
	provision(t, m, &health{})
	static := pool(abc...)
	pick := func(ip string) string {
		r := request("/", nil)
		caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, ip)
		r.Header.Set("X-Forwarded-For", "203.0.113.9") // never read
		r.RemoteAddr = "198.51.100.7:1234"             // not used when the var is set
		return m.Select(static, r, nil).Dial
	}
	seen := map[string]bool{}
	for i := 0; i < 40; i++ {
		base := "10." + string(rune('0'+i/10)) + "." + string(rune('0'+i%10)) + "."
		first := pick(base + "1")
		for _, last := range []string{"2", "77", "254"} {
			if got := pick(base + last); got != first {
				t.Fatalf("%s1 -> %s but %s%s -> %s: a /24 must share", base, first, base, last, got)
			}
		}
		seen[first] = true
	}
	if len(seen) != 3 {
		t.Errorf("40 networks used only %v", seen)
	}
}

// cancelRequest ends r's context, as Caddy's server does when the handler
// chain returns.
func cancelRequest(r *http.Request) {
	if c, ok := r.Context().Value(cancelKey{}).(context.CancelFunc); ok {
		c()
	}
}

type cancelKey struct{}

// forget makes r a new request to p again: it ends r's try through p as
// the end of the request would (as a success) and drops what p remembers of r.
func (p *policy) forget(r *http.Request) {
	vars := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	if a, ok := vars[p.attemptVar].(*attempt); ok && a.e != nil {
		a.stop()
		a.finish(false)
	}
	delete(vars, p.attemptVar)
}

// waitIdle waits (at most a second) until no attempt of p is in flight:
// attempts end in a callback that runs after the request's context is done.
func waitIdle(t testing.TB, p *policy) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		bal, _, stats := p.current()
		busy := false
		for i := 0; bal != nil && i < bal.Len(); i++ {
			busy = busy || bal.InFlight(i) != 0 || i < len(stats) && stats[i].inflight.Load() != 0
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("attempts still in flight after 1s")
		}
		time.Sleep(time.Millisecond)
	}
}

// weighted_least_conn starts an attempt at each pick and ends it with the
// request, or at the request's next Select (a retry): each pick is ended by one Done.
func TestLeastConnAttemptsPair(t *testing.T) {
	m := &WeightedLeastConn{}
	provision(t, m, &health{})
	static := pool(abc...)
	inflight := func() (sum int64, per map[string]int64) {
		bal, _, _ := m.p.current()
		per = map[string]int64{}
		for i := 0; i < bal.Len(); i++ {
			per[names[bal.Backend(i).Address]] = bal.InFlight(i)
			sum += bal.InFlight(i)
		}
		return sum, per
	}

	reqs := make([]*http.Request, 3)
	got := map[string]*http.Request{}
	for i := range reqs {
		reqs[i] = request("/", nil)
		got[names[m.Select(static, reqs[i], nil).Dial]] = reqs[i]
	}
	if len(got) != 3 {
		t.Fatalf("3 concurrent requests went to %d upstreams, want one each", len(got))
	}

	// A retry of the request on b ends b's attempt before starting the
	// next, which goes elsewhere: b, though now the least loaded, was tried.
	u := m.Select(static, got["b"], nil)
	if names[u.Dial] == "b" {
		t.Fatalf("retry picked b again, the upstream it had just tried")
	}
	x := names[u.Dial]
	if sum, per := inflight(); sum != 3 || per["b"] != 0 || per[x] != 2 {
		t.Fatalf("after a retry to %s: %d in flight (%v), want 3: none on b, 2 on %s", x, sum, per, x)
	}

	// The retried request ends: its attempt on x ends with it.
	cancelRequest(got["b"])
	deadline := time.Now().Add(time.Second)
	for _, per := inflight(); per[x] != 1; _, per = inflight() {
		if time.Now().After(deadline) {
			t.Fatalf("%s's attempt did not end within 1s of its request", x)
		}
		time.Sleep(time.Millisecond)
	}
	r := request("/", nil)
	if u := m.Select(static, r, nil); names[u.Dial] != "b" {
		t.Errorf("with one in flight on a and c: picked %s, want b", names[u.Dial])
	}
	for _, r := range append(reqs, r) {
		cancelRequest(r)
	}
	waitIdle(t, &m.p)
}

// Dynamic upstreams churning through addresses: the policy keeps at most
// maxPoolSets balancers and forgets the counters of addresses gone from all
// of them, while an address that stays keeps its counter.
func TestSelectChurnIsBounded(t *testing.T) {
	m := &SmoothWRR{}
	provision(t, m, &health{})
	picksOfA := int64(0)
	for i := 0; i < 3*maxPoolSets; i++ {
		other := "10.2." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250+1) + ":80"
		u := m.Select(pool(abc[0], other), request("/", nil), nil)
		if u == nil {
			t.Fatalf("set %d: nil pick", i)
		}
		if u.Dial == abc[0] {
			picksOfA++
		}
	}
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	if len(m.p.sets) > maxPoolSets || len(m.p.stats) > maxPoolSets+1 {
		t.Errorf("after %d sets: %d balancers, %d counters; want at most %d and %d",
			3*maxPoolSets, len(m.p.sets), len(m.p.stats), maxPoolSets, maxPoolSets+1)
	}
	if got := m.p.stats[abc[0]].picks.Load(); got != picksOfA || picksOfA == 0 {
		t.Errorf("a's counter %d, a picked %d times", got, picksOfA)
	}
}

// Dynamic upstreams: an address's state is one, whatever sets it is seen
// in. DNS answers {a,b}, then {b,c}, then {a,c}: a's two requests in flight
// from the first set count in the third, so weighted_least_conn sends the
// next request to c.
func TestSelectDynamicStateIsOne(t *testing.T) {
	m := &WeightedLeastConn{}
	provision(t, m, &health{})
	a, b, c := abc[0], abc[1], abc[2]
	var reqs []*http.Request
	on := func(dials ...string) string {
		r := request("/", nil)
		reqs = append(reqs, r)
		return names[m.Select(pool(dials...), r, nil).Dial]
	}
	// Four requests over {a,b}: two each.
	for i := 0; i < 4; i++ {
		on(a, b)
	}
	on(b, c) // c: 1
	if got := on(a, c); got != "c" {
		t.Errorf("{a,c} with a at 2 in flight and c at 1: picked %s, want c", got)
	}
	bal, _, _ := m.p.current()
	if n := bal.InFlight(bal.Index(a)); n != 2 {
		t.Errorf("a's requests in flight seen through {a,c}: %d, want 2", n)
	}
	for _, r := range reqs {
		cancelRequest(r)
	}
	waitIdle(t, &m.p)
}

// A dial address holding a newline neither panics nor shares a cache entry
// with another set: {"h\nk:80"} then {"h", "k:80"} (whose sorted addresses
// joined with newlines were one key) both get nil, the first for its control
// character, the second for "h" having no port.
func TestSelectControlCharacterDial(t *testing.T) {
	for _, m := range allPolicies() {
		provision(t, m, &health{})
		for _, p := range []reverseproxy.UpstreamPool{pool("h\nk:80"), pool("h", "k:80"), pool("h\nk:80")} {
			if u := m.Select(p, request("/", nil), nil); u != nil {
				t.Errorf("%s: pool %q: picked %q, want nil", label(m), p[0].Dial, u.Dial)
			}
		}
		if u := m.Select(pool(abc...), request("/", nil), nil); u == nil {
			t.Errorf("%s: a valid pool afterwards: nil", label(m))
		}
	}
}
