package core

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// nginxRR is nginx's smooth round robin with its passive health accounting
// (ngx_http_upstream_get_peer and ngx_http_upstream_free_round_robin_peer)
// over plain fields, with nginx's clock in whole seconds.
type nginxRR struct {
	weight, current, effective, fails, maxFails []int
	accessed, checked                           []int64
	failTimeout                                 int64
}

func newNginxRR(weights []int, maxFails []int, failTimeout int64) *nginxRR {
	n := len(weights)
	m := &nginxRR{weight: weights, maxFails: maxFails, failTimeout: failTimeout,
		current: make([]int, n), effective: make([]int, n), fails: make([]int, n),
		accessed: make([]int64, n), checked: make([]int64, n)}
	copy(m.effective, weights)
	return m
}

func (m *nginxRR) get(now int64) int {
	best, total := -1, 0
	for i := range m.weight {
		if m.maxFails[i] > 0 && m.fails[i] >= m.maxFails[i] && now-m.checked[i] <= m.failTimeout {
			continue
		}
		m.current[i] += m.effective[i]
		total += m.effective[i]
		if m.effective[i] < m.weight[i] {
			m.effective[i]++
		}
		if best < 0 || m.current[i] > m.current[best] {
			best = i
		}
	}
	if best < 0 {
		return -1
	}
	m.current[best] -= total
	if now-m.checked[best] > m.failTimeout {
		m.checked[best] = now
	}
	return best
}

func (m *nginxRR) free(i int, failed bool, now int64) {
	if failed {
		m.fails[i]++
		m.accessed[i], m.checked[i] = now, now
		if m.maxFails[i] > 0 {
			m.effective[i] -= m.weight[i] / m.maxFails[i]
		}
		if m.effective[i] < 0 {
			m.effective[i] = 0
		}
	} else if m.accessed[i] < m.checked[i] {
		m.fails[i] = 0
	}
}

// TestPassiveHealthMatchesNginx runs random timelines of picks, failures and
// clock steps (whole seconds, as nginx's clock) through least_conn with every
// request ending before the next pick (so every pick is a tie among all
// eligible backends: nginx's smooth pass) and through nginx's algorithm, and
// compares every choice: skipping, probes, recovery of fails and of effective
// weights.
func TestPassiveHealthMatchesNginx(t *testing.T) {
	// Even backends are flaky: they fail 1 in failRate+1 requests at worst.
	flaky := func(rng *rand.Rand) func(step, got int) bool {
		failRate := 1 + rng.Intn(4)
		return func(step, got int) bool { return rng.Intn(failRate+1) == 0 && got%2 == 0 }
	}
	playFailureTimelines(t, LeastConn, 7, 3, flaky, nil)
}

func TestEffectiveWeightRecovery(t *testing.T) {
	bs := hcBackends(4, 4)
	bs[1].MaxFails = 2
	clock := newHCClock()
	b := mustNew(t, Config{Strategy: LeastConn, Backends: bs, Now: clock.now})
	g := b.primary
	if !isSteady(g) {
		t.Fatal("unsteady before any failure")
	}
	b.hold(1)
	b.release(1, time.Millisecond, true) // effective weight of b: 4 - 4/2 = 2
	var seq []int
	var steady []bool
	for k := 0; k < 7; k++ {
		seq = append(seq, hcPick(t, b))
		steady = append(steady, isSteady(g))
	}
	// Passes (current weights after adding): a 4, b 2 -> a (total 6, b's
	// effective weight climbs to 3); a 2, b 5 -> b (total 7, b's effective
	// weight is 4 again); a 6, b 2 -> a; a 2, b 6 -> b; and so on.
	if got := letters(seq); got != "a b a b a b a" {
		t.Fatalf("after a failure: %s", got)
	}
	if want := []bool{false, true, true, true, true, true, true}; fmt.Sprint(steady) != fmt.Sprint(want) {
		t.Fatalf("steady after each pass: %v, want %v", steady, want)
	}
	// max_fails 2 reached: b is out and its effective weight is 0.
	b.release(1, time.Millisecond, true)
	b.release(1, time.Millisecond, true)
	if isSteady(g) {
		t.Fatal("steady with b's effective weight at 0")
	}
	if got := g.smooth.effective[1]; got != 0 {
		t.Fatalf("effective weight after two more failures: %d", got)
	}
}

