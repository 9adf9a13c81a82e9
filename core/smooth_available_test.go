package core

import (
	"math/rand"
	"sync"
	"testing"
)

// TestSmoothWRRLearnsOrbitOverAvailable: with some backends refused by the
// caller for a while (as Caddy's health checks do), smooth_wrr learns
// nginx's schedule over the available ones within two of its periods and
// follows it: every pick is still nginx's (the reference below), and with a
// versioned filter (PickVersion) a pick asks the filter about one backend
// only, where nginx's pass, which it made on every such pick before, asks
// about all of them. A new set (a new version) is followed exactly at once
// and learnt again; so is the return of every backend.
func TestSmoothWRRLearnsOrbitOverAvailable(t *testing.T) {
	rng := rand.New(rand.NewSource(31))
	for round := 0; round < 6; round++ {
		n := 3 + rng.Intn(30)
		w := drawWeights(rng, n, 12)
		bs := testBackends(w, nil)
		down := rng.Intn(n)
		bs[down].Down = true // down backends take no part either
		b := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs})
		s := b.primary.strategy.(*smoothWRR)
		ref := newNginxSmooth(w, nil)
		ref.down[down] = true
		out := map[int]bool{}
		calls := 0
		avail := func(i int) bool { calls++; return !out[i] }
		version := uint64(0)
		for phase := 0; phase < 4; phase++ {
			// A new set of refused backends (none in the last phase).
			out = map[int]bool{}
			for k := 0; phase < 3 && k < 1+rng.Intn(n-1); k++ {
				out[rng.Intn(n)] = true
			}
			version++
			sum := 0
			for i := range w {
				if !out[i] && i != down {
					sum += w[i]
				}
			}
			if sum == 0 {
				continue
			}
			versioned := phase%2 == 0
			learnt := -1
			for k, picks := 0, 6*sum+1+rng.Intn(sum); k < picks; k++ {
				calls = 0
				var got int
				if versioned {
					got, _ = b.chooseVersion("", avail, version)
				} else {
					got, _ = b.chooseFunc("", avail)
				}
				if want := ref.pick(func(i int) bool { return !out[i] }); got != want {
					t.Fatalf("round %d phase %d (weights %v, out %v) pick %d: %d, nginx %d", round, phase, w, out, k, got, want)
				}
				if learnt < 0 && s.sched.mode() != 0 {
					learnt = k
				}
				if learnt >= 0 && k > learnt && versioned && len(out) > 0 && calls != 1 {
					t.Fatalf("round %d phase %d pick %d, on the learnt orbit: %d calls of the filter, want 1", round, phase, k, calls)
				}
			}
			if learnt < 0 || learnt > 2*sum+1 {
				t.Fatalf("round %d phase %d (weights %v, out %v): on a table after %d picks, want at most %d", round, phase, w, out, learnt, 2*sum+1)
			}
		}
	}
}

// TestSmoothWRRVersionedConcurrent: picks from many goroutines with a
// versioned filter while one goroutine changes the refused backend and the
// version: no pick returns a refused backend, nothing races (run with
// -race), and the schedule is on a table again once the set stays.
func TestSmoothWRRVersionedConcurrent(t *testing.T) {
	w := []int{7, 5, 3, 2, 1, 4}
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
	var mu sync.RWMutex
	out, version := 1, uint64(1)
	view := func() (func(int) bool, uint64) {
		mu.RLock()
		defer mu.RUnlock()
		x := out
		return func(i int) bool { return i != x }, version
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for gr := 0; gr < 6; gr++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 3000; k++ {
				avail, v := view()
				p, err := b.chooseVersion("", avail, v)
				if err != nil || !avail(p) {
					errs <- "picked a refused backend"
					return
				}
			}
		}()
	}
	for k := 0; k < 50; k++ {
		mu.Lock()
		out, version = k%len(w), version+1
		mu.Unlock()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	avail, v := view()
	for k := 0; k < 2*sumInts(w)+2; k++ {
		b.chooseVersion("", avail, v)
	}
	if m := b.primary.strategy.(*smoothWRR).sched.mode(); m != 2 {
		t.Fatalf("mode %d after two periods over a stable set, want 2 (learnt)", m)
	}
	if a := testing.AllocsPerRun(100, func() { b.chooseVersion("", avail, v) }); a != 0 {
		t.Fatalf("a pick on the learnt orbit allocates %v", a)
	}
}

// TestSmoothWRRSeedAnywhere: leaving table mode at any position of a long
// period (the state is seeded from the marks every stride entries and the
// entries after the last mark), nginx's sequence goes on exactly; so it
// does when leaving a learnt orbit.
func TestSmoothWRRSeedAnywhere(t *testing.T) {
	rng := rand.New(rand.NewSource(41))
	w := drawWeights(rng, 40, 50) // a period of about 1,000 picks
	W := sumInts(w)
	for trial := 0; trial < 12; trial++ {
		b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
		ref := newNginxSmooth(w, nil)
		x := rng.Intn(len(w))
		notX := func(i int) bool { return i != x }
		check := func(k int, ok func(int) bool, what string) {
			got, _ := b.chooseFunc("", ok)
			if want := ref.pick(ok); got != want {
				t.Fatalf("trial %d, %s, pick %d: %d, nginx %d", trial, what, k, got, want)
			}
		}
		for k, n := 0, rng.Intn(3*W); k < n; k++ { // table mode, to a random position
			check(k, nil, "all")
		}
		for k := 0; k < 2*W+rng.Intn(W); k++ { // exact mode, then the learnt orbit
			check(k, notX, "one refused")
		}
		for k := 0; k < 3*W; k++ { // seeded from the learnt orbit
			check(k, nil, "all again")
		}
	}
}

// TestSmoothWRRAdoptsVersion: an orbit learnt through PickFunc, or under an
// older version, serves a versioned filter that gives its answers after one
// pick that asks about every backend; the picks after ask about one.
func TestSmoothWRRAdoptsVersion(t *testing.T) {
	w := []int{5, 1, 3, 2, 4}
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
	ref := newNginxSmooth(w, nil)
	calls := 0
	avail := func(i int) bool { calls++; return i != 2 }
	for k := 0; k < 3*sumInts(w); k++ {
		got, _ := b.chooseFunc("", avail)
		if want := ref.pick(avail); got != want {
			t.Fatalf("PickFunc pick %d: %d, nginx %d", k, got, want)
		}
	}
	if m := b.primary.strategy.(*smoothWRR).sched.mode(); m != 2 {
		t.Fatalf("mode %d after three periods, want 2 (learnt)", m)
	}
	for _, version := range []uint64{7, 8} {
		for k := 0; k < 5; k++ {
			calls = 0
			got, _ := b.chooseVersion("", avail, version)
			if k > 0 && calls != 1 || k == 0 && calls < len(w)-1 {
				t.Fatalf("version %d pick %d: %d calls of the filter", version, k, calls)
			}
			if want := ref.pick(avail); got != want {
				t.Fatalf("version %d pick %d: %d, nginx %d", version, k, got, want)
			}
		}
	}
}
