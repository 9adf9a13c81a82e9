package core

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

func TestNewRejects(t *testing.T) {
	ok := func() []Backend { return testBackends([]int{1, 2}, nil) }
	with := func(f func(bs []Backend)) []Backend {
		bs := ok()
		f(bs)
		return bs
	}
	tests := []struct {
		name string
		cfg  Config
		want string // the error must contain this: field and value
	}{
		{"weight 0", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[1].Weight = 0 })}, `backends[1].weight 0:`},
		{"weight -1", Config{Strategy: RoundRobin, Backends: with(func(bs []Backend) { bs[0].Weight = -1 })}, `backends[0].weight -1:`},
		{"weight above MaxWeight", Config{Strategy: GCDWRR, Backends: with(func(bs []Backend) { bs[1].Weight = MaxWeight + 1 })}, `backends[1].weight 1000001:`},
		{"unknown strategy", Config{Strategy: "weighted_round_robin", Backends: ok()}, `strategy "weighted_round_robin": unknown`},
		{"empty strategy", Config{Backends: ok()}, `strategy "": unknown`},
		{"empty list", Config{Strategy: SmoothWRR}, `backends: empty list`},
		{"duplicate", Config{Strategy: Random, Backends: with(func(bs []Backend) { bs[1].Address = bs[0].Address })}, `backends[1].address "10.0.0.0:80": duplicate of backends[0]`},
		{"no port", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[1].Address = "10.0.0.9" })}, `backends[1].address "10.0.0.9":`},
		{"empty host", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[1].Address = ":80" })}, `backends[1].address ":80": empty host`},
		{"port 0", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[0].Address = "a:0" })}, `backends[0].address "a:0": invalid port "0"`},
		{"port 65536", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[0].Address = "a:65536" })}, `backends[0].address "a:65536": invalid port`},
		{"port name", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[0].Address = "a:http" })}, `backends[0].address "a:http": invalid port`},
		{"space in host", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[0].Address = "a b:80" })}, `backends[0].address "a b:80": invalid host`},
		{"bare IPv6", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[0].Address = "::1:80" })}, `backends[0].address "::1:80":`},
		{"max_conns", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[1].MaxConns = -2 })}, `backends[1].max_conns -2:`},
		{"max_fails", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[1].MaxFails = -1 })}, `backends[1].max_fails -1:`},
		{"fail_timeout", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[1].FailTimeout = -time.Second })}, `backends[1].fail_timeout -1s:`},
		{"slow_start", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[0].SlowStart = -time.Second })}, `backends[0].slow_start -1s:`},
		{"backup with ip_hash", Config{Strategy: IPHash, Backends: with(func(bs []Backend) { bs[1].Backup = true })}, `backends[1].backup: strategy "ip_hash"`},
		{"backup with url_hash", Config{Strategy: URLHash, Backends: with(func(bs []Backend) { bs[1].Backup = true })}, `backends[1].backup: strategy "url_hash"`},
		{"slow_start with ip_hash", Config{Strategy: IPHash, Backends: with(func(bs []Backend) { bs[1].SlowStart = 10 * time.Second })}, `backends[1].slow_start 10s: strategy "ip_hash"`},
		{"slow_start with url_hash", Config{Strategy: URLHash, Backends: with(func(bs []Backend) { bs[0].SlowStart = time.Second })}, `backends[0].slow_start 1s: strategy "url_hash"`},
		{"slow_start with url_hash modulo", Config{Strategy: URLHash, HashMode: HashModulo, Backends: with(func(bs []Backend) { bs[1].SlowStart = time.Second })}, `backends[1].slow_start 1s: strategy "url_hash"`},
		{"slow_start with url_hash maglev", Config{Strategy: URLHash, HashMode: HashMaglev, Backends: with(func(bs []Backend) { bs[1].SlowStart = time.Second })}, `backends[1].slow_start 1s: strategy "url_hash"`},
		{"slow_start with url_hash bounded", Config{Strategy: URLHash, HashMode: HashBounded, Backends: with(func(bs []Backend) { bs[1].SlowStart = time.Second })}, `backends[1].slow_start 1s: strategy "url_hash"`},
		{"only backups", Config{Strategy: SmoothWRR, Backends: with(func(bs []Backend) { bs[0].Backup, bs[1].Backup = true, true })}, `every backend is a backup`},
		{"hash_mode on smooth_wrr", Config{Strategy: SmoothWRR, Backends: ok(), HashMode: HashMaglev}, `hash_mode "maglev": only url_hash`},
		{"load_factor on ketama", Config{Strategy: URLHash, Backends: ok(), LoadFactor: 1.5}, `load_factor 1.5:`},
		{"stagger on round_robin", Config{Strategy: RoundRobin, Backends: ok(), Stagger: true}, `stagger: only smooth_wrr and gcd_wrr can stagger, not "round_robin"`},
		{"two_choices on random", Config{Strategy: Random, Backends: ok(), TwoChoices: true}, `two_choices: only least_conn has it, not "random"`},
		{"decay_time on gcd_wrr", Config{Strategy: GCDWRR, Backends: ok(), DecayTime: time.Second}, `decay_time 1s: only fair`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, %v; want an error containing %q", b, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "lbpack: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
			// Update validates backends the same way; a strategy and
			// options are fixed at New, so those rows end here.
			if _, known := strategies[tt.cfg.Strategy]; !known || tt.cfg.HashMode != "" || tt.cfg.LoadFactor != 0 || tt.cfg.Stagger || tt.cfg.TwoChoices || tt.cfg.DecayTime != 0 {
				return
			}
			good := mustNew(t, Config{Strategy: tt.cfg.Strategy, Backends: ok()})
			if _, err := good.Update(tt.cfg.Backends); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Update: %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewAccepts(t *testing.T) {
	addrs := []string{"10.0.0.1:80", "example.com:8080", "[::1]:443", "[2001:db8::1]:65535", "localhost:1"}
	for _, s := range []string{SmoothWRR, GCDWRR, RoundRobin, Random, WeightedRandom} {
		var bs []Backend
		for i, a := range addrs {
			bs = append(bs, Backend{Address: a, Weight: i + 1, MaxConns: i, MaxFails: 1, SlowStart: time.Second})
		}
		bs[4].Backup = true
		bs[3].Down = true
		b := mustNew(t, Config{Strategy: s, Backends: bs})
		if b.Len() != 5 || b.Strategy() != s || b.Index("[::1]:443") != 2 || b.Index("nope:1") != -1 {
			t.Fatalf("%s: Len %d Strategy %q Index %d", s, b.Len(), b.Strategy(), b.Index("[::1]:443"))
		}
		if b.Backend(1) != bs[1] || b.Backend(-1) != (Backend{}) || b.Backend(5) != (Backend{}) {
			t.Fatalf("%s: Backend(1) = %+v", s, b.Backend(1))
		}
		// The balancer keeps its own copy of the backends.
		bs[1].Weight = 99
		if b.Backend(1).Weight != 2 {
			t.Fatalf("%s: the caller's slice changed the balancer", s)
		}
	}
	names := strings.Join(Strategies(), " ")
	for _, s := range []string{GCDWRR, Random, RoundRobin, SmoothWRR, WeightedRandom} {
		if !strings.Contains(names, s) {
			t.Fatalf("Strategies() = %s, lacks %s", names, s)
		}
	}
}

func TestUpdateKeepsStateAndOptions(t *testing.T) {
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: testBackends([]int{5, 3, 2}, nil), Stagger: true, Rand: seededRandFunc(7)})
	b.hold(1)
	b.hold(1)
	nb, err := b.Update(testBackends([]int{1, 1, 1, 1}, nil)[1:])
	if err != nil {
		t.Fatal(err)
	}
	// 10.0.0.1:80 was backend 1 and is now backend 0: its two requests in
	// flight came along; the others are new or fresh.
	if nb.InFlight(0) != 2 || nb.InFlight(1) != 0 || nb.Strategy() != SmoothWRR || !nb.cfg.Stagger {
		t.Fatalf("after Update: in flight %d %d, strategy %q", nb.InFlight(0), nb.InFlight(1), nb.Strategy())
	}
	nb.release(0, time.Millisecond, false)
	if b.InFlight(1) != 1 {
		t.Fatalf("the old balancer does not share the address's state: %d", b.InFlight(1))
	}
	// Out-of-range indexes are ignored, not a panic.
	nb.hold(-1)
	nb.release(99, 0, true)
	if nb.InFlight(99) != 0 {
		t.Fatal("InFlight out of range")
	}
}

