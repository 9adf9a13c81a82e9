package core

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// Every hash strategy's table answers what its full pick answers, key for
// key (with members down, failing, and with requests in flight for
// bounded). Each case also checks that the group has its table, and that the
// table answered most keys itself, so that the comparison cannot pass by
// never taking it.
func TestHashTableMatchesFullPick(t *testing.T) {
	weighted := func(down ...int) []Backend {
		bs := numbered(12)
		for i := range bs {
			bs[i].Weight = i%4 + 1
		}
		for _, i := range down {
			bs[i].Down = true
		}
		return bs
	}
	var keys []string
	for i := 0; i < 3000; i++ {
		keys = append(keys, fmt.Sprintf("/item/%d?q=%d", i*7919, i%13))
	}
	var ips []string
	for i := 0; i < 3000; i++ {
		ips = append(ips, fmt.Sprintf("%d.%d.%d.%d", 1+i%223, (i*37)%256, (i*11)%256, i%256))
	}
	ips = append(ips, "01.2.3.4", "1.2.3.256", "1.2.3", "1.2.3.4%eth0", "::ffff:1.2.3.4", "2001:db8::1", "", "unknown")
	cases := []struct {
		name      string
		cfg       Config
		kind      int
		keys      []string
		inflight  bool // start requests on the first picks, for bounded's caps
		maxFailOn int  // with max_fails on every member, fail this one (-1: none)
	}{
		{"modulo", Config{Strategy: URLHash, HashMode: HashModulo, Backends: weighted()}, tableCRC, keys, false, -1},
		{"modulo down", Config{Strategy: URLHash, HashMode: HashModulo, Backends: weighted(2, 7)}, tableCRC, keys, false, -1},
		{"ketama", Config{Strategy: URLHash, Backends: weighted()}, tableCRC, keys, false, -1},
		{"ketama down", Config{Strategy: URLHash, Backends: weighted(0, 5)}, tableCRC, keys, false, -1},
		{"ketama failing", Config{Strategy: URLHash, Backends: weighted()}, tableCRC, keys, false, 3},
		{"maglev", Config{Strategy: URLHash, HashMode: HashMaglev, Backends: weighted()}, tableMaglev, keys, false, -1},
		{"maglev down", Config{Strategy: URLHash, HashMode: HashMaglev, Backends: weighted(4)}, tableMaglev, keys, false, -1},
		{"bounded", Config{Strategy: URLHash, HashMode: HashBounded, Backends: weighted()}, tableBounded, keys, false, -1},
		{"bounded in flight", Config{Strategy: URLHash, HashMode: HashBounded, Backends: weighted(1)}, tableBounded, keys, true, -1},
		{"ip_hash", Config{Strategy: IPHash, Backends: weighted()}, tableIPHash, ips, false, -1},
		{"ip_hash down", Config{Strategy: IPHash, Backends: weighted(3, 9)}, tableIPHash, ips, false, -1},
		{"ip_hash failing", Config{Strategy: IPHash, Backends: weighted()}, tableIPHash, ips, false, 0},
	}
	for _, c := range cases {
		if c.maxFailOn >= 0 {
			for i := range c.cfg.Backends {
				c.cfg.Backends[i].MaxFails = 1
			}
		}
		b := mustNew(t, c.cfg)
		if b.primary.table != c.kind {
			t.Errorf("%s: table %d, want %d", c.name, b.primary.table, c.kind)
			continue
		}
		if c.maxFailOn >= 0 {
			b.hold(c.maxFailOn)
			b.release(c.maxFailOn, 0, true)
		}
		quick := 0
		for k, key := range c.keys {
			if c.inflight && k < 400 {
				b.hold(pickFrom(b, request{key: key, b: b}))
			}
			want := pickFrom(b, request{key: key, b: b})
			if got := pickKey(b, key); got != want {
				t.Fatalf("%s: key %q: pick %d, full pick %d", c.name, key, got, want)
			}
			if steadyAnswer(b, key) {
				quick++
			}
		}
		// The table must answer most keys itself (the rest are ambiguous
		// buckets, down members, or not IPv4), and none while a member is
		// out for max_fails.
		switch {
		case c.maxFailOn >= 0 && quick != 0:
			t.Errorf("%s: the table answered %d keys while a member is out", c.name, quick)
		case c.maxFailOn < 0 && quick < len(c.keys)/2:
			t.Errorf("%s: the table answered %d of %d keys", c.name, quick, len(c.keys))
		}
	}
}

// steadyAnswer reports whether the group's table answers key itself,
// without the full pick.
func steadyAnswer(b *Balancer, key string) bool { return tableChoice(b, key) != noAnswer }

