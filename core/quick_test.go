package core

import (
	"fmt"
	"testing"
	"time"
)

// Every quick path answers what the strategy's full pick answers: the hash
// strategies key for key (with members down, failing, and with requests in
// flight for bounded), the draws in distribution (see the strategies' own
// share tests). Each case also checks that the group has the quick path, so
// that the comparison cannot pass by never taking it.
func TestQuickPathMatchesFullPick(t *testing.T) {
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
		{"modulo", Config{Strategy: URLHash, HashMode: HashModulo, Backends: weighted()}, quickCRC, keys, false, -1},
		{"modulo down", Config{Strategy: URLHash, HashMode: HashModulo, Backends: weighted(2, 7)}, quickCRC, keys, false, -1},
		{"ketama", Config{Strategy: URLHash, Backends: weighted()}, quickCRC, keys, false, -1},
		{"ketama down", Config{Strategy: URLHash, Backends: weighted(0, 5)}, quickCRC, keys, false, -1},
		{"ketama failing", Config{Strategy: URLHash, Backends: weighted()}, quickCRC, keys, false, 3},
		{"maglev", Config{Strategy: URLHash, HashMode: HashMaglev, Backends: weighted()}, quickMaglev, keys, false, -1},
		{"maglev down", Config{Strategy: URLHash, HashMode: HashMaglev, Backends: weighted(4)}, quickMaglev, keys, false, -1},
		{"bounded", Config{Strategy: URLHash, HashMode: HashBounded, Backends: weighted()}, quickBounded, keys, false, -1},
		{"bounded in flight", Config{Strategy: URLHash, HashMode: HashBounded, Backends: weighted(1)}, quickBounded, keys, true, -1},
		{"ip_hash", Config{Strategy: IPHash, Backends: weighted()}, quickIPHash, ips, false, -1},
		{"ip_hash down", Config{Strategy: IPHash, Backends: weighted(3, 9)}, quickIPHash, ips, false, -1},
		{"ip_hash failing", Config{Strategy: IPHash, Backends: weighted()}, quickIPHash, ips, false, 0},
	}
	for _, c := range cases {
		if c.maxFailOn >= 0 {
			for i := range c.cfg.Backends {
				c.cfg.Backends[i].MaxFails = 1
			}
		}
		b := mustNew(t, c.cfg)
		if b.primary.quick != c.kind {
			t.Errorf("%s: quick path %d, want %d", c.name, b.primary.quick, c.kind)
			continue
		}
		if c.maxFailOn >= 0 {
			b.Start(c.maxFailOn)
			b.Done(c.maxFailOn, 0, true)
		}
		quick := 0
		for k, key := range c.keys {
			if c.inflight && k < 400 {
				b.Start(pickFrom(b, request{key: key, b: b}))
			}
			want := pickFrom(b, request{key: key, b: b})
			if got := PickIndex(b, key); got != want {
				t.Fatalf("%s: key %q: quick pick %d, full pick %d", c.name, key, got, want)
			}
			if quickAnswer(b, key) {
				quick++
			}
		}
		// The quick path must answer most keys itself (the rest are
		// ambiguous buckets, down members, or not IPv4), and none while a
		// member is out for max_fails.
		switch {
		case c.maxFailOn >= 0 && quick != 0:
			t.Errorf("%s: the quick path answered %d keys while a member is out", c.name, quick)
		case c.maxFailOn < 0 && quick < len(c.keys)/2:
			t.Errorf("%s: the quick path answered %d of %d keys", c.name, quick, len(c.keys))
		}
	}
}

// quickAnswer reports whether PickIndex's quick path answers key itself,
// without the full pick: its table has an entry for the key.
func quickAnswer(b *Balancer, key string) bool {
	g := b.primary
	if key == "" || len(g.flagged) != 0 && g.failing.Load() != 0 {
		return false
	}
	var e int32
	switch g.quick {
	case quickCRC, quickBounded:
		e = g.look[crcString(key)>>g.lookShift]
	case quickMaglev:
		e = g.look[(maglevKey(key)>>32)*g.lookSize>>32]
	case quickIPHash:
		e = g.look[ipv4Hash(key)]
	}
	return e >= 0
}

