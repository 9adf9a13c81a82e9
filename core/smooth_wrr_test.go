package core

import (
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
)

func TestSmoothWRRWorkedExamples(t *testing.T) {
	checkSequences(t, SmoothWRR, []seqCase{
		{"5,3,2", []int{5, 3, 2}, nil, "a b c a a b a c b a a b c a a b a c b a"},
		{"5,1,1", []int{5, 1, 1}, nil, "a a b a c a a a a b a c a a"},
		{"7,5 (as real nginx 1.22 picks)", []int{7, 5}, nil, "a b a b a a b a b a b a a b"},
		{"scaled 50,30,20", []int{50, 30, 20}, nil, "a b c a a b a c b a a b c a a b a c b a"},
		{"5,3,2 with b down", []int{5, 3, 2}, []bool{false, true, false}, "a c a a a c a a c a a a c a"},
		{"down first", []int{4, 1, 1}, []bool{true, false, false}, "b c b c"},
		{"equal", []int{2, 2, 2}, nil, "a b c a b c"},
	})
}

// weightSets returns count weight sets of 2..maxN backends with weights
// 1..maxW and about one in six backends down (never all of them).
func weightSets(seed int64, count, maxN, maxW int) (ws [][]int, downs [][]bool) {
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < count; i++ {
		n := 2 + rng.Intn(maxN-1)
		w := drawWeights(rng, n, maxW)
		d := make([]bool, n)
		for k := range d {
			d[k] = rng.Intn(6) == 0
		}
		d[rng.Intn(n)] = false
		ws, downs = append(ws, w), append(downs, d)
	}
	return ws, downs
}

func TestSmoothWRRMatchesNginx(t *testing.T) {
	ws, downs := weightSets(1, 200, 12, 20)
	for k := range ws {
		b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(ws[k], downs[k])})
		if b.primary.strategy.(*smoothWRR).table == nil {
			t.Fatalf("set %d: no table", k)
		}
		ref := newNginxSmooth(ws[k], downs[k])
		for i, got := range pickN(t, b, 3*sumInts(ws[k])+7) {
			if want := ref.pick(nil); got != want {
				t.Fatalf("weights %v down %v: pick %d = %d, nginx %d", ws[k], downs[k], i, got, want)
			}
		}
	}
}

func sumInts(w []int) int {
	s := 0
	for _, x := range w {
		s += x
	}
	return s
}

func TestSmoothGenScaledWeightsSameSequence(t *testing.T) {
	ws, _ := weightSets(2, 100, 10, 12)
	for _, w := range ws {
		scaled := make([]int, len(w))
		for i := range w {
			scaled[i] = w[i] * 6
		}
		// The reference runs on the scaled weights, the table on the
		// reduced ones: they must agree for two of nginx's periods.
		ref := newNginxSmooth(scaled, nil)
		b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(scaled, nil)})
		if got, want := len(b.primary.strategy.(*smoothWRR).table), sumInts(scaled)/6/gcdAll(w); got != want {
			t.Fatalf("weights %v: table of %d entries, want %d", scaled, got, want)
		}
		for i, got := range pickN(t, b, 2*sumInts(scaled)) {
			if want := ref.pick(nil); got != want {
				t.Fatalf("weights %v: pick %d = %d, nginx %d", scaled, i, got, want)
			}
		}
	}
}

func gcdAll(w []int) int {
	g := 0
	for _, x := range w {
		g = int(gcd(int64(g), int64(x)))
	}
	return g
}

// TestSmoothWRRSharesAndSmoothness checks exact shares over whole periods and
// nginx's smoothness bound: in any window of k picks, backend i gets at most
// ceil(w_i*k/W)+1 of them.
func TestSmoothWRRSharesAndSmoothness(t *testing.T) {
	ws, _ := weightSets(3, 60, 10, 10)
	for _, w := range ws {
		b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
		W := sumInts(w)
		seq := pickN(t, b, 3*W)
		counts := make([]int, len(w))
		for _, p := range seq {
			counts[p]++
		}
		for i := range w {
			if counts[i] != 3*w[i] {
				t.Fatalf("weights %v: backend %d got %d of 3 periods, want %d", w, i, counts[i], 3*w[i])
			}
		}
		for k := 1; k <= W; k++ {
			win := make([]int, len(w))
			for j, p := range seq {
				win[p]++
				if j >= k {
					win[seq[j-k]]--
				}
				if j < k-1 {
					continue
				}
				for i := range w {
					if bound := (w[i]*k+W-1)/W + 1; win[i] > bound {
						t.Fatalf("weights %v: backend %d has %d picks in the window of %d ending at %d, bound %d", w, i, win[i], k, j, bound)
					}
				}
			}
		}
	}
}