// The tables' draws follow the shares: random uniformly over the members
// that are not down, weighted_random and two choices' first candidate by
// weight.
func TestTableDrawShares(t *testing.T) {
	bs := []Backend{{Address: "a:1", Weight: 5}, {Address: "b:1", Weight: 3}, {Address: "c:1", Weight: 2, Down: true}, {Address: "d:1", Weight: 2}}
	for _, c := range []struct {
		strategy string
		two      bool
		kind     int
		want     []float64
	}{
		{Random, false, tableDraw, []float64{1.0 / 3, 1.0 / 3, 0, 1.0 / 3}},
		{WeightedRandom, false, tableDraw, []float64{0.5, 0.3, 0, 0.2}},
		// Nothing in flight: every pair ties, and the first candidate wins.
		{LeastConn, true, tableTwo, []float64{0.5, 0.3, 0, 0.2}},
	} {
		b := mustNew(t, Config{Strategy: c.strategy, TwoChoices: c.two, Backends: bs, Rand: seededRandFunc(7)})
		if b.primary.table != c.kind {
			t.Fatalf("%s: table %d, want %d", c.strategy, b.primary.table, c.kind)
		}
		const n = 60000
		counts := make([]int, len(bs))
		for k := 0; k < n; k++ {
			counts[pickKey(b, "")]++
		}
		for i, w := range c.want {
			if got := float64(counts[i]) / n; got < w-0.01 || got > w+0.01 {
				t.Errorf("%s: backend %d share %.3f, want %.3f +- 0.01", c.strategy, i, got, w)
			}
		}
	}
}

// fair's steady read makes the choices its full pick makes: two balancers
// with the same clock and random source, one picking as Pick does and one
// through the full pick, fed the same latencies, agree pick for pick,
// through the probe rule and the scored choice (of all members in a group
// of up to fairScan, of two beyond), until a failure makes the group
// unsteady and both take the full pick.
func TestFairSteadyMatchesFullPick(t *testing.T) {
	for _, weights := range [][]int{{3, 1, 2, 2, 1}, {3, 1, 2, 2, 1, 1, 4, 1, 2, 1}} {
		bs := hcBackends(weights...)
		for i := range bs {
			bs[i].MaxFails = 2
		}
		clock := newHCClock()
		quick := mustNew(t, Config{Strategy: Fair, Backends: bs, DecayTime: time.Second, Now: clock.now, Rand: seededRandFunc(5)})
		full := mustNew(t, Config{Strategy: Fair, Backends: bs, DecayTime: time.Second, Now: clock.now, Rand: seededRandFunc(5)})
		if quick.primary.table != tableFair {
			t.Fatalf("table %d, want %d", quick.primary.table, tableFair)
		}
		var open [][2]int // requests in flight: backend, pick at which it ends
		for k := 0; k < 4000; k++ {
			got, want := pickKey(quick, ""), pickFrom(full, request{b: full})
			if got != want {
				t.Fatalf("%d backends: pick %d: steady read %d, full pick %d", len(bs), k, got, want)
			}
			// Backend i answers in (i+1)*3ms; a request stays open for up to
			// 6 more picks; the clock moves 1ms a pick, with a 400ms pause
			// now and then for the probe rule (DecayTime/4 is 250ms); backend 2 fails at pick 3000.
			for _, b := range []*Balancer{quick, full} {
				b.hold(got)
				if k == 3000 {
					b.hold(2)
					b.release(2, time.Millisecond, true)
				}
			}
			open = append(open, [2]int{got, k + k%7})
			still := open[:0]
			for _, r := range open {
				if r[1] > k {
					still = append(still, r)
					continue
				}
				for _, b := range []*Balancer{quick, full} {
					b.release(r[0], time.Duration(r[0]+1)*3*time.Millisecond, false)
				}
			}
			open = still
			clock.add(time.Millisecond)
			if k%500 == 499 {
				clock.add(400 * time.Millisecond)
			}
		}
		if quick.Fails(2) == 0 {
			t.Fatal("backend 2's failure was not counted: the group stayed quiet")
		}
	}
}

