package core

import (
	"fmt"
	"math"
	"math/rand"
	"sync"
	"testing"
	"time"
)

// hcScripted returns a random source that yields the pairs of draws given,
// (first, second) packed as fair unpacks them over equal weights: the first
// candidate is lo % n, the second hi % n (drawn again while it repeats the
// first, which these scripts avoid).
func hcScripted(t *testing.T, pairs ...[2]uint64) func() uint64 {
	k := 0
	return func() uint64 {
		if k >= len(pairs) {
			t.Fatalf("random source exhausted after %d draws", k)
			return 0
		}
		p := pairs[k]
		k++
		return p[1]<<32 | p[0]
	}
}

// TestFairExactChoices walks fair through its rules under an injected clock
// and random source: unmeasured backends first (probe rule), the better of
// two by latency x (in flight + 1), the probe after DecayTime/4, and the
// every-16th exploration.
func TestFairExactChoices(t *testing.T) {
	clock := newHCClock()
	rnd := hcScripted(t,
		[2]uint64{1, 0}, // pick 4: b vs a
		[2]uint64{0, 2}, // pick 5: a vs c
		[2]uint64{1, 0}, // pick 6: b vs a
		[2]uint64{2, 1}, // pick 10: c vs b
		[2]uint64{0, 1}, // picks 11-15: a vs b
		[2]uint64{0, 1}, [2]uint64{0, 1}, [2]uint64{0, 1}, [2]uint64{0, 1},
	)
	b := mustNew(t, Config{Strategy: Fair, Backends: hcBackends(1, 1, 1), Now: clock.now, Rand: rnd})
	ms := time.Millisecond
	var seq []int
	// step picks, starts the request, and ends it after lat unless lat is 0.
	step := func(lat time.Duration) {
		i := hcPick(t, b)
		seq = append(seq, i)
		b.Start(i)
		if lat > 0 {
			b.Done(i, lat, false)
		}
	}
	// Picks 1-3: nobody picked yet, so the probe rule goes round (from 1).
	step(30 * ms) // b
	step(20 * ms) // c
	step(10 * ms) // a
	// Estimates a 10ms, b 30ms, c 20ms. Requests now stay open.
	step(0) // b 30x1 vs a 10x1: a
	step(0) // a 10x2 vs c 20x1: equal, the first drawn (a)
	step(0) // b 30x1 vs a 10x3: equal, b
	clock.add(3 * time.Second)
	// Every backend was last picked 3s ago, beyond DecayTime/4.
	step(0)       // pick 7 looks at b: probe
	step(20 * ms) // pick 8: c
	step(0)       // pick 9: a
	step(20 * ms) // c 20x1 vs b 30x3: c
	for k := 0; k < 5; k++ {
		step(0) // a 10x(4..8) vs b 30x3=90: a
	}
	step(0) // pick 16: exploration, backend (16/16) mod 3 = b
	if got, want := letters(seq), "b c a a a b b c a c a a a a a b"; got != want {
		t.Fatalf("picks %s\n want %s", got, want)
	}
}

