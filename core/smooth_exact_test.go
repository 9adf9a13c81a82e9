package core

import (
	"math/rand"
	"sync"
	"testing"
	"time"
)

// nginxEffective is nginxSmooth with nginx's effective weights: a failure
// lowers a peer's effective weight by weight/max_fails (not below 0), and
// every pass that sees the peer lets it climb back by one.
type nginxEffective struct {
	*nginxSmooth
	effective []int
}

func newNginxEffective(weights []int, down []bool) *nginxEffective {
	e := &nginxEffective{nginxSmooth: newNginxSmooth(weights, down), effective: append([]int(nil), weights...)}
	return e
}

func (s *nginxEffective) fail(i, maxFails int) {
	s.effective[i] -= s.weight[i] / maxFails
	if s.effective[i] < 0 {
		s.effective[i] = 0
	}
}

func (s *nginxEffective) pick(ok func(int) bool) int {
	best, total := -1, 0
	for i := range s.weight {
		if s.down[i] || (ok != nil && !ok(i)) {
			continue
		}
		s.current[i] += s.effective[i]
		total += s.effective[i]
		if s.effective[i] < s.weight[i] {
			s.effective[i]++
		}
		if best < 0 || s.current[i] > s.current[best] {
			best = i
		}
	}
	if best >= 0 {
		s.current[best] -= total
	}
	return best
}

// skipScenario drives one balancer and the nginx reference through the same
// picks: quiet stretches (every backend available) alternating with stretches
// where the caller refuses random backends at random steps, backends with
// max_conns fill up as requests are held, and backends fail.
type skipScenario struct {
	weights  []int
	down     []bool
	maxConns []int
	maxFails []int
}

func drawSkipScenario(rng *rand.Rand) skipScenario {
	n := 2 + rng.Intn(7)
	sc := skipScenario{
		weights:  drawWeights(rng, n, 12),
		down:     make([]bool, n),
		maxConns: make([]int, n),
		maxFails: make([]int, n),
	}
	if rng.Intn(2) == 0 {
		// A common gcd: the table is shorter than nginx's W.
		k := 2 + rng.Intn(3)
		for i := range sc.weights {
			sc.weights[i] *= k
		}
	}
	for i := 0; i < n; i++ {
		switch rng.Intn(6) {
		case 0:
			sc.down[i] = true
		case 1, 2:
			sc.maxConns[i] = 1 + rng.Intn(2)
		case 3:
			sc.maxFails[i] = 2 + rng.Intn(3)
		}
	}
	sc.down[rng.Intn(n)] = false
	return sc
}

func (sc skipScenario) backends() []Backend {
	bs := testBackends(sc.weights, sc.down)
	for i := range bs {
		bs[i].MaxConns = sc.maxConns[i]
		bs[i].MaxFails = sc.maxFails[i]
		bs[i].FailTimeout = time.Hour
	}
	return bs
}