func TestSmoothWRRConcurrentExactCounts(t *testing.T) {
	w := drawWeights(rand.New(rand.NewSource(4)), 50, 10)
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
	const periods = 40
	checkConcurrentCounts(t, b, periods*sumInts(w), func(i int) int { return periods * w[i] }, "40 periods")
}

// countPicks makes n picks and counts them; errors count at index -1, which
// panics the test goroutine, so there are none.
func countPicks(b *Balancer, n int, counts []int, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; i < n; i++ {
		p, err := b.choose("")
		if err != nil {
			p = -1
		}
		counts[p]++
	}
}

// TestSmoothWRRRefusedSharesOut: when the caller refuses b, the picks the
// table gives b go through nginx's exact pass over the others, which shares
// them out as nginx does: a and c end up in exact 5:2 proportion.
func TestSmoothWRRRefusedSharesOut(t *testing.T) {
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends([]int{5, 3, 2}, nil)})
	notB := func(i int) bool { return i != 1 }
	counts := make([]int, 3)
	for i := 0; i < 70; i++ {
		p, err := b.chooseFunc("", notB)
		if err != nil {
			t.Fatal(err)
		}
		counts[p]++
	}
	// 7 periods: the table gives a 35 and c 14; b's 21 go 15:6 by nginx's
	// rule over a and c (three whole periods of 5,2).
	if counts[0] != 50 || counts[1] != 0 || counts[2] != 20 {
		t.Fatalf("counts %v, want [50 0 20]", counts)
	}
	// Everything refused: no backend.
	if p, err := b.chooseFunc("", func(int) bool { return false }); err != ErrNoBackend || p != -1 {
		t.Fatalf("all refused: %d, %v", p, err)
	}
}

// TestSmoothWRRExactPathFollowsNginx: with every pick refusing a backend,
// every pick is nginx's, pick for pick: the table's picks until the refused
// backend is scheduled, then nginx's pass over the others, continuing from
// the state the table had reached. (The earlier version of this test expected
// the table's picks to go on after the first refusal, which nginx does not
// do: its state has moved on without the refused backend.)
func TestSmoothWRRExactPathFollowsNginx(t *testing.T) {
	ws, _ := weightSets(5, 40, 8, 9)
	for _, w := range ws {
		if len(w) < 3 {
			continue
		}
		b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
		ref := newNginxSmooth(w, nil)
		refuse := func(i int) bool { return i != 0 }
		for i := 0; i < 2*sumInts(w); i++ {
			p, err := b.chooseFunc("", refuse)
			if err != nil {
				t.Fatal(err)
			}
			if want := ref.pick(refuse); p != want {
				t.Fatalf("weights %v pick %d: chose %d, nginx %d", w, i, p, want)
			}
		}
	}
}

// TestSmoothWRRUnsteadyIsExact: while a member is unsteady every pick is
// nginx's exact pass, which goes on from the state the table had reached
// (the earlier version expected it to restart from nginx's initial state,
// which nginx never does); when the pass reaches nginx's initial state again
// the table takes over at its start.
func TestSmoothWRRUnsteadyIsExact(t *testing.T) {
	w := []int{5, 3, 2}
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
	s := b.primary.strategy.(*smoothWRR)
	if got := letters(pickN(t, b, 3)); got != "a b c" {
		t.Fatalf("table: %s", got)
	}
	b.primary.addUnsteady(1)
	if got := letters(pickN(t, b, 10)); got != "a a b a c b a a b c" {
		t.Fatalf("unsteady: %s", got)
	}
	b.primary.addUnsteady(-1)
	if got := letters(pickN(t, b, 7)); got != "a a b a c b a" {
		t.Fatalf("steady again: %s", got)
	}
	// The last pick ended nginx's period: the table is back.
	if s.sched.mode() != 1 {
		t.Fatalf("mode %d, want the canonical table", s.sched.mode())
	}
}