// TestPickFastPathMatchesNginx plays random failures, recoveries and clock
// steps against nginx's reference under smooth_wrr, whose picks go through
// Pick's inline table path whenever no backend has failures, and through the
// strategy otherwise: every pick must be nginx's.
func TestPickFastPathMatchesNginx(t *testing.T) {
	fast := 0
	// Failures come in bursts, so that runs without any leave nginx's
	// state on the table's orbit again.
	bursts := func(rng *rand.Rand) func(step, got int) bool {
		return func(step, got int) bool { return step%100 < 20 && rng.Intn(3) == 0 && got%2 == 0 }
	}
	playFailureTimelines(t, SmoothWRR, 11, 4, bursts, func(b *Balancer) {
		if b.failing.Load() == 0 && b.primary.sched.mode() == 1 && isSteady(b.primary) {
			fast++
		}
	})
	if fast < 1000 {
		t.Errorf("only %d picks could take the fast path; the test does not exercise it", fast)
	}
}

// TestPickMatchesPickFunc checks that a pick, the table's read included, and
// a pick with a filter that allows everything (which always goes through
// the strategy) make the same picks, on twin balancers given the same
// failures, for each table strategy and for backends with flags.
func TestPickMatchesPickFunc(t *testing.T) {
	all := func(int) bool { return true }
	for _, strategy := range []string{SmoothWRR, GCDWRR, RoundRobin} {
		for _, flags := range []string{"plain", "max_fails", "down", "max_conns"} {
			bs := testBackends([]int{5, 1, 3, 2, 4}, nil)
			for i := range bs {
				switch flags {
				case "max_fails":
					bs[i].MaxFails = 1
				case "down":
					bs[i].Down = i == 2
				case "max_conns":
					bs[i].MaxConns = 2
				}
			}
			clock := newHCClock()
			x := mustNew(t, Config{Strategy: strategy, Backends: bs, Now: clock.now})
			y := mustNew(t, Config{Strategy: strategy, Backends: bs, Now: clock.now})
			var held []int
			for step := 0; step < 300; step++ {
				if step%50 == 49 {
					clock.add(11 * time.Second)
				}
				i, err1 := x.choose("")
				j, err2 := y.chooseFunc("", all)
				if i != j || err1 != err2 {
					t.Fatalf("%s %s step %d: %d, %v; with the filter %d, %v", strategy, flags, step, i, err1, j, err2)
				}
				if err1 != nil {
					continue
				}
				x.hold(i)
				y.hold(j)
				if flags == "max_conns" && step%7 == 0 {
					held = append(held, i) // stays in flight for a while
					continue
				}
				failed := step%50 < 10 && i == 3
				x.release(i, 0, failed)
				y.release(j, 0, failed)
				if len(held) > 3 {
					x.release(held[0], 0, false)
					y.release(held[0], 0, false)
					held = held[1:]
				}
			}
		}
	}
}

