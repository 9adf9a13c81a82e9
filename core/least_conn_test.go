package core

import (
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"
)

// hcBackends returns backends a, b, c, ... with the given weights.
func hcBackends(weights ...int) []Backend {
	bs := make([]Backend, len(weights))
	for i, w := range weights {
		bs[i] = Backend{Address: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: w}
	}
	return bs
}

// hcPick picks and fails the test on an error.
func hcPick(tb testing.TB, b *Balancer) int {
	tb.Helper()
	i, err := b.choose("")
	if err != nil {
		tb.Fatal(err)
	}
	return i
}

// hcClock is an injected clock the test moves by hand.
type hcClock struct {
	mu    sync.Mutex
	t     time.Time
	reads int
}

func newHCClock() *hcClock { return &hcClock{t: time.Unix(1700000000, 0)} }

func (c *hcClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.t
}

func (c *hcClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *hcClock) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// nginxLC is a transliteration of nginx's least_conn peer choice
// (ngx_http_upstream_get_least_conn_peer) over plain fields, the reference
// the strategy must match pick for pick.
type nginxLC struct {
	weight, conns, current, effective []int
	down                              []bool
}

func newNginxLC(weights []int, down []bool) *nginxLC {
	n := len(weights)
	m := &nginxLC{weight: weights, conns: make([]int, n), current: make([]int, n), effective: make([]int, n), down: down}
	copy(m.effective, weights)
	return m
}

func (m *nginxLC) pick() int {
	best, many := -1, false
	for i := range m.weight {
		if m.down[i] {
			continue
		}
		if best < 0 || m.conns[i]*m.weight[best] < m.conns[best]*m.weight[i] {
			best, many = i, false
		} else if m.conns[i]*m.weight[best] == m.conns[best]*m.weight[i] {
			many = true
		}
	}
	if best < 0 {
		return -1
	}
	if many {
		total, p := 0, best
		for i := p; i < len(m.weight); i++ {
			if m.down[i] || m.conns[i]*m.weight[p] != m.conns[p]*m.weight[i] {
				continue
			}
			m.current[i] += m.effective[i]
			total += m.effective[i]
			if m.effective[i] < m.weight[i] {
				m.effective[i]++
			}
			if m.current[i] > m.current[best] {
				best = i
			}
		}
		m.current[best] -= total
	}
	return best
}

func TestLeastConnWorkedExamples(t *testing.T) {
	cases := []struct {
		weights  []int
		inflight []int // set up before the picks
		want     string
	}{
		// b and c tie at 0: smooth among them gives b; then c is alone at
		// 0; then b and c tie at 1 and c's current weight is ahead; then
		// b alone; then all three tie and a, the earliest, wins.
		{[]int{1, 1, 1}, []int{2, 0, 0}, "b c c b a"},
		// 2:1 weights: 0/2 and 0/1 tie (smooth gives a; b keeps current
		// weight 1), then 0/1 < 1/2, then 1/2 < 1/1, then 2/2 and 1/1 tie
		// and b's current weight (1+1) beats a's (-1+2).
		{[]int{2, 1}, []int{0, 0}, "a b a b"},
		// 3/3 and 1/1 tie after b's first pick: smooth among a and b
		// gives a (current weights 3 and 1); later all three tie at 2
		// and a wins; then b and c tie at 2 and b is ahead.
		{[]int{3, 1, 1}, []int{3, 0, 2}, "b a b a a a b"},
	}
	for _, c := range cases {
		b := mustNew(t, Config{Strategy: LeastConn, Backends: hcBackends(c.weights...)})
		for i, n := range c.inflight {
			for k := 0; k < n; k++ {
				b.hold(i)
			}
		}
		var seq []int
		for range strings.Fields(c.want) {
			i := hcPick(t, b)
			b.hold(i) // nginx counts the connection at once
			seq = append(seq, i)
		}
		if got := letters(seq); got != c.want {
			t.Errorf("weights %v in flight %v: %s, want %s", c.weights, c.inflight, got, c.want)
		}
	}
}