// TestFairUnmeasuredTried: a backend with no measurement is tried at once
// (score 0), and gets nothing more until its first request answers.
func TestFairUnmeasuredTried(t *testing.T) {
	clock := newHCClock()
	rng := rand.New(rand.NewSource(5))
	bs := hcBackends(1, 1)
	b := mustNew(t, Config{Strategy: Fair, Backends: bs, Now: clock.now, Rand: rng.Uint64})
	for k := 0; k < 50; k++ { // both measured at 10ms
		i := hcPick(t, b)
		b.Start(i)
		b.Done(i, 10*time.Millisecond, false)
		clock.add(time.Millisecond)
	}
	nb, err := b.Update(append(bs, Backend{Address: "10.0.0.3:80", Weight: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if s := fairScore(&request{b: nb}, nb.members[2]); s != 0 {
		t.Fatalf("unmeasured idle score %v", s)
	}
	nb.Start(2)
	if s := fairScore(&request{b: nb}, nb.members[2]); !math.IsInf(s, 1) {
		t.Fatalf("unmeasured busy score %v", s)
	}
	nb.Done(2, 10*time.Millisecond, false)
	// Picks: the newcomer's first request stays open; while it is out,
	// the better of two never prefers it.
	first := -1
	got := 0
	for k := 0; k < 30; k++ {
		i := hcPick(t, nb)
		nb.Start(i)
		if i == 2 {
			got++
		} else {
			nb.Done(i, 10*time.Millisecond, false)
		}
		if first < 0 && i == 2 {
			first = k
		}
	}
	if first < 0 || first > 3 {
		t.Fatalf("newcomer first picked at %d", first)
	}
	// 30 picks: 1 or 2 by the exploration rule (k = 16, and 32 is beyond),
	// plus the first try.
	if got > 3 {
		t.Fatalf("newcomer picked %d times with its first request open", got)
	}
}

// TestFairNeverStarves: a backend 100x slower loses nearly all traffic but
// keeps receiving picks within the documented bounds: at least every
// 16n picks (exploration), and within DecayTime/4 plus n picks (probe).
func TestFairNeverStarves(t *testing.T) {
	clock := newHCClock()
	rng := rand.New(rand.NewSource(9))
	const n = 5
	b := mustNew(t, Config{Strategy: Fair, Backends: hcBackends(1, 1, 1, 1, 1), Now: clock.now, Rand: rng.Uint64})
	lat := func(i int) time.Duration {
		if i == 4 {
			return time.Second
		}
		return 10 * time.Millisecond
	}
	// High rate: one pick per ms.
	last, slow, gap := -1, 0, 0
	const picks = 20000
	for k := 0; k < picks; k++ {
		i := hcPick(t, b)
		b.Start(i)
		b.Done(i, lat(i), false)
		clock.add(time.Millisecond)
		if i == 4 {
			slow++
			if k-last > gap {
				gap = k - last
			}
			last = k
		}
	}
	if gap > fairExplore*n {
		t.Fatalf("slow backend went %d picks without one (bound %d)", gap, fairExplore*n)
	}
	share := float64(slow) / picks
	if share < 1.0/(fairExplore*n) || share > 0.02 {
		t.Fatalf("slow backend share %.4f, want between 1/80 and 2%%", share)
	}
	// Low rate: one pick a second. Probe bound: DecayTime/4 + n picks.
	var lastT time.Time
	var maxGap time.Duration
	for k := 0; k < 100; k++ {
		clock.add(time.Second)
		i := hcPick(t, b)
		b.Start(i)
		b.Done(i, lat(i), false)
		if i == 4 {
			if !lastT.IsZero() && clock.t.Sub(lastT) > maxGap {
				maxGap = clock.t.Sub(lastT)
			}
			lastT = clock.t
		}
	}
	if bound := DefaultDecayTime/4 + n*time.Second; maxGap == 0 || maxGap > bound {
		t.Fatalf("slow backend's longest gap at one pick a second: %v (bound %v)", maxGap, bound)
	}
}

func TestFairDecayOptionAndErrors(t *testing.T) {
	b := mustNew(t, Config{Strategy: Fair, Backends: hcBackends(1, 1), DecayTime: time.Second})
	if got := b.primary.decay; got != int64(time.Second) {
		t.Fatalf("decay %d", got)
	}
	// The probe rule follows the decay time: a backend not picked for
	// DecayTime/4 (250ms here) gets the pick that looks at it.
	clock := newHCClock()
	a0b1 := func() uint64 { return 1<<32 | 0 } // the two candidates: a, then b
	b = mustNew(t, Config{Strategy: Fair, Backends: hcBackends(1, 1), DecayTime: time.Second, Now: clock.now, Rand: a0b1})
	var seq []int
	step := func(lat time.Duration) {
		i := hcPick(t, b)
		seq = append(seq, i)
		b.Start(i)
		b.Done(i, lat, false)
	}
	step(100 * time.Millisecond) // pick 1 looks at b, never picked: probe
	step(10 * time.Millisecond)  // pick 2, a: probe
	step(10 * time.Millisecond)  // a 10ms vs b 100ms: a
	clock.add(249 * time.Millisecond)
	step(10 * time.Millisecond) // pick 4 looks at a, picked 249ms ago: a vs b, a
	step(10 * time.Millisecond) // pick 5 looks at b, picked 249ms ago: a
	clock.add(2 * time.Millisecond)
	step(10 * time.Millisecond) // pick 6: a
	step(10 * time.Millisecond) // pick 7 looks at b, picked 251ms ago: probe
	if got, want := letters(seq), "b a a a a a b"; got != want {
		t.Fatalf("picks %s, want %s", got, want)
	}
	if _, err := New(Config{Strategy: Fair, Backends: hcBackends(1), DecayTime: -time.Second}); err == nil {
		t.Fatal("negative decay accepted")
	}
	if _, err := New(Config{Strategy: LeastConn, Backends: hcBackends(1), DecayTime: time.Second}); err == nil {
		t.Fatal("decay accepted for least_conn")
	}
}

// TestFairEWMA checks the estimate: a peak replaces it, lower samples pull it
// down by 1-exp(-elapsed/decay), a failure counts double.
func TestFairEWMA(t *testing.T) {
	s := &backendState{}
	decay := int64(10 * time.Second)
	est := func() float64 { return math.Float64frombits(s.ewma.Load()) }
	observe(s, int64(10*time.Millisecond), false, 1e9, decay)
	if est() != 1e7 {
		t.Fatalf("first sample: %v", est())
	}
	observe(s, int64(50*time.Millisecond), false, 2e9, decay)
	if est() != 5e7 {
		t.Fatalf("peak: %v", est())
	}
	observe(s, int64(10*time.Millisecond), false, 12e9, decay) // 10s later
	w := math.Exp(-1)
	if want := 5e7*w + 1e7*(1-w); math.Abs(est()-want) > 1 {
		t.Fatalf("decayed: %v, want %v", est(), want)
	}
	before := est()
	observe(s, int64(time.Millisecond), true, 12e9, decay)
	if est() != 2*before {
		t.Fatalf("failure: %v, want %v", est(), 2*before)
	}
}

func TestFairAllocsAndConcurrency(t *testing.T) {
	b := mustNew(t, Config{Strategy: Fair, Backends: hcBackends(1, 2, 3, 1, 1)})
	if a := testing.AllocsPerRun(200, func() { b.Pick("") }); a != 0 {
		t.Fatalf("fair pick allocates %v", a)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 2000; k++ {
				i, err := b.Pick("")
				if err != nil {
					t.Error(err)
					return
				}
				b.Start(i)
				b.Done(i, time.Duration(1+i)*time.Millisecond, k%100 == g)
			}
		}(g)
	}
	wg.Wait()
	for i := 0; i < b.Len(); i++ {
		if c := b.InFlight(i); c != 0 {
			t.Fatalf("backend %d: %d in flight", i, c)
		}
	}
}

func BenchmarkFair(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			bs := make([]Backend, n)
			for i := range bs {
				bs[i] = Backend{Address: fmt.Sprintf("10.%d.%d.%d:80", i>>16, i>>8&255, i&255), Weight: 1 + i%3}
			}
			lb := mustNew(b, Config{Strategy: Fair, Backends: bs})
			rng := rand.New(rand.NewSource(1))
			for i := 0; i < n; i++ { // measured, some in flight
				lb.Start(i)
				lb.Done(i, time.Duration(1+rng.Intn(50))*time.Millisecond, false)
				for k := rng.Intn(4); k > 0; k-- {
					lb.Start(i)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				lb.Pick("")
			}
		})
	}
}