// TestFailingCount checks the count of backends with failures that lets a
// pick skip the max_fails checks: up on a first failure, down when a success
// after a probe clears them, carried over an Update, cleared in the single
// backend case.
func TestFailingCount(t *testing.T) {
	clock := newHCClock()
	bs := testBackends([]int{1, 1, 1}, nil)
	for i := range bs {
		bs[i].MaxFails = 2
	}
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs, Now: clock.now})
	check := func(when string, b *Balancer, want int32) {
		t.Helper()
		if got := b.failing.Load(); got != want {
			t.Fatalf("%s: %d backends counted as failing, want %d", when, got, want)
		}
	}
	b.hold(0)
	b.release(0, 0, true)
	check("one failure", b, 1)
	b.hold(0)
	b.release(0, 0, true)
	check("second failure of the same backend", b, 1)
	b.hold(1)
	b.release(1, 0, true)
	check("failure of another", b, 2)
	b.hold(1)
	b.release(1, 0, false)
	check("success without a probe", b, 2) // nginx keeps fails until a probe
	u, err := b.Update(bs[:2])
	if err != nil {
		t.Fatal(err)
	}
	check("after Update", u, 2)
	clock.add(11 * time.Second)
	// Every backend is eligible again (fail_timeout passed); picks probe.
	seen := map[int]bool{}
	for k := 0; k < 6; k++ {
		i, err := u.choose("")
		if err != nil {
			t.Fatal(err)
		}
		seen[i] = true
		u.hold(i)
		u.release(i, 0, false)
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("picks %v: both backends should have been probed", seen)
	}
	check("after successful probes", u, 0)
	check("the older balancer shares the count", b, 0)

	one := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs[:2], Now: clock.now})
	one.hold(0)
	one.release(0, 0, true)
	check("two backends, one failure", one, 1)
	single, err := one.Update(bs[:1])
	if err != nil {
		t.Fatal(err)
	}
	single.hold(0)
	single.release(0, 0, false)
	check("single backend: failures not kept", single, 0)
}