// TestPassiveHealthTimeline checks the failure timeline on every strategy
// that is not hashed: fail, skipped for fail_timeout, one probe, recovered
// after the probe succeeds, and skipped again after a failed probe.
func TestPassiveHealthTimeline(t *testing.T) {
	for _, name := range Strategies() {
		if strategies[name].hashed {
			continue
		}
		t.Run(name, func(t *testing.T) {
			bs := hcBackends(1, 1, 1)
			for i := range bs {
				bs[i].MaxFails = 1
				bs[i].FailTimeout = 10 * time.Second
			}
			clock := newHCClock()
			rng := rand.New(rand.NewSource(11))
			b := mustNew(t, Config{Strategy: name, Backends: bs, Now: clock.now, Rand: rng.Uint64})
			// serve makes k requests that succeed and counts picks per backend.
			serve := func(k int) [3]int {
				var c [3]int
				for ; k > 0; k-- {
					i := hcPick(t, b)
					c[i]++
					b.hold(i)
					b.release(i, time.Millisecond, false)
				}
				return c
			}
			b.hold(1)
			b.release(1, time.Millisecond, true) // b fails at t0
			for _, d := range []time.Duration{0, time.Second, 8 * time.Second} {
				clock.add(d)
				if c := serve(30); c[1] != 0 {
					t.Fatalf("b picked %d times within fail_timeout", c[1])
				}
			}
			clock.add(time.Second) // exactly fail_timeout: still out
			if c := serve(30); c[1] != 0 {
				t.Fatalf("b picked %d times at fail_timeout", c[1])
			}
			clock.add(time.Millisecond)
			// One probe, held open: no second request until it answers.
			probe := -1
			for k := 0; k < 60 && probe != 1; k++ {
				probe = hcPick(t, b)
				b.hold(probe)
				if probe != 1 {
					b.release(probe, time.Millisecond, false)
				}
			}
			if probe != 1 {
				t.Fatal("no probe to b within 60 picks after fail_timeout")
			}
			if c := serve(30); c[1] != 0 {
				t.Fatalf("b picked %d more times while its probe is out", c[1])
			}
			b.release(1, time.Millisecond, false) // the probe succeeds
			want := 5
			if name == Fair {
				want = 1 // its failure penalty, halved by the probe's success, lingers
			}
			if c := serve(30); c[1] < want {
				t.Fatalf("b recovered but picked %d of 30", c[1])
			}
			// A failed probe puts it out for another fail_timeout.
			b.hold(1)
			b.release(1, time.Millisecond, true)
			clock.add(11 * time.Second)
			probe = -1
			for k := 0; k < 60 && probe != 1; k++ {
				probe = hcPick(t, b)
				b.hold(probe)
				b.release(probe, time.Millisecond, probe == 1)
			}
			if probe != 1 {
				t.Fatal("no second probe")
			}
			clock.add(10 * time.Second)
			if c := serve(30); c[1] != 0 {
				t.Fatalf("b picked %d times after a failed probe", c[1])
			}
		})
	}
}

func TestBackupOnlyWhenNoPrimary(t *testing.T) {
	for _, name := range []string{LeastConn, Fair, SmoothWRR} {
		if _, ok := strategies[name]; !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			bs := hcBackends(1, 1, 1, 1)
			bs[0].MaxConns = 1
			bs[1].MaxFails = 1
			bs[2].Backup, bs[3].Backup = true, true
			clock := newHCClock()
			b := mustNew(t, Config{Strategy: name, Backends: bs, Now: clock.now, Rand: rand.New(rand.NewSource(1)).Uint64})
			for k := 0; k < 40; k++ {
				i := hcPick(t, b)
				if i >= 2 {
					t.Fatalf("pick %d: backup %d while primaries are available", k, i)
				}
				b.hold(i)
				b.release(i, time.Millisecond, false)
			}
			b.hold(0) // a is full
			if i := hcPick(t, b); i != 1 {
				t.Fatalf("a full: %d, want b", i)
			}
			b.hold(1)
			b.release(1, time.Millisecond, true) // b failed: no primary left
			seen := map[int]int{}
			for k := 0; k < 20; k++ {
				i := hcPick(t, b)
				seen[i]++
				b.hold(i)
				b.release(i, time.Millisecond, false)
			}
			if seen[0]+seen[1] != 0 || seen[2] == 0 || seen[3] == 0 {
				t.Fatalf("no primary available: picks %v, want both backups only", seen)
			}
			b.release(0, time.Millisecond, false) // a has room again
			if i := hcPick(t, b); i != 0 {
				t.Fatalf("a free again: %d, want a", i)
			}
		})
	}
}

func TestSingleBackendNoFailureAccounting(t *testing.T) {
	bs := hcBackends(1)
	bs[0].MaxFails = 1
	b := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
	for k := 0; k < 3; k++ {
		b.hold(0)
		b.release(0, time.Millisecond, true)
		if i, err := b.choose(""); err != nil || i != 0 {
			t.Fatalf("single backend after a failure: %d, %v (nginx keeps using it)", i, err)
		}
	}
	// With a backup it is no longer single: failures count.
	bs = append(bs, Backend{Address: "10.0.0.9:80", Weight: 1, Backup: true})
	b = mustNew(t, Config{Strategy: LeastConn, Backends: bs})
	b.hold(0)
	b.release(0, time.Millisecond, true)
	if i, err := b.choose(""); err != nil || i != 1 {
		t.Fatalf("failed primary with a backup: %d, %v; want the backup", i, err)
	}
}