// TestSteadyMatchesFullPick holds every strategy's steady read (its
// group's table, or its function in interp.go) to its full pick, choice for
// choice: three balancers built alike, with clocks and random sources
// alike, pick for the same keys; one as Pick does, one through the full
// pick alone, and one through pickTable, falling back to the full pick
// where the table has no answer, which counts the table's answers so that
// the comparison cannot pass by never taking the table. Requests are held
// in flight and ended at random on all three alike, one fails at step 300
// (the group is unsteady for a while, then steady again once the failure
// window has passed and the backend recovered).
func TestSteadyMatchesFullPick(t *testing.T) {
	down := func(bs []Backend, i int) []Backend { bs[i].Down = true; return bs }
	cases := []struct {
		name string
		cfg  Config
		keys bool // hashed: requests carry keys
		min  int  // the fewest picks of 1200 the table must answer
	}{
		// After the failure smooth_wrr follows an orbit it learnt, which its
		// full pick reads in O(1): the table answers until then.
		{"smooth_wrr", Config{Strategy: SmoothWRR, Backends: hcBackends(5, 3, 2, 1)}, false, 290},
		{"smooth_wrr down", Config{Strategy: SmoothWRR, Backends: down(hcBackends(5, 3, 2, 1), 1)}, false, 290},
		{"gcd_wrr", Config{Strategy: GCDWRR, Backends: hcBackends(6, 3, 1)}, false, 900},
		{"round_robin", Config{Strategy: RoundRobin, Backends: down(hcBackends(1, 1, 1, 1), 2)}, false, 900},
		{"random", Config{Strategy: Random, Backends: down(hcBackends(1, 1, 1, 1), 0)}, false, 900},
		{"weighted_random", Config{Strategy: WeightedRandom, Backends: hcBackends(5, 3, 2)}, false, 900},
		{"least_conn", Config{Strategy: LeastConn, Backends: hcBackends(5, 3, 2)}, false, 900},
		{"least_conn nine", Config{Strategy: LeastConn, Backends: hcBackends(1, 2, 3, 1, 2, 3, 1, 2, 3)}, false, 900},
		{"least_conn seventy", Config{Strategy: LeastConn, Backends: hcBackends(seventy()...)}, false, 1},
		{"least_conn two_choices", Config{Strategy: LeastConn, TwoChoices: true, Backends: hcBackends(5, 3, 2, 1)}, false, 900},
		{"fair", Config{Strategy: Fair, Backends: hcBackends(5, 3, 2)}, false, 900},
		{"fair ten", Config{Strategy: Fair, Backends: hcBackends(1, 2, 3, 4, 5, 1, 2, 3, 4, 5)}, false, 900},
		{"ip_hash", Config{Strategy: IPHash, Backends: down(hcBackends(1, 2, 3, 1), 3)}, true, 700},
		{"url_hash ketama", Config{Strategy: URLHash, Backends: hcBackends(1, 2, 3, 1)}, true, 700},
		{"url_hash modulo", Config{Strategy: URLHash, HashMode: HashModulo, Backends: hcBackends(1, 2, 3, 1)}, true, 700},
		{"url_hash maglev", Config{Strategy: URLHash, HashMode: HashMaglev, Backends: down(hcBackends(1, 2, 3, 1), 0)}, true, 700},
		{"url_hash bounded", Config{Strategy: URLHash, HashMode: HashBounded, Backends: hcBackends(1, 2, 3, 1)}, true, 700},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.cfg.Backends {
				c.cfg.Backends[i].MaxFails = 2
				c.cfg.Backends[i].FailTimeout = 200 * time.Millisecond
			}
			clock := newHCClock()
			c.cfg.Now = clock.now
			var bs [3]*Balancer
			for k := range bs {
				cfg := c.cfg
				cfg.Rand = seededRandFunc(21)
				bs[k] = mustNew(t, cfg)
			}
			viaPick, full, viaTable := bs[0], bs[1], bs[2]
			rng := rand.New(rand.NewSource(5))
			var held []int
			answered := 0
			for step := 0; step < 1200; step++ {
				key := ""
				if c.keys {
					key = fmt.Sprintf("10.%d.%d.9", rng.Intn(40), rng.Intn(256))
				}
				want := pickFrom(full, request{key: key, b: full})
				got := pickKey(viaPick, key)
				own := tableChoice(viaTable, key)
				if own != noAnswer {
					answered++
				} else {
					own = pickFrom(viaTable, request{key: key, b: viaTable})
				}
				if got != want || own != want {
					t.Fatalf("step %d key %q: Pick's %d, the table's way %d, the full pick %d", step, key, got, own, want)
				}
				if want < 0 {
					continue
				}
				failed := step == 300 || step == 301
				for _, b := range bs {
					b.hold(want)
					if failed {
						b.release(want, 3*time.Millisecond, true)
					}
				}
				if !failed {
					held = append(held, want)
				}
				for len(held) > 0 && (rng.Intn(3) > 0 || len(held) > 6) {
					j := rng.Intn(len(held))
					for _, b := range bs {
						b.release(held[j], time.Duration(held[j]+1)*time.Millisecond, false)
					}
					held = append(held[:j], held[j+1:]...)
				}
				clock.add(time.Millisecond)
			}
			if answered < c.min {
				t.Errorf("the table answered %d of 1200 picks, want at least %d", answered, c.min)
			}
		})
	}
}

// seventy is seventy weights of 1 to 3: a least_conn group beyond the tie
// mask, whose steady read answers only while nothing is in flight.
func seventy() []int {
	w := make([]int, 70)
	for i := range w {
		w[i] = 1 + i%3
	}
	return w
}
