package core

import (
	"math"
	"testing"
	"time"
)

// inspectBackends are a, b, c weighing 6, 10, 1: a has max_fails 2 (nginx's
// penalty is 6/2 = 3 per failure), b a slow start of 10s, c is plain.
func inspectBackends() []Backend {
	return []Backend{
		{Address: "10.0.0.1:80", Weight: 6, MaxFails: 2},
		{Address: "10.0.0.2:80", Weight: 10, SlowStart: 10 * time.Second},
		{Address: "10.0.0.3:80", Weight: 1},
	}
}

// TestEffectiveWeight drives each strategy through failures, picks and a
// recovery with a slow start, and checks the effective weights after each
// step.
func TestEffectiveWeight(t *testing.T) {
	type step struct {
		do   string // "fail a", "pick", "recover b", "wait 5s", "noop"
		want [3]int
	}
	tests := []struct {
		strategy string
		steps    []step
	}{
		{SmoothWRR, []step{
			{"noop", [3]int{6, 10, 1}},
			{"fail a", [3]int{3, 10, 1}},
			{"pick", [3]int{4, 10, 1}}, // every pass that sees a gives back 1
			{"pick", [3]int{5, 10, 1}},
			{"fail a", [3]int{2, 10, 1}},
			{"pick", [3]int{2, 10, 1}}, // a failed twice: skipped, no climb
			{"recover b", [3]int{2, 1, 1}},
			{"wait 5s", [3]int{2, 5, 1}},
			{"wait 5s", [3]int{2, 10, 1}},
		}},
		{LeastConn, []step{
			{"fail a", [3]int{3, 10, 1}},
			{"recover b", [3]int{3, 1, 1}},
			{"wait 2.5s", [3]int{3, 3, 1}},
		}},
		// gcd_wrr and fair have no nginx effective weight: failures leave it,
		// slow start still ramps it.
		{GCDWRR, []step{
			{"fail a", [3]int{6, 10, 1}},
			{"recover b", [3]int{6, 1, 1}},
			{"wait 5s", [3]int{6, 5, 1}},
		}},
		{Fair, []step{
			{"fail a", [3]int{6, 10, 1}},
			{"recover b", [3]int{6, 1, 1}},
			{"wait 10s", [3]int{6, 10, 1}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.strategy, func(t *testing.T) {
			clock := newHCClock()
			b := mustNew(t, Config{Strategy: tt.strategy, Backends: inspectBackends(), Now: clock.now, Rand: seededRandFunc(1)})
			for k, s := range tt.steps {
				switch s.do {
				case "fail a":
					b.hold(0)
					b.release(0, time.Millisecond, true)
				case "pick":
					if i := hcPick(t, b); i >= 0 {
						b.hold(i)
						b.release(i, time.Millisecond, false)
					}
				case "recover b":
					b.Recover(1)
				case "wait 2.5s":
					clock.add(2500 * time.Millisecond)
				case "wait 5s":
					clock.add(5 * time.Second)
				case "wait 10s":
					clock.add(10 * time.Second)
				}
				got := [3]int{b.EffectiveWeight(0), b.EffectiveWeight(1), b.EffectiveWeight(2)}
				if got != s.want {
					t.Errorf("step %d (%s): effective weights %v, want %v", k, s.do, got, s.want)
				}
			}
		})
	}
}

func TestEffectiveWeightDownAndOutOfRange(t *testing.T) {
	bs := inspectBackends()
	bs[2].Down = true
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs})
	for _, tt := range []struct {
		i, want int
	}{{-1, 0}, {0, 6}, {1, 10}, {2, 0}, {3, 0}} {
		if got := b.EffectiveWeight(tt.i); got != tt.want {
			t.Errorf("EffectiveWeight(%d) = %d, want %d", tt.i, got, tt.want)
		}
	}
}