// The draws of the quick paths follow the shares: random uniformly over
// the members that are not down, weighted_random and two choices' first
// candidate by weight.
func TestQuickDrawShares(t *testing.T) {
	bs := []Backend{{Address: "a:1", Weight: 5}, {Address: "b:1", Weight: 3}, {Address: "c:1", Weight: 2, Down: true}, {Address: "d:1", Weight: 2}}
	for _, c := range []struct {
		strategy string
		two      bool
		kind     int
		want     []float64
	}{
		{Random, false, quickDraw, []float64{1.0 / 3, 1.0 / 3, 0, 1.0 / 3}},
		{WeightedRandom, false, quickDraw, []float64{0.5, 0.3, 0, 0.2}},
		// Nothing in flight: every pair ties, and the first candidate wins.
		{LeastConn, true, quickTwo, []float64{0.5, 0.3, 0, 0.2}},
	} {
		b := mustNew(t, Config{Strategy: c.strategy, TwoChoices: c.two, Backends: bs, Rand: seededRandFunc(7)})
		if b.primary.quick != c.kind {
			t.Fatalf("%s: quick path %d, want %d", c.strategy, b.primary.quick, c.kind)
		}
		const n = 60000
		counts := make([]int, len(bs))
		for k := 0; k < n; k++ {
			counts[PickIndex(b, "")]++
		}
		for i, w := range c.want {
			if got := float64(counts[i]) / n; got < w-0.01 || got > w+0.01 {
				t.Errorf("%s: backend %d share %.3f, want %.3f +- 0.01", c.strategy, i, got, w)
			}
		}
	}
}

// fair's quick path makes the choices its full pick makes: two balancers
// with the same clock and random source, one picking through PickIndex and
// one through the full pick, fed the same latencies, agree pick for pick,
// through the probe rule and the scored choice (of all members in a group
// of up to fairScan, of two beyond), until a failure makes the group no
// longer quiet and both take the full pick.
func TestFairQuickPathMatchesFullPick(t *testing.T) {
	for _, weights := range [][]int{{3, 1, 2, 2, 1}, {3, 1, 2, 2, 1, 1, 4, 1, 2, 1}} {
		bs := hcBackends(weights...)
		for i := range bs {
			bs[i].MaxFails = 2
		}
		clock := newHCClock()
		quick := mustNew(t, Config{Strategy: Fair, Backends: bs, DecayTime: time.Second, Now: clock.now, Rand: seededRandFunc(5)})
		full := mustNew(t, Config{Strategy: Fair, Backends: bs, DecayTime: time.Second, Now: clock.now, Rand: seededRandFunc(5)})
		if quick.primary.quick != quickFair {
			t.Fatalf("quick path %d, want %d", quick.primary.quick, quickFair)
		}
		var open [][2]int // requests in flight: backend, pick at which it ends
		for k := 0; k < 4000; k++ {
			got, want := PickIndex(quick, ""), pickFrom(full, request{b: full})
			if got != want {
				t.Fatalf("%d backends: pick %d: quick path %d, full pick %d", len(bs), k, got, want)
			}
			// Backend i answers in (i+1)*3ms; a request stays open for up to
			// 6 more picks; the clock moves 1ms a pick, with a 400ms pause
			// now and then for the probe rule (DecayTime/4 is 250ms); backend 2 fails at pick 3000.
			for _, b := range []*Balancer{quick, full} {
				b.Start(got)
				if k == 3000 {
					b.Start(2)
					b.Done(2, time.Millisecond, true)
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
					b.Done(r[0], time.Duration(r[0]+1)*3*time.Millisecond, false)
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

// PickNext answers as PickIndex does for every strategy: twin balancers,
// one picking through each, agree pick for pick (least_conn with requests
// left in flight, so that its table must not answer).
func TestPickNextMatchesPickIndex(t *testing.T) {
	bs := hcBackends(5, 1, 3, 2, 4, 1)
	bs[4].Down = true
	for _, cfg := range []Config{
		{Strategy: SmoothWRR}, {Strategy: GCDWRR}, {Strategy: RoundRobin},
		{Strategy: LeastConn}, {Strategy: IPHash},
		{Strategy: URLHash}, {Strategy: URLHash, HashMode: HashMaglev}, {Strategy: URLHash, HashMode: HashBounded},
	} {
		cfg.Backends = bs
		next, index := mustNew(t, cfg), mustNew(t, cfg)
		for k := 0; k < 500; k++ {
			key := fmt.Sprintf("10.%d.%d.7", k%5, k*13%256)
			got, want := PickNext(next, key), PickIndex(index, key)
			if got != want {
				t.Fatalf("%s %s: pick %d: PickNext %d, PickIndex %d", cfg.Strategy, cfg.HashMode, k, got, want)
			}
			if k%3 != 0 { // two requests in three stay in flight
				next.Start(got)
				index.Start(want)
			}
		}
	}
}
