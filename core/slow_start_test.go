package core

import (
	"math"
	"testing"
	"time"
)

// TestSlowStartRampShape: a backend added by Update ramps linearly from 10%
// to 100% of its weight over its slow start, in the weight every weighted
// strategy reads, and the group is steady again when the ramp is over.
func TestSlowStartRampShape(t *testing.T) {
	clock := newHCClock()
	bs := hcBackends(10)
	b := mustNew(t, Config{Strategy: LeastConn, Backends: bs, Now: clock.now})
	if !isSteady(b.primary) {
		t.Fatal("a backend present at construction ramps")
	}
	nb, err := b.Update(append(bs, Backend{Address: "10.0.0.2:80", Weight: 10, SlowStart: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	m := nb.members[1]
	steps := []struct {
		at     time.Duration
		weight int
		milli  int64
		steady bool
	}{
		{0, 1, 1000, false},
		{2500 * time.Millisecond, 3, 3250, false},
		{5 * time.Second, 5, 5500, false},
		{7500 * time.Millisecond, 7, 7750, false},
		{9999 * time.Millisecond, 9, 9999, false},
		{10 * time.Second, 10, 10000, true},
		{20 * time.Second, 10, 10000, true},
	}
	start := clock.t
	for _, s := range steps {
		clock.t = start.Add(s.at)
		r := request{b: nb}
		if w, mw := r.weight(m), milliWeightNow(&r, m); w != s.weight || mw != s.milli {
			t.Errorf("at %v: weight %d, milli %d; want %d, %d", s.at, w, mw, s.weight, s.milli)
		}
		if isSteady(nb.primary) != s.steady {
			t.Errorf("at %v: steady %v", s.at, isSteady(nb.primary))
		}
	}
}

// TestSlowStartShares: the ramping weight is what the smooth pass shares out
// (least_conn with every request ended before the next pick is nginx's smooth
// round robin).
func TestSlowStartShares(t *testing.T) {
	clock := newHCClock()
	bs := hcBackends(10)
	b := mustNew(t, Config{Strategy: LeastConn, Backends: bs, Now: clock.now})
	b, err := b.Update(append(bs, Backend{Address: "10.0.0.2:80", Weight: 10, SlowStart: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		at time.Duration
		w  int // the new backend's weight then, times 20
	}{{0, 20}, {2500 * time.Millisecond, 65}, {5 * time.Second, 110}, {7500 * time.Millisecond, 155}, {10 * time.Second, 200}} {
		clock.t = time.Unix(1700000000, 0).Add(s.at)
		got, picks := 0, 20*10+s.w // 20 periods of the smooth schedule
		for k := 0; k < picks; k++ {
			i := hcPick(t, b)
			b.hold(i)
			b.release(i, time.Millisecond, false)
			if i == 1 {
				got++
			}
		}
		// The current weights carried from the previous step shift the
		// count by at most one period's worth of rounding.
		if want := s.w; got < want-2 || got > want+2 {
			t.Errorf("at %v: %d of %d picks, want %d +- 2", s.at, got, picks, want)
		}
	}
}

// TestSlowStartAfterRecovery: a backend that was out after max_fails ramps
// from the success of its probe on; one that failed without going out does not.
func TestSlowStartAfterRecovery(t *testing.T) {
	clock := newHCClock()
	bs := hcBackends(10, 10)
	for i := range bs {
		bs[i].MaxFails = 2
		bs[i].SlowStart = 10 * time.Second
	}
	b := mustNew(t, Config{Strategy: LeastConn, Backends: bs, Now: clock.now})
	m := b.members[1]
	// One failure (below max_fails), then a success after fail_timeout.
	b.hold(1)
	b.release(1, time.Millisecond, true)
	clock.add(11 * time.Second)
	for k := 0; k < 4; k++ { // picks b (its checked time moves on)
		i := hcPick(t, b)
		b.hold(i)
		b.release(i, time.Millisecond, false)
	}
	if m.state.fails.Load() != 0 || m.ramping.Load() != 0 {
		t.Fatalf("fails %d, ramping %d: a backend that stayed in must not ramp", m.state.fails.Load(), m.ramping.Load())
	}
	// Two failures: out; the probe after fail_timeout succeeds at t1.
	b.hold(1)
	b.release(1, time.Millisecond, true)
	b.hold(1)
	b.release(1, time.Millisecond, true)
	clock.add(10*time.Second + time.Millisecond)
	probed := false
	for k := 0; k < 10 && !probed; k++ {
		i := hcPick(t, b)
		b.hold(i)
		b.release(i, time.Millisecond, false)
		probed = i == 1
	}
	if !probed || m.ramping.Load() != 1 {
		t.Fatalf("probed %v, ramping %d", probed, m.ramping.Load())
	}
	r := request{b: b}
	if w := r.weight(m); w != 1 {
		t.Fatalf("weight right after recovery: %d, want 1", w)
	}
	clock.add(5 * time.Second)
	r = request{b: b}
	if w := r.weight(m); w != 5 {
		t.Fatalf("weight half way: %d, want 5", w)
	}
}

// TestSlowStartLeastConn: least_conn divides in-flight counts by the ramping
// weight, in thousandths, so that a backend of weight 1 ramps too.
func TestSlowStartLeastConn(t *testing.T) {
	clock := newHCClock()
	bs := hcBackends(1)
	b := mustNew(t, Config{Strategy: LeastConn, Backends: bs, Now: clock.now})
	b, err := b.Update(append(bs, Backend{Address: "10.0.0.2:80", Weight: 1, SlowStart: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 5; k++ {
		b.hold(0)
	}
	b.hold(1)
	// At 10% b weighs 0.1: 1/0.1 = 10 > 5/1, so a takes the pick.
	if i := hcPick(t, b); i != 0 {
		t.Fatalf("at 10%%: %d, want a", i)
	}
	clock.add(5 * time.Second) // 55%: 1/0.55 < 5
	if i := hcPick(t, b); i != 1 {
		t.Fatalf("at 55%%: %d, want b", i)
	}
}

// TestSlowStartWeightOneShares: a backend of weight 1 (the default) added by
// Update beside two others of weight 1 ramps under every strategy that
// accepts a slow start. Its measured share in each second of a 10 s ramp
// (3,000 picks a second, every request done before the next pick: low load)
// is within 0.02 of the share its ramped weight f = 10%..100% gives, about
// f/(2+f): 0.07 in the first second, not the 1/3 it got at once when
// weights were whole numbers; and 1/3 after the ramp. (The random
// strategies: within 4 standard deviations of the binomial count, plus
// 0.005.)
func TestSlowStartWeightOneShares(t *testing.T) {
	const (
		ramp    = 10 * time.Second
		perSec  = 3000
		step    = time.Second / perSec
		seconds = 11 // the ramp and one second after it
	)
	byWeight := func(f float64) float64 { return f / (2 + f) }
	tests := []struct {
		name  string
		cfg   Config
		share func(f float64) float64 // the ramping backend's expected share at f
		noisy bool                    // random draws
	}{
		{"smooth_wrr", Config{Strategy: SmoothWRR}, byWeight, false},
		{"gcd_wrr", Config{Strategy: GCDWRR}, byWeight, false},
		{"round_robin", Config{Strategy: RoundRobin}, byWeight, false},
		{"random", Config{Strategy: Random, Rand: seededRandFunc(5)}, byWeight, true},
		{"weighted_random", Config{Strategy: WeightedRandom, Rand: seededRandFunc(6)}, byWeight, true},
		{"least_conn", Config{Strategy: LeastConn}, byWeight, false},
		// Two choices draws a pair uniformly; on a tie the first drawn wins,
		// the ramping one only its ramp's share of the time: f/3.
		{"least_conn two_choices", Config{Strategy: LeastConn, TwoChoices: true, Rand: seededRandFunc(7)}, func(f float64) float64 { return f / 3 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newHCClock()
			cfg := tt.cfg
			cfg.Now = clock.now
			cfg.Backends = hcBackends(1, 1)
			b := mustNew(t, cfg)
			bs := append(hcBackends(1, 1), Backend{Address: "10.0.0.9:80", Weight: 1, SlowStart: ramp})
			b, err := b.Update(bs)
			if err != nil {
				t.Fatal(err)
			}
			start := clock.t
			for sec := 0; sec < seconds; sec++ {
				got, want := 0, 0.0
				for k := 0; k < perSec; k++ {
					el := clock.t.Sub(start)
					f := 1.0
					if el < ramp {
						f = 0.1 + 0.9*float64(el)/float64(ramp)
					}
					want += tt.share(f) / perSec
					i := hcPick(t, b)
					b.hold(i)
					b.release(i, time.Millisecond, false)
					if i == 2 {
						got++
					}
					clock.add(step)
				}
				tol := 0.02
				if tt.noisy {
					tol = 4*math.Sqrt(want*(1-want)/perSec) + 0.005
				}
				if share := float64(got) / perSec; share < want-tol || share > want+tol {
					t.Errorf("second %d: share %.4f, want %.4f +- %.4f", sec, share, want, tol)
				}
			}
		})
	}
}