// TestRecover: a recovered backend with a slow start takes its ramped share
// of nginx's smooth sequence, then its full share, and the schedule is back
// on its table once the ramp is over; without a slow start, down or out of
// range, Recover changes nothing.
func TestRecover(t *testing.T) {
	clock := newHCClock()
	bs := hcBackends(10, 10)
	bs[1].SlowStart = 10 * time.Second
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs, Now: clock.now})
	if got, want := letters(pickN(t, b, 4)), "a b a b"; got != want {
		t.Fatalf("before: %s, want %s", got, want)
	}
	b.Recover(1)
	if isSteady(b.primary) {
		t.Fatal("a ramping backend leaves the group steady")
	}
	// Weights 10 and 1: b once in 11 picks, as nginx's pass gives it.
	if got, want := letters(pickN(t, b, 11)), "a a a a a b a a a a a"; got != want {
		t.Errorf("at 10%%: %s, want %s", got, want)
	}
	clock.add(10 * time.Second)
	counts := [2]int{}
	for _, i := range pickN(t, b, 40) {
		counts[i]++
	}
	if counts != [2]int{20, 20} {
		t.Errorf("after the ramp: counts %v, want [20 20]", counts)
	}
	if !isSteady(b.primary) {
		t.Error("the group is not steady after the ramp")
	}

	plain := mustNew(t, Config{Strategy: SmoothWRR, Backends: []Backend{
		{Address: "10.0.0.1:80", Weight: 3},
		{Address: "10.0.0.2:80", Weight: 2, Down: true, SlowStart: time.Second},
	}, Now: clock.now})
	for _, i := range []int{-1, 0, 1, 2} {
		plain.Recover(i)
	}
	if !isSteady(plain.primary) || plain.EffectiveWeight(0) != 3 {
		t.Errorf("Recover without slow start or of a down backend: steady %v, effective %d",
			isSteady(plain.primary), plain.EffectiveWeight(0))
	}
}

func TestLatency(t *testing.T) {
	clock := newHCClock()
	tests := []struct {
		strategy string
		done     []time.Duration // latencies reported for backend 0; negative: failed
		want     time.Duration
	}{
		{Fair, nil, 0},
		{Fair, []time.Duration{10 * time.Millisecond}, 10 * time.Millisecond},
		{Fair, []time.Duration{10 * time.Millisecond, 30 * time.Millisecond}, 20 * time.Millisecond}, // the first answers count alike
		{Fair, []time.Duration{-10 * time.Millisecond}, 20 * time.Millisecond},                       // a failure doubles the penalty
		{Fair, []time.Duration{-10 * time.Millisecond, -10 * time.Millisecond, -10 * time.Millisecond}, 80 * time.Millisecond},
		{Fair, []time.Duration{-math.MaxInt64, -math.MaxInt64}, math.MaxInt64}, // beyond a Duration: its maximum, not negative
		{SmoothWRR, []time.Duration{10 * time.Millisecond}, 0},
		{LeastConn, []time.Duration{10 * time.Millisecond}, 0},
	}
	for _, tt := range tests {
		b := mustNew(t, Config{Strategy: tt.strategy, Backends: hcBackends(1, 1), Now: clock.now})
		for _, d := range tt.done {
			b.hold(0)
			if d < 0 {
				b.release(0, -d, true)
			} else {
				b.release(0, d, false)
			}
		}
		if got := b.Latency(0); got-tt.want > 1 || tt.want-got > 1 { // within a nanosecond of rounding
			t.Errorf("%s after %v: Latency(0) = %v, want %v", tt.strategy, tt.done, got, tt.want)
		}
		if b.Latency(1) != 0 || b.Latency(-1) != 0 || b.Latency(2) != 0 {
			t.Errorf("%s: unmeasured or out of range: %v %v %v", tt.strategy, b.Latency(1), b.Latency(-1), b.Latency(2))
		}
	}
}

// TestRequests: the counter of started requests survives an Update for the
// addresses that stay.
func TestRequests(t *testing.T) {
	b := mustNew(t, Config{Strategy: LeastConn, Backends: hcBackends(1, 1)})
	for k := 0; k < 3; k++ {
		b.hold(0)
		b.release(0, time.Millisecond, false)
	}
	b.hold(1)
	nb, err := b.Update(append(hcBackends(1, 1), Backend{Address: "10.0.0.9:80", Weight: 1}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		b    *Balancer
		i    int
		want int64
	}{{b, 0, 3}, {b, 1, 1}, {b, 2, 0}, {b, -1, 0}, {nb, 0, 3}, {nb, 1, 1}, {nb, 2, 0}} {
		if got := tt.b.Requests(tt.i); got != tt.want {
			t.Errorf("Requests(%d) = %d, want %d", tt.i, got, tt.want)
		}
	}
}