// TestSmoothWRRSkipsMatchNginx compares smooth_wrr with nginx's pass, pick for
// pick, over thousands of picks with random skips (half of the balancers
// staggered), and checks that the
// schedule went back to a table (canonical or learned) between the
// disturbances, so that the lock-free path is what runs when nothing skips.
func TestSmoothWRRSkipsMatchNginx(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	learned, canonical := 0, 0
	for set := 0; set < 60; set++ {
		sc := drawSkipScenario(rng)
		clock := time.Unix(1000, 0)
		cfg := Config{Strategy: SmoothWRR, Backends: sc.backends(), Now: func() time.Time { return clock }}
		if set%2 == 1 {
			cfg.Stagger, cfg.Rand = true, seededRandFunc(int64(set))
		}
		b := mustNew(t, cfg)
		s := b.primary.strategy.(*smoothWRR)
		ref := newNginxEffective(sc.weights, sc.down)
		// A staggered balancer starts where nginx would be after start picks.
		for k := 0; k < s.cur.start; k++ {
			ref.pick(nil)
		}
		n := len(sc.weights)
		inflight := make([]int, n)
		fails := make([]int, n)
		var held []int
		period := sumInts(sc.weights) / gcdAll(sc.weights)
		quiet := true
		var refused []bool
		for step := 0; step < 4000; step++ {
			if rng.Intn(3*period+1) == 0 {
				quiet = !quiet
			}
			var avail func(int) bool
			if !quiet && rng.Intn(3) == 0 {
				refused = make([]bool, n)
				for i := range refused {
					refused[i] = rng.Intn(4) == 0
				}
				avail = func(i int) bool { return !refused[i] }
			}
			ok := func(i int) bool {
				if sc.maxConns[i] > 0 && inflight[i] >= sc.maxConns[i] {
					return false
				}
				return avail == nil || avail(i)
			}
			want := ref.pick(ok)
			got, err := b.chooseFunc("", avail)
			if want < 0 {
				if err != ErrNoBackend {
					t.Fatalf("set %d %+v step %d: got %d, %v; nginx has no peer", set, sc, step, got, err)
				}
				continue
			}
			if got != want {
				t.Fatalf("set %d %+v step %d: got %d, nginx %d", set, sc, step, got, want)
			}
			if s.sched.mode() == 2 {
				learned++
			}
			if s.sched.mode() == 1 && step > 0 {
				canonical++
			}
			// Hold some requests (max_conns fills up), release others, and
			// fail now and then (never max_fails times: the backend stays
			// eligible, its effective weight drops and climbs back).
			b.hold(got)
			inflight[got]++
			if !quiet && rng.Intn(3) == 0 {
				held = append(held, got)
			} else {
				failed := !quiet && sc.maxFails[got] > 0 && fails[got] < sc.maxFails[got]-1 && rng.Intn(4) == 0
				if failed {
					fails[got]++
					ref.fail(got, sc.maxFails[got])
				}
				b.release(got, time.Millisecond, failed)
				inflight[got]--
			}
			for len(held) > 0 && (quiet || rng.Intn(2) == 0) {
				k := rng.Intn(len(held))
				p := held[k]
				held = append(held[:k], held[k+1:]...)
				b.release(p, time.Millisecond, false)
				inflight[p]--
			}
			clock = clock.Add(time.Millisecond)
		}
	}
	t.Logf("picks served from a learned table: %d, from the canonical one: %d", learned, canonical)
	if learned == 0 || canonical == 0 {
		t.Fatalf("the schedule never went back to a learned (%d) or the canonical (%d) table", learned, canonical)
	}
}

// TestSmoothWRRLearnsOrbit: after a disturbance nginx's state runs through a
// new orbit of one period; the schedule records it and serves it from a
// table again, nginx's sequence unchanged.
func TestSmoothWRRLearnsOrbit(t *testing.T) {
	w := []int{5, 3, 2}
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
	s := b.primary.strategy.(*smoothWRR)
	ref := newNginxSmooth(w, nil)
	notA := func(i int) bool { return i != 0 }
	for i := 0; i < 3; i++ {
		want := ref.pick(notA)
		if got, _ := b.chooseFunc("", notA); got != want {
			t.Fatalf("refused a, pick %d: %d, nginx %d", i, got, want)
		}
	}
	if s.sched.mode() != 0 {
		t.Fatalf("mode %d after a refusal, want exact", s.sched.mode())
	}
	back := -1
	for i := 0; i < 60; i++ {
		want := ref.pick(nil)
		if got, _ := b.choose(""); got != want {
			t.Fatalf("pick %d after the refusals: %d, nginx %d", i, got, want)
		}
		if back < 0 && s.sched.mode() != 0 {
			back = i + 1
		}
	}
	// A transient shorter than a period, then one period recorded.
	if back < 0 || back > 2*sumInts(w) {
		t.Fatalf("back in table mode after %d picks, want at most %d", back, 2*sumInts(w))
	}
	if a := testing.AllocsPerRun(100, func() { b.choose("") }); a != 0 {
		t.Fatalf("table pick allocates %v", a)
	}
}

