package caddyplugin

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// forgetIdle drops the kept state of every identity that no policy uses,
// so that a test starts as a fresh Caddy process would.
func forgetIdle() {
	kept.Lock()
	defer kept.Unlock()
	for id, k := range kept.ids {
		if len(k.users) == 0 {
			delete(kept.ids, id)
		}
	}
}

// idleSince returns when the identity id lost its last user, and whether
// it is kept at all.
func idleSince(id string) (time.Time, bool) {
	kept.Lock()
	defer kept.Unlock()
	k := kept.ids[id]
	if k == nil {
		return time.Time{}, false
	}
	return k.idle, true
}

// staticPool returns a function that returns the same upstreams every
// time, as Caddy hands static upstreams to Select.
func staticPool(dials ...string) func() reverseproxy.UpstreamPool {
	p := pool(dials...)
	return func() reverseproxy.UpstreamPool { return p }
}

// sweepAt is sweep at now, under kept's lock.
func sweepAt(now time.Time) {
	kept.Lock()
	defer kept.Unlock()
	sweep(now)
}

// A policy gone from the config keeps its state for releaseGrace: loaded
// again within it, the smooth sequence goes on; after it, it starts over.
func TestReloadReleaseGrace(t *testing.T) {
	t.Cleanup(forgetIdle)
	const js = `{"name":"grace","weights":[5,3,2]}`
	same := staticPool(abc...)

	first := newConfig(t)
	if got := sequence(t, first.mustLoad(t, "smooth_wrr", js), 4, same); got != "a b c a" {
		t.Fatalf("first load: %s", got)
	}
	first.unload()
	idle, ok := idleSince("grace")
	if !ok || idle.IsZero() {
		t.Fatalf("after the unload: kept %v, idle since %v; want kept, idle", ok, idle)
	}
	sweepAt(idle.Add(releaseGrace - time.Millisecond))
	second := newConfig(t)
	if got, want := sequence(t, second.mustLoad(t, "smooth_wrr", js), 6, same), "a b a c b a"; got != want {
		t.Errorf("loaded again within the grace time: %s, want %s", got, want)
	}
	second.unload()
	idle, _ = idleSince("grace")
	sweepAt(idle.Add(releaseGrace))
	if _, ok := idleSince("grace"); ok {
		t.Fatalf("identity kept %v after its last policy left", releaseGrace)
	}
	third := newConfig(t)
	if got, want := sequence(t, third.mustLoad(t, "smooth_wrr", js), 4, same), "a b c a"; got != want {
		t.Errorf("loaded again after the grace time: %s, want %s (afresh)", got, want)
	}
}

// A config that fails to load (its policies are provisioned, then cleaned
// up) leaves the running policy's state the identity's: the next load of
// the running config goes on with it.
func TestReloadFailedLoadKeepsState(t *testing.T) {
	t.Cleanup(forgetIdle)
	const js = `{"name":"failing","weights":[5,3,2]}`
	same := staticPool(abc...)

	running := newConfig(t)
	m := running.mustLoad(t, "smooth_wrr", js)
	if got := sequence(t, m, 4, same); got != "a b c a" {
		t.Fatalf("first load: %s", got)
	}
	failed := newConfig(t)
	other := failed.mustLoad(t, "smooth_wrr", `{"name":"failing","weights":[1,1,1]}`)
	if other.pol().pools == m.pol().pools {
		t.Fatal("other weights: the very same state, want a successor")
	}
	failed.unload()

	next := newConfig(t)
	again := next.mustLoad(t, "smooth_wrr", js)
	running.unload()
	if again.pol().pools != m.pol().pools {
		t.Error("the running config loaded again: not its state")
	}
	if got, want := sequence(t, again, 6, same), "a b a c b a"; got != want {
		t.Errorf("after a failed load and a reload: %s, want %s", got, want)
	}
}

// Which state a policy takes up: the same config shares it, other weights
// derive from it (a request in flight stays counted), another strategy
// starts afresh (nothing in flight; url_hash does not count its own), with
// the counters.
func TestReloadStateChoice(t *testing.T) {
	t.Cleanup(forgetIdle)
	static := pool(abc...)
	c1 := newConfig(t)
	m1 := c1.mustLoad(t, "weighted_least_conn", `{"name":"choice","weights":[1,1,1]}`)
	var reqs []*http.Request // in flight until cancelled
	sel := func(m selector) *reverseproxy.Upstream {
		r := request("/", nil)
		reqs = append(reqs, r)
		return m.Select(static, r, nil)
	}
	u := sel(m1)
	if u == nil {
		t.Fatal("no pick")
	}
	inFlight := func(m selector) int64 { // over every upstream
		bal, _, _ := m.pol().current()
		var n int64
		for i := 0; bal != nil && i < bal.Len(); i++ {
			n += bal.InFlight(i)
		}
		return n
	}
	picks := func(m selector) int64 {
		_, _, stats := m.pol().current()
		var n int64
		for _, st := range stats {
			n += st.picks.Load()
		}
		return n
	}

	c2 := newConfig(t)
	m2 := c2.mustLoad(t, "weighted_least_conn", `{"name":"choice","weights":[1,1,1]}`)
	c1.unload()
	if m2.pol().pools != m1.pol().pools {
		t.Error("the same config: not the same state")
	}
	c3 := newConfig(t)
	m3 := c3.mustLoad(t, "weighted_least_conn", `{"name":"choice","weights":[2,1,1]}`)
	c2.unload()
	sel(m3) // builds its balancer
	if m3.pol().pools == m2.pol().pools || inFlight(m3) != 2 {
		t.Errorf("other weights: in flight %d, want the successor with 2 (m1's request and its own)", inFlight(m3))
	}
	c4 := newConfig(t)
	m4 := c4.mustLoad(t, "url_hash", `{"name":"choice","weights":[2,1,1]}`)
	c3.unload()
	sel(m4)
	if n := inFlight(m4); n != 0 {
		t.Errorf("another strategy: in flight %d, want 0 (afresh)", n)
	}
	if n := picks(m4); n != 3 {
		t.Errorf("another strategy: %d picks, want the 2 before and its own", n)
	}
	for _, r := range reqs {
		cancelRequest(r)
	}
	waitIdle(t, m3.pol())
}

// A failure that took an upstream out (max_fails 1, fail_timeout 1h)
// keeps it out across a reload of the same config and across one that
// changes another upstream's weight (same name and strategy).
func TestReloadKeepsFailures(t *testing.T) {
	t.Cleanup(forgetIdle)
	const before = `{"name":"fails","upstreams":{"10.0.0.1:80":{"max_fails":1,"fail_timeout":"1h"}}}`
	same := staticPool(abc...)
	first := newConfig(t)
	m := first.mustLoad(t, "smooth_wrr", before)
	r := request("/", nil)
	if u := m.Select(same(), r, nil); u == nil || u.Dial != abc[0] {
		t.Fatalf("first pick %v, want a", u)
	}
	m.Select(same(), r, nil) // a retry: a's try failed
	cancelRequest(r)
	waitIdle(t, m.pol())
	for i, js := range []string{before, `{"name":"fails","upstreams":{"10.0.0.1:80":{"max_fails":1,"fail_timeout":"1h"},"10.0.0.2:80":{"weight":2}}}`} {
		next := newConfig(t)
		again := next.mustLoad(t, "smooth_wrr", js)
		first.unload()
		if got := sequence(t, again, 6, same); strings.Contains(got, "a") {
			t.Errorf("reload %d (%s): %s, want a left out", i+1, js, got)
		}
		first = next
	}
}