// TestNoClockWhenHealthy: with failure accounting and slow start configured
// but nothing failing or ramping, picks and reports read no clock.
func TestNoClockWhenHealthy(t *testing.T) {
	for _, name := range Strategies() {
		if name == Fair { // fair measures latency: it needs the time
			continue
		}
		t.Run(name, func(t *testing.T) {
			bs := hcBackends(3, 2, 1)
			for i := range bs {
				bs[i].MaxFails = 2
				if !strategies[name].hashed { // the hash strategies refuse it
					bs[i].SlowStart = time.Minute
				}
				bs[i].MaxConns = 100
			}
			clock := newHCClock()
			b := mustNew(t, Config{Strategy: name, Backends: bs, Now: clock.now})
			run := func() {
				for k := 0; k < 200; k++ {
					i, err := b.choose(fmt.Sprintf("10.9.%d.1", k))
					if err != nil {
						t.Fatal(err)
					}
					b.hold(i)
					b.release(i, time.Millisecond, false)
				}
			}
			run()
			if n := clock.count(); n != 0 {
				t.Fatalf("%d clock reads with nothing failing or ramping", n)
			}
			// A failure reads the clock, and so do the picks while the
			// member has failures; once it is back (a success after a
			// pick beyond fail_timeout), the picks stop reading it.
			b.hold(0)
			b.release(0, time.Millisecond, true)
			if clock.count() == 0 {
				t.Fatal("a failure did not read the clock")
			}
			clock.add(11 * time.Second)
			run()
			if b.members[0].state.fails.Load() != 0 {
				t.Fatal("a never recovered")
			}
			before := clock.count()
			run()
			if n := clock.count() - before; n != 0 {
				t.Fatalf("%d clock reads after recovery", n)
			}
		})
	}
}

func TestUpdateKeepsState(t *testing.T) {
	bs := hcBackends(1, 1, 1)
	for i := range bs {
		bs[i].MaxFails = 1
		bs[i].SlowStart = 10 * time.Second
	}
	clock := newHCClock()
	b := mustNew(t, Config{Strategy: LeastConn, Backends: bs, Now: clock.now})
	b.hold(1)
	b.hold(1) // b: 2 in flight
	b.hold(2)
	b.release(2, time.Millisecond, true) // c failed
	// c's effective weight is 1 - 1/1 = 0: the group is unsteady.
	if isSteady(b.primary) {
		t.Fatal("steady after c's failure")
	}
	d := Backend{Address: "10.0.0.9:80", Weight: 1, MaxFails: 1, SlowStart: 10 * time.Second}
	nb, err := b.Update([]Backend{bs[2], bs[1], d}) // a goes, order changes, d arrives
	if err != nil {
		t.Fatal(err)
	}
	if nb.Index(bs[1].Address) != 1 || nb.InFlight(1) != 2 {
		t.Fatalf("b kept %d in flight", nb.InFlight(1))
	}
	// c is still out, with its penalty; d is new and ramps.
	if got := nb.primary.unsteady(); got != 2 {
		t.Fatalf("unsteady after Update: %d, want 2 (c's penalty, d's ramp)", got)
	}
	for k := 0; k < 5; k++ {
		if i := hcPick(t, nb); i != 2 {
			t.Fatalf("pick %d: %d, want d (c failed, b busy)", k, i)
		}
	}
	// A request started on the old balancer ends there: the new one sees it.
	b.release(1, time.Millisecond, false)
	if nb.InFlight(1) != 1 {
		t.Fatalf("b in flight after Done on the old balancer: %d", nb.InFlight(1))
	}
	// d's ramp ends after its slow start.
	clock.add(10 * time.Second)
	r := request{b: nb}
	if w := r.weight(nb.members[2]); w != 1 || nb.members[2].ramping.Load() != 0 {
		t.Fatalf("d after slow start: weight %d, ramping %d", w, nb.members[2].ramping.Load())
	}
	if _, err := b.Update([]Backend{bs[0], bs[0]}); err == nil {
		t.Fatal("Update accepted a duplicate address")
	}
}

func BenchmarkUpdate(b *testing.B) {
	const n = 1000
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Address: fmt.Sprintf("10.%d.%d.%d:80", i>>16, i>>8&255, i&255), Weight: 1 + i%5, MaxFails: 1}
	}
	for _, name := range []string{LeastConn, Fair, SmoothWRR, RoundRobin} {
		if _, ok := strategies[name]; !ok {
			continue
		}
		b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
			lb := mustNew(b, Config{Strategy: name, Backends: bs})
			// One backend leaves and another arrives at every rebuild.
			other := append([]Backend(nil), bs...)
			other[n/2].Address = "10.250.0.1:80"
			lists := [2][]Backend{other, bs}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				nb, err := lb.Update(lists[i%2])
				if err != nil {
					b.Fatal(err)
				}
				lb = nb
			}
		})
	}
}
