package caddyplugin

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/lbpack/lbpack/core"
)

// manualClock is a policy clock the test moves by hand.
type manualClock struct{ ns atomic.Int64 }

func (c *manualClock) now() int64          { return c.ns.Load() }
func (c *manualClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// provisionClocked is provision with a manual clock, set before the first
// Select builds a balancer.
func provisionClocked(t testing.TB, m selector, h *health) *manualClock {
	provision(t, m, h)
	c := new(manualClock)
	m.pol().clock = c.now
	return c
}

var abcd = []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"}

// seenDown returns how many upstreams the policy's current balancer has seen
// unhealthy.
func seenDown(p *policy) int32 { return p.cur.Load().entry.health.count.Load() }

// While every upstream is healthy, a Select asks Caddy about the chosen
// upstream only; all of them are read once per healthRefresh.
func TestSelectFastPath(t *testing.T) {
	const n = 40
	dials := make([]string, n)
	weights := make([]int, n)
	for i := range dials {
		dials[i] = fmt.Sprintf("10.3.0.%d:80", i+1)
		weights[i] = 1 + i%4
	}
	opts := func() base { return base{Options: Options{Weights: weights}} }
	for _, m := range []selector{
		&SmoothWRR{base: opts()},
		&GCDWRR{base: opts()},
		&URLHash{base: opts()},
		&NginxIPHash{base: opts()},
		&Fair{base: opts()},
		&WeightedLeastConn{base: opts()},
	} {
		t.Run(fmt.Sprintf("%T", m), func(t *testing.T) {
			h := &health{}
			clock := provisionClocked(t, m, h)
			static := pool(dials...)
			var reqs []*http.Request
			sel := func(k int) {
				for j := 0; j < k; j++ {
					r := request(fmt.Sprintf("/k/%d", len(reqs)), nil)
					reqs = append(reqs, r)
					if m.Select(static, r, nil) == nil {
						t.Fatal("nil pick")
					}
				}
			}
			sel(500)
			if a, c := h.asked.Load(), h.checked.Load(); a != 500 || c != n {
				t.Errorf("500 Selects: %d availability and %d health questions, want 500 and %d (one scan)", a, c, n)
			}
			clock.add(healthRefresh)
			sel(4 * clockEvery * n)
			if a, c := h.asked.Load(), h.checked.Load(); a != int64(500+4*clockEvery*n) || c != 2*n {
				t.Errorf("after healthRefresh: %d availability and %d health questions, want %d and %d (a second scan)",
					a, c, 500+4*clockEvery*n, 2*n)
			}
			for _, r := range reqs {
				cancelRequest(r)
			}
			waitIdle(t, m.pol())
		})
	}
}

// letters names a pick of the abcd pool.
func letters(seq []int) string {
	out := make([]string, len(seq))
	for i, p := range seq {
		out[i] = "-"
		if p >= 0 {
			out[i] = string(rune('a' + p))
		}
	}
	return strings.Join(out, " ")
}

// nginxRef returns the picks of core's smooth_wrr over dials with m's
// options, made with the availability given (nil: all), or -1 for none: the
// reference that the policy's choices must equal.
func nginxRef(t *testing.T, m *SmoothWRR, dials []string) func(avail func(int) bool) int {
	t.Helper()
	bs, err := m.Options.backends(dials)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := core.New(core.Config{Strategy: core.SmoothWRR, Backends: bs})
	if err != nil {
		t.Fatal(err)
	}
	return func(avail func(int) bool) int {
		i, _ := core.Pick(ref, "", core.Filter{Allow: avail}) // smooth_wrr: nothing to end
		return i
	}
}

// without returns the availability that refuses the backends out.
func without(out ...int) func(int) bool {
	return func(i int) bool {
		for _, o := range out {
			if i == o {
				return false
			}
		}
		return true
	}
}

// The choices under changing health are nginx's, as core makes them with the
// availability known: exactly while health is stable, and with the
// documented one-pick difference when the chosen upstream turns out
// unhealthy between two scans.
func TestSelectExactUnderHealthChanges(t *testing.T) {
	m := &SmoothWRR{base: base{Options: Options{Weights: []int{5, 3, 2, 1}}}}
	h := &health{}
	h.set(abcd[1], true) // b is unhealthy from the start
	clock := provisionClocked(t, m, h)
	static := pool(abcd...)
	refPick := nginxRef(t, m, abcd)
	index := map[string]int{abcd[0]: 0, abcd[1]: 1, abcd[2]: 2, abcd[3]: 3}
	run := func(phase string, k int, next func() int) {
		t.Helper()
		got, want := make([]int, k), make([]int, k)
		for j := range got {
			got[j] = -1
			if u := m.Select(static, request("/", nil), nil); u != nil {
				got[j] = index[u.Dial]
			}
			want[j] = next()
		}
		if g, w := letters(got), letters(want); g != w {
			t.Errorf("%s:\n got %s\nwant %s", phase, g, w)
		}
	}
	run("b unhealthy", 22, func() int { return refPick(without(1)) })
	if seenDown(&m.p) != 1 {
		t.Fatalf("b unhealthy: %d seen down, want 1", seenDown(&m.p))
	}

	// b comes back; the next Select after healthRefresh sees it first.
	h.set(abcd[1], false)
	clock.add(healthRefresh)
	run("all healthy", 22, func() int { return refPick(nil) })
	if seenDown(&m.p) != 0 {
		t.Fatalf("all healthy: %d seen down, want 0", seenDown(&m.p))
	}

	// d fails between scans: the first pick that chooses it finds out,
	// and is made again without it.
	h.set(abcd[3], true)
	known := false
	run("d unhealthy between scans", 22, func() int {
		if known {
			return refPick(without(3))
		}
		i := refPick(nil)
		if i == 3 {
			known = true
			i = refPick(without(3))
		}
		return i
	})
	if !known || seenDown(&m.p) != 1 {
		t.Errorf("d was never chosen (%v) or not marked (%d seen down)", known, seenDown(&m.p))
	}
}

// An upstream that is healthy but full (max_requests) is passed over for
// that pick only: it is not marked and takes requests again once it is not.
func TestSelectFullNotMarked(t *testing.T) {
	m := &SmoothWRR{}
	h := &health{full: map[string]bool{abc[0]: true}}
	provisionClocked(t, m, h)
	static := pool(abc...)
	next := func() reverseproxy.UpstreamPool { return static }
	if got, want := sequence(t, m, 6, next), "b c b c b c"; got != want {
		t.Errorf("a full: got %s, want %s", got, want)
	}
	if seenDown(&m.p) != 0 {
		t.Errorf("a full: %d seen down, want 0", seenDown(&m.p))
	}
	h.mu.Lock()
	h.full[abc[0]] = false
	h.mu.Unlock()
	if got := sequence(t, m, 3, next); !strings.Contains(got, "a") {
		t.Errorf("a no longer full: got %s, want a among them", got)
	}
}

// An upstream seen unhealthy and then healthy again starts its slow start
// (core's Recover) when the policy sees it back; one without slow_start
// comes back at its full weight.
func TestSelectRecoveryStartsSlowStart(t *testing.T) {
	m := &SmoothWRR{base: base{Options: Options{Upstreams: map[string]UpstreamOptions{
		abc[0]: {Weight: 10},
		abc[1]: {Weight: 10, SlowStart: caddy1h},
		abc[2]: {Weight: 10},
	}}}}
	h := &health{}
	h.set(abc[1], true)
	h.set(abc[2], true)
	clock := provisionClocked(t, m, h)
	static := pool(abc...)
	next := func() reverseproxy.UpstreamPool { return static }
	if got, want := sequence(t, m, 5, next), "a a a a a"; got != want {
		t.Fatalf("b and c unhealthy: got %s, want %s", got, want)
	}
	bal, _, _ := m.p.current()
	if w := bal.EffectiveWeight(1); w != 10 {
		t.Fatalf("b before recovery: effective weight %d, want 10", w)
	}

	h.set(abc[1], false)
	h.set(abc[2], false)
	clock.add(healthRefresh)
	counts := map[string]int{}
	for _, name := range strings.Fields(sequence(t, m, 210, next)) {
		counts[name]++
	}
	// b weighs 10% of 10 for the first 400s of its hour: a:b:c = 10:1:10.
	if w := bal.EffectiveWeight(1); w != 1 {
		t.Errorf("b after recovery: effective weight %d, want 1 (10%% of 10)", w)
	}
	if w := bal.EffectiveWeight(2); w != 10 {
		t.Errorf("c after recovery: effective weight %d, want 10 (no slow start)", w)
	}
	if counts["b"] < 9 || counts["b"] > 11 || counts["a"] < 99 || counts["c"] < 99 {
		t.Errorf("210 picks after recovery: %v, want a:b:c = 100:10:100 +- 1", counts)
	}
}

const caddy1h = 3600 * 1000 * 1000 * 1000 // caddy.Duration of one hour

// Concurrent Selects while health flaps and time passes: every pick is an
// upstream of the pool, a stays healthy so no pick fails, and once health
// settles the policy sees every upstream healthy again. Run with -race.
func TestSelectConcurrent(t *testing.T) {
	for _, m := range []selector{
		&SmoothWRR{base: base{Options: Options{Weights: []int{5, 3, 2, 1}}}},
		&GCDWRR{base: base{Options: Options{Weights: []int{5, 3, 2, 1}}}},
		&Fair{},
	} {
		t.Run(fmt.Sprintf("%T", m), func(t *testing.T) {
			h := &health{}
			clock := provisionClocked(t, m, h)
			static := pool(abcd...)
			var wg sync.WaitGroup
			var bad atomic.Int64
			stop := make(chan struct{})
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; k < 2000; k++ {
						r := request("/", nil)
						if u := m.Select(static, r, nil); u == nil || !contains(static, u) {
							bad.Add(1)
						}
						cancelRequest(r)
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 400; k++ {
					select {
					case <-stop:
						return
					default:
					}
					h.set(abcd[1+k%3], k%2 == 0)
					clock.add(healthRefresh / 4)
					time.Sleep(50 * time.Microsecond)
				}
			}()
			wg.Wait()
			close(stop)
			if bad.Load() != 0 {
				t.Errorf("%d Selects returned nil or a stranger", bad.Load())
			}
			for _, d := range abcd {
				h.set(d, false)
			}
			clock.add(healthRefresh)
			r := request("/", nil)
			m.Select(static, r, nil)
			cancelRequest(r)
			if n := seenDown(m.pol()); n != 0 {
				t.Errorf("all healthy again: %d seen down", n)
			}
			waitIdle(t, m.pol())
		})
	}
}

// When every upstream left is seen unhealthy, Select looks again before
// answering that none is available: one that has recovered since the last
// scan is picked at once.
func TestSelectAllSeenDownLooksAgain(t *testing.T) {
	m := &SmoothWRR{}
	h := &health{}
	for _, d := range abc {
		h.set(d, true)
	}
	provisionClocked(t, m, h)
	static := pool(abc...)
	next := func() reverseproxy.UpstreamPool { return static }
	if got, want := sequence(t, m, 2, next), "- -"; got != want {
		t.Fatalf("all unhealthy: got %s, want %s", got, want)
	}
	if seenDown(&m.p) != 3 {
		t.Fatalf("all unhealthy: %d seen down, want 3", seenDown(&m.p))
	}
	h.set(abc[1], false) // no scan is due: the clock has not moved
	if got, want := sequence(t, m, 3, next), "b b b"; got != want {
		t.Errorf("b healthy again: got %s, want %s", got, want)
	}
	if seenDown(&m.p) != 2 {
		t.Errorf("b healthy again: %d seen down, want 2", seenDown(&m.p))
	}
}

// With upstreams seen unhealthy, smooth_wrr's choices are nginx's over the
// others for as long as the run goes, and once it has learnt their schedule
// (a core.Filter with a Version, within two periods) a Select asks the filter about
// the chosen upstream only, not about all 40. A health change moves the
// filter's version: the choices follow nginx over the new set at once, and
// are O(1) again two periods later. No Select returns an upstream that is
// unhealthy at that moment.
func TestSelectVersionedUnderHealthChanges(t *testing.T) {
	const n, x, y, z = 40, 7, 23, 31
	dials := make([]string, n)
	weights := make([]int, n)
	index := make(map[string]int, n)
	for i := range dials {
		dials[i] = fmt.Sprintf("10.4.0.%d:80", i+1)
		weights[i] = 1 + i%5
		index[dials[i]] = i
	}
	m := &SmoothWRR{base: base{Options: Options{Weights: weights}}}
	h := &health{}
	h.set(dials[x], true) // x is unhealthy from the start
	clock := provisionClocked(t, m, h)
	static := pool(dials...)
	refPick := nginxRef(t, m, dials)
	// The filter's questions, counted from the snapshot the first Select
	// builds (the pool is static: it stays the current one).
	first := m.Select(static, request("/", nil), nil)
	if want := refPick(without(x)); first == nil || index[first.Dial] != want {
		t.Fatalf("first Select: got %v, want %s", first, dials[want])
	}
	var questions int
	s := m.p.cur.Load()
	inner := s.healthy
	s.healthy = func(i int) bool { questions++; return inner(i) }

	run := func(phase string, k int, next func() int) {
		t.Helper()
		for j := 0; j < k; j++ {
			u := m.Select(static, request("/", nil), nil)
			want := next()
			switch {
			case u == nil:
				t.Fatalf("%s, pick %d: nil, want %s", phase, j, dials[want])
			case h.isDown(u.Dial):
				t.Fatalf("%s, pick %d: %s, which is unhealthy", phase, j, u.Dial)
			case index[u.Dial] != want:
				t.Fatalf("%s, pick %d: got %s, want %s (nginx over the healthy ones)", phase, j, u.Dial, dials[want])
			}
		}
	}
	// fast asserts that k more Selects ask the filter once each at most.
	fast := func(phase string, k int, next func() int) {
		t.Helper()
		questions = 0
		run(phase, k, next)
		if questions > k {
			t.Errorf("%s: %d Selects asked the filter %d times, want at most %d (one per Select)", phase, k, questions, k)
		}
	}
	total := 0
	for _, w := range weights {
		total += w
	}
	noX := func() int { return refPick(without(x)) }
	run("x unhealthy, learning", 2*total, noX)
	fast("x unhealthy, learnt", 4*total, noX)

	// y fails between scans: the first pick that chooses it finds out and
	// is made again without it.
	h.set(dials[y], true)
	known := false
	run("y unhealthy between scans", 3*total, func() int {
		if known {
			return refPick(without(x, y))
		}
		i := refPick(without(x))
		if i == y {
			known = true
			i = refPick(without(x, y))
		}
		return i
	})
	if !known || seenDown(&m.p) != 2 {
		t.Fatalf("y was never chosen (%v) or not marked (%d seen down, want 2)", known, seenDown(&m.p))
	}
	fast("x and y unhealthy, learnt", 2*total, func() int { return refPick(without(x, y)) })

	// z fails and the next Select, after healthRefresh, sees it in a
	// scan before its pick.
	h.set(dials[z], true)
	clock.add(healthRefresh)
	noXYZ := func() int { return refPick(without(x, y, z)) }
	run("z unhealthy, seen by a scan", 2*total, noXYZ)
	if seenDown(&m.p) != 3 {
		t.Fatalf("z unhealthy: %d seen down, want 3", seenDown(&m.p))
	}
	fast("x, y and z unhealthy, learnt", 2*total, noXYZ)

	// x and z come back; the next Select, after healthRefresh, sees it.
	h.set(dials[x], false)
	h.set(dials[z], false)
	clock.add(healthRefresh)
	noY := func() int { return refPick(without(y)) }
	run("x and z healthy again, learning", 2*total, noY)
	if seenDown(&m.p) != 1 {
		t.Fatalf("x and z healthy again: %d seen down, want 1", seenDown(&m.p))
	}
	fast("x and z healthy again, learnt", 2*total, noY)
}
