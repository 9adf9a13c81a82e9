package core

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"
)

// nginxSmooth is the benchmark peer and the tests' reference: nginx's smooth
// weighted round robin written the straightforward way, one O(n) loop under
// one mutex (ngx_http_upstream_get_peer without failure accounting).
type nginxSmooth struct {
	mu      sync.Mutex
	weight  []int
	current []int
	down    []bool
}

func newNginxSmooth(weights []int, down []bool) *nginxSmooth {
	if down == nil {
		down = make([]bool, len(weights))
	}
	return &nginxSmooth{weight: weights, current: make([]int, len(weights)), down: down}
}

// pick returns nginx's choice among the peers that are not down and that ok
// accepts (nil accepts all), or -1.
func (s *nginxSmooth) pick(ok func(int) bool) int {
	s.mu.Lock()
	best, total := -1, 0
	for i, w := range s.weight {
		if s.down[i] || (ok != nil && !ok(i)) {
			continue
		}
		s.current[i] += w
		total += w
		if best < 0 || s.current[i] > s.current[best] {
			best = i
		}
	}
	if best >= 0 {
		s.current[best] -= total
	}
	s.mu.Unlock()
	return best
}

// lvsWRR is the tests' reference for gcd_wrr: ip_vs_wrr's scheduler as the
// kernel writes it, with gcd and maximum over the servers of positive weight
// and weight 0 standing for a down server; ok (nil accepts all) marks servers
// unavailable, which the scheduler passes over.
type lvsWRR struct {
	weight      []int
	i, cw, g, m int
}

func newLVSWRR(weights []int, down []bool) *lvsWRR {
	s := &lvsWRR{i: -1}
	for k, w := range weights {
		if down != nil && down[k] {
			w = 0
		}
		s.weight = append(s.weight, w)
		if w > 0 {
			s.g = int(gcd(int64(s.g), int64(w)))
		}
		if w > s.m {
			s.m = w
		}
	}
	return s
}

func (s *lvsWRR) pick(ok func(int) bool) int {
	if s.m == 0 {
		return -1
	}
	// A bounded number of steps: every server is looked at m/g times per period.
	for step := 0; step <= len(s.weight)*(s.m/s.g+1); step++ {
		s.i = (s.i + 1) % len(s.weight)
		if s.i == 0 {
			s.cw -= s.g
			if s.cw <= 0 {
				s.cw = s.m
			}
		}
		if s.weight[s.i] >= s.cw && s.weight[s.i] > 0 && (ok == nil || ok(s.i)) {
			return s.i
		}
	}
	return -1
}

// drawWeights returns n weights from 1 to max drawn from rng.
func drawWeights(rng *rand.Rand, n, max int) []int {
	w := make([]int, n)
	for i := range w {
		w[i] = 1 + rng.Intn(max)
	}
	return w
}

// testBackends makes backends 10.0.0.x:80 with the given weights; down (may be
// nil) marks the down ones.
func testBackends(weights []int, down []bool) []Backend {
	bs := make([]Backend, len(weights))
	for i, w := range weights {
		bs[i] = Backend{Address: testAddr(i), Weight: w}
		if down != nil {
			bs[i].Down = down[i]
		}
	}
	return bs
}

func testAddr(i int) string {
	return "10." + decimal(i/65536) + "." + decimal(i/256%256) + "." + decimal(i%256) + ":80"
}

func decimal(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return decimal(i/10) + digits[i%10:i%10+1]
}

// picks returns the next n picks of b (all backends available) or fails.
func pickN(t interface {
	Helper()
	Fatalf(string, ...any)
}, b *Balancer, n int) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		p, err := b.choose("")
		if err != nil {
			t.Fatalf("pick %d: %v", i, err)
		}
		out[i] = p
	}
	return out
}

// seededRandFunc returns a deterministic Config.Rand.
func seededRandFunc(seed int64) func() uint64 {
	rng := rand.New(rand.NewSource(seed))
	var mu sync.Mutex
	return func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Uint64()
	}
}

// benchSizes and benchWeights give every benchmark the same backends:
// weights 1..10 drawn with a fixed seed, a realistic period (about 5.5 n).
var benchSizes = []int{10, 100, 1000}

func benchWeights(n int) []int {
	return drawWeights(rand.New(rand.NewSource(int64(n))), n, 10)
}

// BenchmarkStatic measures a pick of every strategy of this set and of the
// O(n) peer side by side for each n, one goroutine and parallel, so that
// ratios come from one run under one load:
//
//	go test ./core -run '^$' -bench BenchmarkStatic -count 5
func BenchmarkStatic(b *testing.B) {
	for _, n := range benchSizes {
		w := benchWeights(n)
		peer := newNginxSmooth(w, nil)
		b.Run(fmt.Sprintf("n=%d/nginx_linear", n), func(b *testing.B) {
			benchPick(b, func() { peer.pick(nil) })
		})
		for _, s := range []string{SmoothWRR, GCDWRR, RoundRobin, Random, WeightedRandom} {
			bal := mustNew(b, Config{Strategy: s, Backends: testBackends(w, nil)})
			b.Run(fmt.Sprintf("n=%d/%s", n, s), func(b *testing.B) {
				benchPick(b, func() { bal.choose("") })
			})
		}
	}
}

// benchPick runs pick b.N times, then again from b.RunParallel.
func benchPick(b *testing.B, pick func()) {
	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			pick()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				pick()
			}
		})
	})
}
