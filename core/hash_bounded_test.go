package core

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// With nothing in flight, bounded maps every key as ketama does.
func TestBoundedIsKetamaWhenIdle(t *testing.T) {
	bs := numbered(20)
	bs[3].Weight = 4
	bs[7].Down = true
	ket := mustNew(t, Config{Strategy: URLHash, HashMode: HashKetama, Backends: bs})
	bnd := mustNew(t, Config{Strategy: URLHash, HashMode: HashBounded, Backends: bs})
	for _, k := range testKeys(20000) {
		if a, b := pickAddr(t, ket, k), pickAddr(t, bnd, k); a != b {
			t.Fatalf("key %q: ketama %s, bounded %s", k, a, b)
		}
	}
}

// No pick goes to a backend that already has ceil(c*(T+1)*w/W) requests in
// flight (W: the total weight of backends not down), under a random mix of
// starts and ends with hot keys.
func TestBoundedNeverExceedsCap(t *testing.T) {
	for _, c := range []float64{0, 1.05, 1.5} {
		factor := c
		if factor == 0 {
			factor = 1.25
		}
		rng := rand.New(rand.NewSource(7))
		bs := numbered(20)
		for i := range bs {
			bs[i].Weight = 1 + rng.Intn(3)
		}
		bs[5].Down = true
		b := mustNew(t, Config{Strategy: URLHash, HashMode: HashBounded, LoadFactor: c, Backends: bs})
		upWeight := 0
		for i := range bs {
			if !bs[i].Down {
				upWeight += bs[i].Weight
			}
		}
		idle := mustNew(t, Config{Strategy: URLHash, HashMode: HashKetama, Backends: bs})
		keys := testKeys(50)
		var inflight []int
		total := 0
		spilled := 0
		for step := 0; step < 20000; step++ {
			// Keep about 60 requests in flight: caps of 4 to 6 per backend.
			if len(inflight) > 0 && (total >= 60 || rng.Intn(100) < 40) {
				j := rng.Intn(len(inflight))
				b.release(inflight[j], time.Millisecond, false)
				inflight[j] = inflight[len(inflight)-1]
				inflight = inflight[:len(inflight)-1]
				total--
				continue
			}
			// Skewed keys: a few are hot.
			k := keys[int(float64(len(keys))*math.Pow(rng.Float64(), 3))]
			i, err := b.choose(k)
			if err != nil {
				t.Fatal(err)
			}
			limit := int64(math.Ceil(factor / float64(upWeight) * float64(total+1) * float64(bs[i].Weight)))
			if load := b.InFlight(i); load >= limit {
				t.Fatalf("c=%v step %d: backend %d (weight %d) has %d in flight, cap %d (total %d)", factor, step, i, bs[i].Weight, load, limit, total)
			}
			if b.Backend(i).Down {
				t.Fatalf("picked down backend %d", i)
			}
			if j, _ := idle.choose(k); j != i {
				spilled++
			}
			b.hold(i)
			inflight = append(inflight, i)
			total++
		}
		// The cap must have mattered: many picks left the key's ketama backend.
		if spilled < 1000 {
			t.Errorf("c=%v: only %d of the picks left their ketama backend", factor, spilled)
		}
	}
}

// One hot key spreads over the ring instead of piling onto one backend.
func TestBoundedHotKeySpills(t *testing.T) {
	b := mustNew(t, Config{Strategy: URLHash, HashMode: HashBounded, Backends: numbered(10)})
	for i := 0; i < 100; i++ {
		j, err := b.choose("/hot")
		if err != nil {
			t.Fatal(err)
		}
		b.hold(j)
	}
	used, worst := 0, int64(0)
	for i := 0; i < 10; i++ {
		if n := b.InFlight(i); n > 0 {
			used++
			if n > worst {
				worst = n
			}
		}
	}
	// 100 requests, cap ceil(1.25*100/10) = 13 at the end.
	if worst > 13 || used < 8 {
		t.Errorf("hot key: %d backends used, busiest has %d in flight; want <= 13 each over >= 8 backends", used, worst)
	}
}

// When every available backend is at the cap (the headroom sits on refused
// ones), the least loaded available one is chosen rather than none.
func TestBoundedAllAvailableFull(t *testing.T) {
	b := mustNew(t, Config{Strategy: URLHash, HashMode: HashBounded, Backends: numbered(4)})
	for i := 0; i < 5; i++ {
		b.hold(0)
	}
	for i := 0; i < 3; i++ {
		b.hold(1)
	}
	only01 := func(i int) bool { return i < 2 }
	for _, k := range testKeys(50) {
		// T = 8, E = 4: cap ceil(1.25*9/4) = 3; both are at or above it.
		if i, err := b.chooseFunc(k, only01); err != nil || i != 1 {
			t.Fatalf("key %q: %d %v, want the less loaded backend 1", k, i, err)
		}
	}
	if _, err := b.chooseFunc("k", func(int) bool { return false }); err != ErrNoBackend {
		t.Fatalf("nothing available: %v", err)
	}
}