// TestPickWithAndWithoutFilter: Pick with a filter that allows every
// backend chooses as Pick with none, pick for pick, for every strategy (two
// balancers built alike, with sources and clocks alike, each request ended
// at once): the table a steady group reads and the full pick agree. With
// every backend down Pick finds none, and its ticket is 0.
func TestPickWithAndWithoutFilter(t *testing.T) {
	w := []int{5, 1, 3, 2}
	all := Filter{Allow: func(int) bool { return true }}
	for _, name := range Strategies() {
		t.Run(name, func(t *testing.T) {
			clock := newHCClock()
			mk := func(down []bool) *Balancer {
				return mustNew(t, Config{Strategy: name, Backends: testBackends(w, down), Rand: seededRandFunc(7), Now: clock.now})
			}
			plain, filtered := mk(nil), mk(nil)
			for k := 0; k < 200; k++ {
				key := fmt.Sprintf("10.0.%d.%d", k%7, k)
				want, tw := Pick(plain, key, Filter{})
				got, tg := Pick(filtered, key, all)
				if got != want || want < 0 {
					t.Fatalf("pick %d: with the filter %d, without %d", k, got, want)
				}
				clock.add(time.Millisecond)
				Done(plain, want, tw, SincePick, false)
				Done(filtered, got, tg, SincePick, false)
			}
			none := mk([]bool{true, true, true, true})
			if i, tk := Pick(none, "10.0.0.1", Filter{}); i != -1 || tk != 0 {
				t.Fatalf("all down: Pick = %d, %d; want -1, 0", i, tk)
			}
		})
	}
}

// TestFailingCountAfterRemoval: a backend that an Update removes while it
// has failures is not in the new balancer's failing count, so the new
// balancer's picks take the quick path again (before, the shared count
// stayed up for good: nothing clears the failures of a removed backend);
// the older balancer still counts it. A balancer pushed out of a state's
// list by failKeep newer ones has its count pinned, and checks every pick.
func TestFailingCountAfterRemoval(t *testing.T) {
	bs := testBackends([]int{1, 1, 1}, nil)
	for i := range bs {
		bs[i].MaxFails = 1
	}
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: bs})
	b.hold(2)
	b.release(2, 0, true)
	if got := b.failing.Load(); got != 1 {
		t.Fatalf("after a failure: count %d, want 1", got)
	}
	u, err := b.Update(bs[:2])
	if err != nil {
		t.Fatal(err)
	}
	if got := u.failing.Load(); got != 0 || !isQuiet(u.primary) {
		t.Fatalf("new balancer: count %d, quiet %v; want 0, true", got, isQuiet(u.primary))
	}
	if got := b.failing.Load(); got != 1 {
		t.Fatalf("older balancer: count %d, want 1 (it still has the failing backend)", got)
	}
	// A failure through the old balancer of a backend both have counts in
	// both; its clearing uncounts it in both.
	b.hold(0)
	b.release(0, 0, true)
	if b.failing.Load() != 2 || u.failing.Load() != 1 {
		t.Fatalf("shared backend failed: counts %d and %d, want 2 and 1", b.failing.Load(), u.failing.Load())
	}
	clearFails(b.members[0].state, -1)
	if b.failing.Load() != 1 || u.failing.Load() != 0 {
		t.Fatalf("shared backend cleared: counts %d and %d, want 1 and 0", b.failing.Load(), u.failing.Load())
	}
	// failKeep newer balancers over the same addresses pin u's count.
	last := u
	for k := 0; k < failKeep; k++ {
		if last, err = last.Update(bs[:2]); err != nil {
			t.Fatal(err)
		}
	}
	if got := u.failing.Load(); got < failPinned {
		t.Fatalf("count of a balancer %d generations old: %d, want pinned", failKeep, got)
	}
	if got := last.failing.Load(); got != 0 {
		t.Fatalf("newest balancer: count %d, want 0", got)
	}
	// A failed Update takes no place in the lists.
	before := len(last.members[0].state.counts)
	if _, err := last.Update([]Backend{bs[0], {Address: "bad"}}); err == nil {
		t.Fatal("Update accepted a bad address")
	}
	if got := len(last.members[0].state.counts); got != before {
		t.Fatalf("a failed Update changed the list: %d counts, want %d", got, before)
	}
}
