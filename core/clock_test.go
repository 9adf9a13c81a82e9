package core

import (
	"sync"
	"testing"
	"time"
	"unsafe"
)

// stepWall returns t with its wall-clock reading moved by d (whole seconds)
// and its monotonic reading kept: what time.Now returns after the system
// clock was stepped by d (by NTP or an operator). t must carry a monotonic
// reading. The package time offers no way to build such a time; this writes
// the seconds field of its wall word (see time.Time: with hasMonotonic set,
// bits 30-62 hold seconds since 1885). checkStepWall proves the result.
func stepWall(t time.Time, d time.Duration) time.Time {
	type timeWords struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	const nsecShift = 30
	w := (*timeWords)(unsafe.Pointer(&t))
	w.wall += uint64(int64(d/time.Second)) << nsecShift
	return t
}

// checkStepWall fails the test unless stepWall moved the wall reading by d
// and kept the monotonic one.
func checkStepWall(t *testing.T, at time.Time, d time.Duration) {
	t.Helper()
	got := stepWall(at, d)
	if wall := got.Round(0).Sub(at.Round(0)); wall != d {
		t.Fatalf("stepWall: wall moved %v, want %v", wall, d)
	}
	if mono := got.Sub(at); mono != 0 {
		t.Fatalf("stepWall: monotonic moved %v, want 0", mono)
	}
}

// steppedClock is an injected clock that reads like time.Now: it carries a
// monotonic reading, which add moves, and a wall reading, which add and
// step (a wall-clock step) move.
type steppedClock struct {
	mu    sync.Mutex
	base  time.Time // a time.Now reading
	mono  time.Duration
	stepd time.Duration
}

func (c *steppedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return stepWall(c.base.Add(c.mono), c.stepd)
}
func (c *steppedClock) add(d time.Duration)  { c.mu.Lock(); c.mono += d; c.mu.Unlock() }
func (c *steppedClock) step(d time.Duration) { c.mu.Lock(); c.stepd += d; c.mu.Unlock() }

// TestClockIsMonotonic: intervals follow the monotonic clock. After the wall
// clock steps back an hour, a backend out for max_fails comes back after
// fail_timeout, not an hour later; a slow start ramps on; fair's probe
// rule still sees staleness. (Reading Unix time, each waited the hour.)
func TestClockIsMonotonic(t *testing.T) {
	checkStepWall(t, time.Now(), -time.Hour)
	clockIs := func(t *testing.T, c *steppedClock, want time.Duration) {
		t.Helper()
		if got := c.now().Sub(c.base); got != want {
			t.Fatalf("clock reads %v from its base, want %v", got, want)
		}
	}

	t.Run("fail_timeout", func(t *testing.T) {
		c := &steppedClock{base: time.Now()}
		bs := hcBackends(1, 1)
		bs[1].MaxFails, bs[1].FailTimeout = 1, 10*time.Second
		b := mustNew(t, Config{Strategy: RoundRobin, Backends: bs, Now: c.now})
		b.hold(1)
		b.release(1, time.Millisecond, true)
		onlyB := func(i int) bool { return i == 1 }
		if _, err := b.chooseFunc("", onlyB); err != ErrNoBackend {
			t.Fatalf("failed backend picked within fail_timeout: %v", err)
		}
		c.step(-time.Hour)
		c.add(11 * time.Second)
		clockIs(t, c, 11*time.Second)
		if i, err := b.chooseFunc("", onlyB); err != nil || i != 1 {
			t.Fatalf("11s after its failure (wall clock stepped back 1h): %d, %v; want its probe", i, err)
		}
	})

	t.Run("slow start", func(t *testing.T) {
		c := &steppedClock{base: time.Now()}
		bs := hcBackends(10, 10)
		bs[1].SlowStart = 10 * time.Second
		b := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs, Now: c.now})
		b.Recover(1)
		c.add(5 * time.Second)
		c.step(-time.Hour)
		if got := b.EffectiveWeight(1); got <= 1 || got >= 10 {
			t.Fatalf("5s into a 10s ramp (wall clock stepped back 1h): effective weight %d, want about half of 10", got)
		}
		c.add(5 * time.Second)
		if got := b.EffectiveWeight(1); got != 10 {
			t.Fatalf("after the ramp: effective weight %d, want 10", got)
		}
	})

	t.Run("fair probe", func(t *testing.T) {
		c := &steppedClock{base: time.Now()}
		// The first candidates: b, a, a, then a, b.
		rnd := hcScripted(t, [2]uint64{1, 0}, [2]uint64{0, 1}, [2]uint64{0, 1}, [2]uint64{0, 1}, [2]uint64{1, 0})
		b := mustNew(t, Config{Strategy: Fair, Backends: hcBackends(1, 1), Now: c.now, Rand: rnd})
		for k := 0; k < 3; k++ { // b, a (probes), then a (the first candidate)
			i := hcPick(t, b)
			b.hold(i)
			b.release(i, time.Duration(1+9*i)*time.Millisecond, false) // a 1ms, b 10ms
		}
		c.step(-time.Hour)
		c.add(3 * time.Second) // beyond DecayTime/4 since b's pick
		var got []int
		for k := 0; k < 2; k++ {
			i := hcPick(t, b)
			got = append(got, i)
			b.hold(i)
			b.release(i, time.Millisecond, false)
		}
		if letters(got) != "a b" {
			t.Fatalf("picks after 3s (wall clock stepped back 1h): %s, want a b (both probed)", letters(got))
		}
	})
}