func TestSmoothWRRBeyondBound(t *testing.T) {
	// A period of 1,999,997 picks: beyond MaxScheduleEntries.
	w := []int{MaxWeight, MaxWeight - 1, 2}
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
	if b.primary.strategy.(*smoothWRR).table != nil {
		t.Fatal("table built beyond the bound")
	}
	ref := newNginxSmooth(w, nil)
	for i, got := range pickN(t, b, 5000) {
		if want := ref.pick(nil); got != want {
			t.Fatalf("pick %d = %d, nginx %d", i, got, want)
		}
	}
}

func TestSmoothWRRBackups(t *testing.T) {
	bs := testBackends([]int{1, 1, 3, 1}, nil)
	bs[2].Backup, bs[3].Backup = true, true
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs})
	if got := letters(pickN(t, b, 4)); got != "a b a b" {
		t.Fatalf("primaries: %s", got)
	}
	primariesGone := func(i int) bool { return i >= 2 }
	var seq []int
	for i := 0; i < 8; i++ {
		p, err := b.chooseFunc("", primariesGone)
		if err != nil {
			t.Fatal(err)
		}
		seq = append(seq, p)
	}
	if got := letters(seq); got != "c c d c c c d c" {
		t.Fatalf("backups: %s", got)
	}
}

func TestSmoothWRRStagger(t *testing.T) {
	w := []int{5, 3, 2}
	plain := letters(pickN(t, mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)}), 20))
	starts := map[int]bool{}
	for seed := int64(0); seed < 40; seed++ {
		b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil), Stagger: true, Rand: seededRandFunc(seed)})
		start := b.primary.strategy.(*smoothWRR).cur.start
		if want := int(seededRandFunc(seed)() % 10); start != want {
			t.Fatalf("seed %d: start %d, want %d", seed, start, want)
		}
		starts[start] = true
		got := letters(pickN(t, b, 10))
		if want := plain[2*start : 2*start+19]; got != want {
			t.Fatalf("seed %d start %d: %s, want %s", seed, start, got, want)
		}
	}
	if len(starts) < 8 {
		t.Fatalf("40 staggered balancers used only %d of 10 starting points", len(starts))
	}
}

func TestCursorWrapsExactly(t *testing.T) {
	for _, size := range []int{1, 3, 10, 5500, 1 << 20} {
		c := newCursor(size, uint64(size)-1)
		// Move the counter close to the wrap and check every position
		// across it.
		c.n.Store(c.limit - 5)
		want := int((c.limit - 5) % uint64(size))
		for i := 0; i < 20; i++ {
			if got := c.take(1); got != want {
				t.Fatalf("size %d step %d: %d, want %d", size, i, got, want)
			}
			want = (want + 1) % size
		}
		if c.n.Load() >= c.limit {
			t.Fatalf("size %d: counter %d not wrapped below %d", size, c.n.Load(), c.limit)
		}
		// Jumps across the limit wrap too.
		c.n.Store(c.limit - 2)
		want = int((c.limit - 2) % uint64(size))
		if got := c.take(7); got != want {
			t.Fatalf("size %d: jump from %d, want %d", size, got, want)
		}
		if got, want := c.take(1), (want+7)%size; got != want {
			t.Fatalf("size %d: after jump %d, want %d", size, got, want)
		}
	}
}

func TestSmoothWRRAllocs(t *testing.T) {
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends([]int{5, 3, 2}, nil)})
	checkPickAllocs(t, b, func(i int) bool { return i != 1 })
}

var sinkInt int

// BenchmarkCursor compares the cursor's fastmod reduction with a plain
// 64-bit modulo of the same atomic counter.
func BenchmarkCursor(b *testing.B) {
	const size = 5503 // about the period of 1000 weights of 1..10
	b.Run("fastmod", func(b *testing.B) {
		c := newCursor(size, 0)
		for i := 0; i < b.N; i++ {
			sinkInt += c.take(1)
		}
	})
	b.Run("modulo", func(b *testing.B) {
		var n atomic.Uint64
		d := uint64(size)
		for i := 0; i < b.N; i++ {
			sinkInt += int((n.Add(1) - 1) % d)
		}
	})
}
