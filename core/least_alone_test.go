package core

import (
	"fmt"
	"math/rand"
	"sync/atomic"
	"testing"
)

// least_conn's steady read under load picks as nginx's pass does, whether
// one member has the fewest requests in flight per weight or several tie:
// twin balancers, one picking as Pick does and one kept to the full pick by
// a filter that refuses nothing; a third picks through pickTable (the full
// pick where it has no answer) and counts the steady read's answers, which
// must be most of them, so that the comparison cannot pass by never taking
// the steady read.
func TestLeastAloneMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	answered, picks := 0, 0
	for set := 0; set < 200; set++ {
		n := 1 + rng.Intn(6)
		var bs []Backend
		for i := 0; i < n; i++ {
			bs = append(bs, Backend{Address: fmt.Sprintf("10.2.0.%d:80", i+1), Weight: 1 + rng.Intn(4), MaxFails: 1})
		}
		steady := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		full := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		own := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		for i := 0; i < n; i++ {
			for k := rng.Intn(5); k > 0; k-- {
				steady.hold(i)
				full.hold(i)
				own.hold(i)
			}
		}
		all := func(int) bool { return true }
		for k := 0; k < 20; k++ {
			got := pickKey(steady, "")
			want, err := full.chooseFunc("", all)
			o := tableChoice(own, "")
			if o != noAnswer {
				answered++
			} else {
				o = pickFrom(own, request{b: own})
			}
			picks++
			if err != nil || got != want || o != want {
				t.Fatalf("set %d pick %d: steady %d, pickTable's way %d, full %d (%v)", set, k, got, o, want, err)
			}
			steady.hold(got)
			full.hold(want)
			own.hold(o)
		}
	}
	if answered < picks*9/10 {
		t.Fatalf("the steady read answered %d of %d picks", answered, picks)
	}
}

// tiedPass, least_conn's steady read for ties under load, picks as the full
// pick does, pick for pick, through requests starting and ending at random:
// twin balancers, one kept off the steady read by a filter that refuses
// nothing, over random weights (and weights beyond the schedule bound, where
// smooth_wrr has no table, and groups around 64 members, beyond which a tie
// has no mask). The counts of ties each way show that both of
// tiedPass's cases ran: every member tied, and some of them.
func TestLeastTiedMatchesFullPick(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	all := func(int) bool { return true }
	allTied, someTied := 0, 0
	for set := 0; set < 124; set++ {
		n := 2 + rng.Intn(5)
		if set >= 120 {
			n = 60 + 2*(set-120) // 60 to 66: beyond 64 members a tie has no mask
		}
		var bs []Backend
		for i := 0; i < n; i++ {
			w := 1 + rng.Intn(4)
			if set%10 == 9 {
				w = []int{999983, 999979, 999961, 999959, 999953, 999931}[i] // a period beyond MaxScheduleEntries
			}
			bs = append(bs, Backend{Address: fmt.Sprintf("10.3.%d.%d:80", i/200, i%200+1), Weight: w, MaxFails: 1})
		}
		quick := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		full := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		var held []int // requests in flight, by backend (the same in both)
		for k := 0; k < 400; k++ {
			if len(held) > 0 && (rng.Intn(3) == 0 || len(held) > 4*n) {
				j := rng.Intn(len(held))
				quick.release(held[j], 0, false)
				full.release(held[j], 0, false)
				held = append(held[:j], held[j+1:]...)
				continue
			}
			g := quick.primary
			if _, ties := scanPlain(g.counts, g.milli, make([]int, n)); len(held) > 0 && ties > 1 {
				if ties == n {
					allTied++
				} else {
					someTied++
				}
			}
			got := pickKey(quick, "")
			want, err := full.chooseFunc("", all)
			if err != nil || got != want {
				t.Fatalf("set %d step %d (weights %v, in flight %v): quick %d, full %d (%v)", set, k, bs, held, got, want, err)
			}
			// The schedule's state too: its mode, and the recording of an orbit.
			if qg, fg := quick.primary, full.primary; qg.sched.gate.Load() != fg.sched.gate.Load() || qg.ties.rec != fg.ties.rec {
				t.Fatalf("set %d step %d: schedule gate %d, recorded %d; full pick's %d, %d", set, k, qg.sched.gate.Load(), qg.ties.rec, fg.sched.gate.Load(), fg.ties.rec)
			}
			quick.hold(got)
			full.hold(want)
			held = append(held, got)
		}
	}
	if allTied < 100 || someTied < 1000 {
		t.Fatalf("ties under load: %d with every member, %d with some: too few to compare", allTied, someTied)
	}
	t.Logf("ties under load: %d with every member, %d with some", allTied, someTied)
}

// least_conn from nine backends counts requests over all of them, and while
// none is in flight its steady read is the schedule's: the table's next
// entry while the schedule follows its canonical table, smooth_wrr's pick
// while it follows an orbit learnt after ties under load, the exact pass
// while it follows neither. Take picks as the full pick does through load
// and idle spells (each idle pick ends before the next), pick for pick and
// schedule state for schedule state, and the idle picks met every mode.
func TestLeastIdleMatchesFullPick(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	all := func(int) bool { return true }
	idle := map[int64]int{} // idle picks by the schedule's mode
	for set := 0; set < 40; set++ {
		var bs []Backend
		for i := 0; i < leastTotalMin+rng.Intn(4); i++ {
			bs = append(bs, Backend{Address: fmt.Sprintf("10.4.0.%d:80", i+1), Weight: 1 + rng.Intn(4), MaxFails: 1})
		}
		took := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		full := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		type open struct {
			i  int
			n  *atomic.Int64
			tk Ticket
		}
		var held []open
		end := func(o open) {
			o.n.Add(-1)
			Done(took, o.i, o.tk, NotSent, false)
			full.release(o.i, 0, false)
		}
		for k := 0; k < 300; k++ {
			load := k%100 >= 50 // 50 idle picks, then 50 under load
			if !load {
				for _, o := range held {
					end(o)
				}
				held = held[:0]
				idle[took.primary.sched.gate.Load()&modeMask]++
			} else if len(held) > 0 && rng.Intn(3) == 0 {
				j := rng.Intn(len(held))
				end(held[j])
				held = append(held[:j], held[j+1:]...)
			}
			want, err := full.chooseFunc("", all)
			i, n, tk := Take(took, "")
			if err != nil || i != want || n == nil || tk != ticketTotal {
				t.Fatalf("set %d step %d (weights %v): Take %d (count %v, ticket %d), full pick %d (%v)", set, k, bs, i, n, tk, want, err)
			}
			if a, b := took.primary.sched.gate.Load(), full.primary.sched.gate.Load(); a != b {
				t.Fatalf("set %d step %d: schedule gate %d, the full pick's %d", set, k, a, b)
			}
			full.hold(want)
			held = append(held, open{i, n, tk})
		}
		for _, o := range held {
			end(o)
		}
		if got := took.inflight.Load(); got != 0 {
			t.Fatalf("set %d: %d in flight over all backends after every request ended", set, got)
		}
	}
	if idle[0] < 50 || idle[1] < 50 || idle[2] < 50 {
		t.Fatalf("idle picks by schedule mode %v: too few in some mode to compare", idle)
	}
	t.Logf("idle picks by schedule mode: %v", idle)
}