// TestLeastConnMatchesNginx drives the strategy and nginx's algorithm with the
// same random starts and ends of requests and compares every choice. Every
// so often all requests end and a run of picks is made at idle (each
// request ending before the next pick), so that the smooth state goes from
// smooth_wrr's table (the quick path) to nginx's exact passes among partial
// ties and back, by the zero state or by a learned orbit.
func TestLeastConnMatchesNginx(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	idlePicks := 0
	for set := 0; set < 40; set++ {
		n := 2 + rng.Intn(7)
		weights := make([]int, n)
		down := make([]bool, n)
		bs := make([]Backend, n)
		for i := range weights {
			weights[i] = 1 + rng.Intn(5)
			down[i] = rng.Intn(6) == 0
			bs[i] = Backend{Address: fmt.Sprintf("10.1.0.%d:80", i+1), Weight: weights[i], Down: down[i]}
		}
		ref := newNginxLC(weights, down)
		b := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		if b.primary.table != tableLeast {
			t.Fatalf("set %d: quick path %d, want %d", set, b.primary.table, tableLeast)
		}
		for step := 0; step < 600; step++ {
			if step%150 == 100 { // everything ends; then 30 picks at idle
				for i := range ref.conns {
					for ; ref.conns[i] > 0; ref.conns[i]-- {
						b.release(i, time.Millisecond, false)
					}
				}
				for k := 0; k < 30; k++ {
					want := ref.pick()
					if got := pickLikeNginx(t, b, want, fmt.Sprintf("set %d (weights %v down %v) step %d idle %d", set, weights, down, step, k)); got >= 0 {
						b.hold(got)
						b.release(got, time.Millisecond, false)
						idlePicks++
					}
				}
			}
			if rng.Intn(3) == 0 { // a request ends somewhere
				i := rng.Intn(n)
				if ref.conns[i] > 0 {
					ref.conns[i]--
					b.release(i, time.Millisecond, false)
				}
				continue
			}
			want := ref.pick()
			got := pickLikeNginx(t, b, want, fmt.Sprintf("set %d (weights %v down %v) step %d", set, weights, down, step))
			if got < 0 {
				continue
			}
			ref.conns[want]++
			b.hold(got)
		}
	}
	if idlePicks == 0 {
		t.Fatal("no pick was made at idle")
	}
}

func TestLeastConnSkipsFullAndRefused(t *testing.T) {
	bs := hcBackends(1, 1, 1)
	bs[0].MaxConns = 1
	b := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
	b.hold(0) // a is full
	b.hold(1)
	b.hold(2)
	b.hold(2)
	// a is the least loaded per weight only if its cap is ignored.
	for k := 0; k < 5; k++ {
		if i := hcPick(t, b); i != 1 {
			t.Fatalf("pick %d: %d, want b (a is full, c has more in flight)", k, i)
		}
	}
	notB := func(i int) bool { return i != 1 }
	if i, err := b.chooseFunc("", notB); err != nil || i != 2 {
		t.Fatalf("refusing b: %d, %v; want c", i, err)
	}
	none := func(int) bool { return false }
	if _, err := b.chooseFunc("", none); err != ErrNoBackend {
		t.Fatalf("all refused: %v", err)
	}
}

func TestLeastConnTwoChoices(t *testing.T) {
	const n = 50
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Address: fmt.Sprintf("10.2.0.%d:80", i+1), Weight: 1}
	}
	bs[7].Down = true
	seed := uint64(1)
	rnd := func() uint64 { // splitmix64: deterministic
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	b := mustNew(t, Config{Strategy: LeastConn, Backends: bs, TwoChoices: true, Rand: rnd})
	// Fill to 2000 in flight, never ending a request: the two-choices
	// bound keeps the most loaded backend close to the mean.
	for k := 0; k < 2000; k++ {
		i := hcPick(t, b)
		if i == 7 {
			t.Fatal("picked a down backend")
		}
		b.hold(i)
	}
	mean, hi := 2000.0/(n-1), int64(0)
	for i := 0; i < n; i++ {
		if c := b.InFlight(i); c > hi {
			hi = c
		}
	}
	// With one choice (random) the maximum would be near mean+3*sqrt(mean)
	// (~62); two choices keep it within mean + O(log log n).
	if float64(hi) > mean+5 {
		t.Fatalf("most loaded backend has %d in flight, mean %.1f", hi, mean)
	}
	// The pair drawn is compared by in-flight per weight: a backend with
	// nothing in flight beats any loaded one it is paired with.
	for k := 0; k < 40; k++ {
		b.release(3, time.Millisecond, false)
	}
	got := 0
	for k := 0; k < 200; k++ {
		if hcPick(t, b) == 3 {
			got++
		}
	}
	// Backend 3 is in the pair with probability 2/50 and then always wins.
	if got < 2 || got > 20 {
		t.Fatalf("emptied backend won %d of 200 picks, want about 8", got)
	}
	if a := testing.AllocsPerRun(200, func() { b.choose("") }); a != 0 {
		t.Fatalf("two-choices pick allocates %v", a)
	}
}

func TestLeastConnAllocs(t *testing.T) {
	b := mustNew(t, Config{Strategy: LeastConn, Backends: hcBackends(1, 2, 3, 1)})
	if a := testing.AllocsPerRun(200, func() { b.choose("") }); a != 0 {
		t.Fatalf("least_conn pick (ties) allocates %v", a)
	}
	b.hold(0)
	b.hold(2)
	if a := testing.AllocsPerRun(200, func() { b.choose("") }); a != 0 {
		t.Fatalf("least_conn pick allocates %v", a)
	}
}

