package core

import (
	"math/rand"
	"testing"
	"time"
)

func TestGCDWRRWorkedExamples(t *testing.T) {
	checkSequences(t, GCDWRR, []seqCase{
		{"6,3,1", []int{6, 3, 1}, nil, "a a a a b a b a b c a a"},
		{"gcd 2: 4,2", []int{4, 2}, nil, "a a b a a b"},
		{"5,3,2", []int{5, 3, 2}, nil, "a a a b a b c a b c a a"},
		{"6,3,1 with a down", []int{6, 3, 1}, []bool{true, false, false}, "b b b c b b b"},
		{"equal", []int{3, 3}, nil, "a b a b"},
	})
}

func TestGCDWRRMatchesLVS(t *testing.T) {
	ws, downs := weightSets(11, 200, 12, 20)
	for k := range ws {
		b := mustNew(t, Config{Strategy: GCDWRR, Backends: testBackends(ws[k], downs[k])})
		ref := newLVSWRR(ws[k], downs[k])
		counts := make([]int, len(ws[k]))
		W := sumUp(ws[k], downs[k])
		for i, got := range pickN(t, b, 3*W) {
			if want := ref.pick(nil); got != want {
				t.Fatalf("weights %v down %v: pick %d = %d, LVS %d", ws[k], downs[k], i, got, want)
			}
			counts[got]++
		}
		// Exact shares over whole periods (3*W picks hold 3*gcd periods).
		for i, w := range ws[k] {
			if downs[k][i] {
				w = 0
			}
			if counts[i] != 3*w {
				t.Fatalf("weights %v down %v: backend %d got %d", ws[k], downs[k], i, counts[i])
			}
		}
	}
}

func sumUp(w []int, down []bool) int {
	s := 0
	for i, x := range w {
		if !down[i] {
			s += x
		}
	}
	return s
}

// TestGCDWRRSkipsLikeLVS: with a backend unavailable, a single goroutine's
// picks are exactly LVS's, which passes over the unavailable server and
// continues after the one it chose.
func TestGCDWRRSkipsLikeLVS(t *testing.T) {
	ws, _ := weightSets(12, 100, 10, 10)
	rng := rand.New(rand.NewSource(13))
	for _, w := range ws {
		b := mustNew(t, Config{Strategy: GCDWRR, Backends: testBackends(w, nil)})
		ref := newLVSWRR(w, nil)
		// A refusal pattern that changes every pick: each backend is
		// unavailable with probability 1/2, except one.
		for i := 0; i < 2*sumInts(w); i++ {
			mask, keep := rng.Int63(), rng.Intn(len(w))
			ok := func(j int) bool { return j == keep || mask>>(uint(j)%60)&1 == 0 }
			got, err := b.chooseFunc("", ok)
			if err != nil {
				t.Fatal(err)
			}
			if want := ref.pick(ok); got != want {
				t.Fatalf("weights %v pick %d: %d, LVS %d", w, i, got, want)
			}
		}
	}
	b := mustNew(t, Config{Strategy: GCDWRR, Backends: testBackends([]int{6, 3, 1}, nil)})
	if p, err := b.chooseFunc("", func(int) bool { return false }); p != -1 || err != ErrNoBackend {
		t.Fatalf("all refused: %d, %v", p, err)
	}
}

func TestGCDWRRConcurrentExactCounts(t *testing.T) {
	w := drawWeights(rand.New(rand.NewSource(14)), 50, 10)
	b := mustNew(t, Config{Strategy: GCDWRR, Backends: testBackends(w, nil)})
	const periods = 40
	checkConcurrentCounts(t, b, periods*sumInts(w), func(i int) int { return periods * w[i] }, "40 periods")
}

func TestGCDWRRBeyondBound(t *testing.T) {
	w := []int{MaxWeight, MaxWeight - 1, 2, 7}
	b := mustNew(t, Config{Strategy: GCDWRR, Backends: testBackends(w, nil)})
	if b.primary.strategy.(*gcdWRR).table != nil {
		t.Fatal("table built beyond the bound")
	}
	ref := newLVSWRR(w, nil)
	for i, got := range pickN(t, b, 5000) {
		if want := ref.pick(nil); got != want {
			t.Fatalf("pick %d = %d, LVS %d", i, got, want)
		}
	}
	notA := func(i int) bool { return i != 0 }
	for i := 0; i < 100; i++ {
		got, _ := b.chooseFunc("", notA)
		if want := ref.pick(notA); got != want {
			t.Fatalf("refusing a, pick %d = %d, LVS %d", i, got, want)
		}
	}
	if p, err := b.chooseFunc("", func(int) bool { return false }); p != -1 || err != ErrNoBackend {
		t.Fatalf("all refused: %d, %v", p, err)
	}
}