func BenchmarkFairParallel(b *testing.B) {
	bs := make([]Backend, 1000)
	for i := range bs {
		bs[i] = Backend{Address: fmt.Sprintf("10.%d.%d.%d:80", i>>16, i>>8&255, i&255), Weight: 1}
	}
	benchRequestsParallel(b, mustNew(b, Config{Strategy: Fair, Backends: bs}))
}

// benchRequestsParallel measures whole requests from GOMAXPROCS goroutines:
// a pick, Start, and Done after 1ms.
func benchRequestsParallel(b *testing.B, lb *Balancer) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i, _ := lb.Pick("")
			lb.Start(i)
			lb.Done(i, time.Millisecond, false)
		}
	})
}

// TestFairIdleSharesFollowWeights: idle backends with no measurement all
// score 0, so the first candidate wins; candidates are drawn in proportion to
// weight, so the shares follow the weights, except for the every-16th
// exploration pick, which goes round: 15/16 * w/W + 1/16 * 1/n.
func TestFairIdleSharesFollowWeights(t *testing.T) {
	clock := newHCClock()
	w := []int{5, 3, 2}
	b := mustNew(t, Config{Strategy: Fair, Backends: hcBackends(w...), Now: clock.now, Rand: seededRandFunc(9)})
	const picks = 40000
	counts := make([]int, len(w))
	for k := 0; k < picks; k++ {
		counts[hcPick(t, b)]++
	}
	for i := range w {
		share := float64(counts[i]) / picks
		want := 15.0/16*float64(w[i])/10 + 1.0/16/3
		if share < want-0.012 || share > want+0.012 {
			t.Fatalf("backend %d (weight %d) has %.3f of idle picks, want %.3f +- 0.012", i, w[i], share, want)
		}
	}
}