func TestLeastConnConcurrent(t *testing.T) {
	b := mustNew(t, Config{Strategy: LeastConn, Backends: hcBackends(1, 1, 2, 1, 3)})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 2000; k++ {
				i, err := b.choose("")
				if err != nil {
					t.Error(err)
					return
				}
				b.hold(i)
				b.release(i, time.Millisecond, k%50 == 0)
			}
		}()
	}
	wg.Wait()
	for i := 0; i < b.Len(); i++ {
		if c := b.InFlight(i); c != 0 {
			t.Fatalf("backend %d: %d in flight after all ended", i, c)
		}
	}
}

// Loads for the least_conn benchmarks.
const (
	lcIdle     = iota // nothing in flight: every backend ties
	lcLoaded          // 0-9 in flight at random, weights 1-3: a tenth tie at 0
	lcDistinct        // distinct in-flight counts 1-n, weight 1: no tie (the scan alone)
)

// benchLeastConn returns a least_conn balancer over n backends under a load.
func benchLeastConn(b *testing.B, n int, two bool, load int) *Balancer {
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Address: fmt.Sprintf("10.%d.%d.%d:80", i>>16, i>>8&255, i&255), Weight: 1 + i%3}
		if load == lcDistinct {
			bs[i].Weight = 1
		}
	}
	lb := mustNew(b, Config{Strategy: LeastConn, Backends: bs, TwoChoices: two})
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < n; i++ {
		k := 0
		switch load {
		case lcLoaded:
			k = rng.Intn(10)
		case lcDistinct:
			k = (i*7919)%n + 1
		}
		for ; k > 0; k-- {
			lb.hold(i)
		}
	}
	return lb
}

// BenchmarkLeastConn measures least_conn's pick under three loads, and the
// two-choices option, next to a plain O(n) rendering of nginx's algorithm
// (one mutex, flat arrays) under the same load, for ratios from one run:
//
//	go test ./core -run '^$' -bench 'BenchmarkLeastConn$' -count 5
func BenchmarkLeastConn(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("nginx_linear-scan/n=%d", n), func(b *testing.B) {
			lb := benchLeastConn(b, n, false, lcDistinct)
			weights, down := make([]int, n), make([]bool, n)
			for i := range weights {
				weights[i] = lb.Backend(i).Weight
			}
			ref := newNginxLC(weights, down)
			for i := range ref.conns {
				ref.conns[i] = int(lb.InFlight(i))
			}
			var mu sync.Mutex
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				mu.Lock()
				ref.pick()
				mu.Unlock()
			}
		})
	}
	for _, mode := range []struct {
		name string
		two  bool
		load int
	}{{"exact-scan", false, lcDistinct}, {"exact-loaded", false, lcLoaded}, {"exact-idle", false, lcIdle}, {"p2c-loaded", true, lcLoaded}} {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/n=%d", mode.name, n), func(b *testing.B) {
				lb := benchLeastConn(b, n, mode.two, mode.load)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					lb.choose("")
				}
			})
		}
	}
}

func BenchmarkLeastConnParallel(b *testing.B) {
	for _, two := range []bool{false, true} {
		name := "exact"
		if two {
			name = "p2c"
		}
		b.Run(name+"/n=1000", func(b *testing.B) {
			benchRequestsParallel(b, benchLeastConn(b, 1000, two, lcLoaded))
		})
	}
}

// TestLeastConnTwoChoicesIdleShares: with nothing in flight every pair ties,
// and the first candidate wins; candidates are drawn in proportion to weight,
// so idle backends of weights 5,3,2 share 50/30/20, as nginx's least_conn
// shares ties by weight (a uniform draw would give a third each).
func TestLeastConnTwoChoicesIdleShares(t *testing.T) {
	for _, w := range [][]int{{5, 3, 2}, {1, 1, 8, 2}} {
		b := mustNew(t, Config{Strategy: LeastConn, Backends: hcBackends(w...), TwoChoices: true, Rand: seededRandFunc(7)})
		const picks = 40000
		counts := make([]int, len(w))
		for k := 0; k < picks; k++ {
			counts[hcPick(t, b)]++
		}
		// Binomial standard deviation at most 0.0025: 0.012 is about 5 of them.
		for i := range w {
			share, want := float64(counts[i])/picks, float64(w[i])/float64(sumInts(w))
			if share < want-0.012 || share > want+0.012 {
				t.Fatalf("weights %v: backend %d has %.3f of idle picks, want %.3f +- 0.012", w, i, share, want)
			}
		}
	}
}