func TestGCDWRRStagger(t *testing.T) {
	w := []int{6, 3, 1}
	plain := letters(pickN(t, mustNew(t, Config{Strategy: GCDWRR, Backends: testBackends(w, nil)}), 20))
	starts := map[int]bool{}
	for seed := int64(100); seed < 140; seed++ {
		b := mustNew(t, Config{Strategy: GCDWRR, Backends: testBackends(w, nil), Stagger: true, Rand: seededRandFunc(seed)})
		start := int(seededRandFunc(seed)() % 10)
		starts[start] = true
		if got, want := letters(pickN(t, b, 10)), plain[2*start:2*start+19]; got != want {
			t.Fatalf("seed %d start %d: %s, want %s", seed, start, got, want)
		}
	}
	if len(starts) < 8 {
		t.Fatalf("40 staggered balancers used only %d of 10 starting points", len(starts))
	}
}

func TestGCDWRRAllocs(t *testing.T) {
	b := mustNew(t, Config{Strategy: GCDWRR, Backends: testBackends([]int{6, 3, 1}, nil)})
	checkPickAllocs(t, b, func(i int) bool { return i != 0 })
}

// TestGCDWRRSlowStart: while a backend added by Update ramps, gcd_wrr keeps
// LVS's schedule over the configured weights and the newcomer takes only its
// ramp's share of its turns (credit rampShare per turn, a turn per 1000),
// pick for pick; its share climbs from about 10% of its weight to all of it;
// after the ramp the table serves exact shares again.
func TestGCDWRRSlowStart(t *testing.T) {
	clock := time.Unix(1000, 0)
	bs := testBackends([]int{4, 6}, nil)
	b := mustNew(t, Config{Strategy: GCDWRR, Backends: bs, Now: func() time.Time { return clock }})
	bs = append(bs, Backend{Address: testAddr(2), Weight: 10, SlowStart: 10 * time.Second})
	b, err := b.Update(bs)
	if err != nil {
		t.Fatal(err)
	}
	ref := newLVSWRR([]int{4, 6, 10}, nil)
	var credit int64
	var early, late int // picks of the newcomer in the first and last 2s
	const step = 10 * time.Millisecond
	for i := 0; i < 1000; i++ { // 10 s
		el := clock.Sub(time.Unix(1000, 0))
		share := int64(float64(10*1000)*(0.1+0.9*float64(el)/float64(10*time.Second))) / 10
		want := ref.pick(func(j int) bool {
			if j != 2 {
				return true
			}
			if credit += share; credit < 1000 {
				return false
			}
			credit -= 1000
			return true
		})
		got, err := b.choose("")
		if err != nil || got != want {
			t.Fatalf("pick %d at %v (share %d): %d %v, LVS %d", i, el, share, got, err, want)
		}
		if got == 2 && i < 200 {
			early++
		}
		if got == 2 && i >= 800 {
			late++
		}
		clock = clock.Add(step)
	}
	// Ramped weights 1..2.8 of 10..12.8 in the first 2s, 8.2..9.9 of 18.2..19.9
	// in the last: shares about 13% and 47%.
	if early < 16 || early > 36 || late < 84 || late > 104 {
		t.Fatalf("newcomer's picks: %d of the first 200, %d of the last 200", early, late)
	}
	clock = clock.Add(time.Second)
	pickN(t, b, 1) // the ramp ends on the first pick that sees it over
	if !isSteady(b.primary) {
		t.Fatal("still ramping after the slow start")
	}
	counts := make([]int, 3)
	for _, p := range pickN(t, b, 3*20) { // 3 periods of 4,6,10
		counts[p]++
	}
	if counts[0] != 12 || counts[1] != 18 || counts[2] != 30 {
		t.Fatalf("after the ramp: counts %v over 3 periods, want [12 18 30]", counts)
	}
}

// TestGCDWRRFullHeavyLikeLVS: with the heaviest backend full, a pick jumps
// over its run of entries to the one LVS's stepping reaches (once a pick
// stepped through about a million of them, 2.5 ms), in table mode and beyond
// the bound, and the schedule goes on as LVS's once the backend has room.
func TestGCDWRRFullHeavyLikeLVS(t *testing.T) {
	for _, w := range [][]int{{1000000, 2, 1}, {1000000, 999999, 2, 1}} {
		bs := testBackends(w, nil)
		bs[0].MaxConns = 1
		b := mustNew(t, Config{Strategy: GCDWRR, Backends: bs})
		if tabled := b.primary.strategy.(*gcdWRR).table != nil; tabled != (len(w) == 3) {
			t.Fatalf("weights %v: table %v", w, tabled)
		}
		ref := newLVSWRR(w, nil)
		b.hold(0)
		notA := func(i int) bool { return i != 0 }
		for k := 0; k < 12; k++ {
			if got, want := b.chooseIndex(""), ref.pick(notA); got != want {
				t.Fatalf("weights %v, a full, pick %d: %d, LVS %d", w, k, got, want)
			}
		}
		b.release(0, 0, false)
		for k := 0; k < 12; k++ {
			if got, want := b.chooseIndex(""), ref.pick(nil); got != want {
				t.Fatalf("weights %v, a free again, pick %d: %d, LVS %d", w, k, got, want)
			}
		}
	}
}