// TestSmoothWRRSlowStartMatchesNginx: a backend added by Update ramps; its
// weight is lowered while it does (nginx plus's slow start reduces the weight
// a pass adds), and the schedule returns to a table once the ramp is over.
func TestSmoothWRRSlowStartMatchesNginx(t *testing.T) {
	clock := time.Unix(1000, 0)
	bs := testBackends([]int{5, 3}, nil)
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs, Now: func() time.Time { return clock }})
	bs = append(bs, Backend{Address: testAddr(2), Weight: 20, SlowStart: 10 * time.Second})
	b, err := b.Update(bs)
	if err != nil {
		t.Fatal(err)
	}
	s := b.primary.strategy.(*smoothWRR)
	// The reference counts in thousandths of a weight, as the ramp does.
	ref := newNginxSmooth([]int{5000, 3000, 20000}, nil)
	for i := 0; i < 400; i++ {
		// The reference takes the ramp's weight of the moment.
		el := clock.Sub(time.Unix(1000, 0))
		ref.weight[2] = 20000
		if el < 10*time.Second {
			ref.weight[2] = int(float64(20000) * (0.1 + 0.9*float64(el)/float64(10*time.Second)))
		}
		want := ref.pick(nil)
		if got, _ := b.choose(""); got != want {
			t.Fatalf("pick %d at %v: %d, nginx %d", i, el, got, want)
		}
		clock = clock.Add(50 * time.Millisecond)
	}
	if s.sched.mode() == 0 {
		t.Fatal("still in exact mode 10s after the ramp ended")
	}
}

// TestSmoothWRRConcurrentSkips: picks from many goroutines while backends
// are refused at random, fill up and drain: every pick is eligible, nothing
// races (run with -race), and once the disturbance ends whole periods are
// exact again.
func TestSmoothWRRConcurrentSkips(t *testing.T) {
	w := []int{7, 5, 3, 2, 1}
	bs := testBackends(w, nil)
	bs[1].MaxConns = 2
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for gr := 0; gr < 8; gr++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < 3000; i++ {
				x := rng.Intn(len(w) + 2)
				avail := func(i int) bool { return i != x }
				p, err := b.chooseFunc("", avail)
				if err != nil || p == x {
					errs <- "bad pick"
					return
				}
				b.hold(p)
				b.release(p, 0, false)
			}
		}(int64(gr))
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	// Quiet again: within two periods the schedule is on a table, and from
	// then on every period gives exact shares.
	pickN(t, b, 2*sumInts(w))
	if b.primary.strategy.(*smoothWRR).sched.mode() == 0 {
		t.Fatal("not back on a table")
	}
	counts := make([]int, len(w))
	for _, p := range pickN(t, b, 3*sumInts(w)) {
		counts[p]++
	}
	for i := range w {
		if counts[i] != 3*w[i] {
			t.Fatalf("counts %v over 3 periods of %v", counts, w)
		}
	}
}

// BenchmarkSmoothWRRFilter measures smooth_wrr at n=1000 with a caller's
// filter: one that accepts every backend (the table still serves, after
// asking the filter about every backend: nginx's state depends on all of
// them), one that refuses a backend (the schedule learnt over the others,
// after asking about every backend; nginx's exact pass until it is learnt),
// the same filter versioned (PickVersion: the learnt schedule, asking about
// the chosen backend only), next to the O(n) peer and the plain Pick:
//
//	go test ./core -run '^$' -bench BenchmarkSmoothWRRFilter
func BenchmarkSmoothWRRFilter(b *testing.B) {
	const n = 1000
	w := benchWeights(n)
	all := func(int) bool { return true }
	notFirst := func(i int) bool { return i != 0 }
	peer := newNginxSmooth(w, nil)
	b.Run("nginx_linear", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			peer.pick(nil)
		}
	})
	for _, c := range []struct {
		name  string
		avail func(int) bool
	}{{"pick", nil}, {"filter_all", all}, {"filter_refusing", notFirst}} {
		bal := mustNew(b, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
		avail := c.avail
		b.Run(c.name, func(b *testing.B) {
			// Past the learning: three periods.
			for i := 0; i < 3*sumInts(w); i++ {
				bal.chooseFunc("", avail)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bal.chooseFunc("", avail)
			}
		})
	}
	bal := mustNew(b, Config{Strategy: SmoothWRR, Backends: testBackends(w, nil)})
	b.Run("versioned_refusing", func(b *testing.B) {
		for i := 0; i < 3*sumInts(w); i++ {
			bal.chooseVersion("", notFirst, 1)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			bal.chooseVersion("", notFirst, 1)
		}
	})
}
