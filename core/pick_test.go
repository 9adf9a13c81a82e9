package core

import (
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestTakeMatchesPick holds Take to Pick on a twin balancer, request for
// request: the same backend, the same counts in flight and started,
// failures and fair's estimates, with requests overlapping (so least_conn
// and fair see load) and one in thirteen failing. A request from Pick ends
// with Done; one from Take with its count's Add(-1), when Take handed one
// back, and Done whenever the ticket is not 0 or the request failed.
func TestTakeMatchesPick(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		key  string
		own  bool // Take hands the count back
	}{
		{"least_conn", Config{Strategy: LeastConn, Backends: hcBackends(5, 3, 2)}, "", true},
		{"least_conn nine", Config{Strategy: LeastConn, Backends: hcBackends(1, 2, 3, 1, 2, 3, 1, 2, 3)}, "", true},
		{"least_conn two_choices", Config{Strategy: LeastConn, TwoChoices: true, Backends: hcBackends(5, 3, 2)}, "", true},
		{"fair", Config{Strategy: Fair, Backends: hcBackends(5, 3, 2)}, "", true},
		{"fair ten", Config{Strategy: Fair, Backends: hcBackends(1, 2, 3, 4, 5, 1, 2, 3, 4, 5)}, "", true},
		{"smooth_wrr", Config{Strategy: SmoothWRR, Backends: hcBackends(5, 3, 2)}, "", false},
		{"weighted_random", Config{Strategy: WeightedRandom, Backends: hcBackends(5, 3, 2)}, "", false},
		{"random", Config{Strategy: Random, Backends: hcBackends(5, 3, 2)}, "", false},
		{"url_hash bounded", Config{Strategy: URLHash, HashMode: HashBounded, Backends: hcBackends(1, 1, 1)}, "/a/%d", true},
		{"url_hash ketama", Config{Strategy: URLHash, Backends: hcBackends(1, 2, 1)}, "/item/%d", false},
		{"url_hash modulo", Config{Strategy: URLHash, HashMode: HashModulo, Backends: hcBackends(1, 2, 1)}, "/item/%d", false},
		{"url_hash maglev", Config{Strategy: URLHash, HashMode: HashMaglev, Backends: hcBackends(1, 2, 1)}, "/item/%d", false},
		{"ip_hash", Config{Strategy: IPHash, Backends: hcBackends(1, 2, 1)}, "192.0.%d.7", false},
		// A backup's max_conns: every request is counted, the primary's too.
		{"smooth_wrr capped backup", Config{Strategy: SmoothWRR, Backends: cappedBackup(hcBackends(5, 3, 2))}, "", true},
		{"random capped backup", Config{Strategy: Random, Backends: cappedBackup(hcBackends(5, 3, 2))}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := newHCClock()
			for i := range c.cfg.Backends {
				c.cfg.Backends[i].MaxFails = 3
				c.cfg.Backends[i].FailTimeout = 50 * time.Millisecond
			}
			c.cfg.Now = clock.now
			pickCfg, takeCfg := c.cfg, c.cfg
			pickCfg.Rand, takeCfg.Rand = seededRandFunc(11), seededRandFunc(11)
			picked, took := mustNew(t, pickCfg), mustNew(t, takeCfg)
			type open struct {
				i      int
				n      *atomic.Int64
				tp, tt Ticket
				start  time.Time
			}
			var ends []open
			none, owned := 0, 0
			finish := func(o open, failed bool) {
				lat := clock.now().Sub(o.start)
				Done(picked, o.i, o.tp, lat, failed)
				if o.n != nil {
					o.n.Add(-1)
				}
				if o.tt != 0 || failed || o.n == nil {
					Done(took, o.i, o.tt, SincePick, failed)
				}
			}
			for k := 0; k < 600; k++ {
				key := c.key
				if strings.Contains(key, "%d") {
					key = fmt.Sprintf(key, k*7%256)
				}
				want, tp := Pick(picked, key, Filter{})
				i, n, tt := Take(took, key)
				if want < 0 {
					if i != -1 || n != nil || tt != 0 || tp != 0 {
						t.Fatalf("request %d: no backend for Pick, Take = %d, %v, %d", k, i, n, tt)
					}
					none++
					clock.add(10 * time.Millisecond)
					continue
				}
				if i != want {
					t.Fatalf("request %d: Take %d, Pick %d", k, i, want)
				}
				if n != nil {
					owned++
				}
				if picked.counted && tp == 0 {
					t.Fatalf("request %d: a counted request's ticket is 0", k)
				}
				ends = append(ends, open{i, n, tp, tt, clock.now()})
				clock.add(time.Duration(k%5) * 300 * time.Microsecond)
				if len(ends) > 4 { // up to five in flight; the oldest ends
					finish(ends[0], k%13 == 0)
					ends = ends[1:]
				}
				for j := range c.cfg.Backends {
					if a, b := took.InFlight(j), picked.InFlight(j); a != b {
						t.Fatalf("request %d: backend %d in flight %d, Pick %d", k, j, a, b)
					}
					if a, b := took.Requests(j), picked.Requests(j); a != b {
						t.Fatalf("request %d: backend %d requests %d, Pick %d", k, j, a, b)
					}
					if a, b := took.Fails(j), picked.Fails(j); a != b {
						t.Fatalf("request %d: backend %d fails %d, Pick %d", k, j, a, b)
					}
					if a, b := took.Latency(j), picked.Latency(j); a != b {
						t.Fatalf("request %d: backend %d latency %v, Pick %v", k, j, a, b)
					}
				}
			}
			for _, o := range ends {
				finish(o, false)
			}
			if none > 60 {
				t.Errorf("%d of 600 requests found no backend: the test compared little", none)
			}
			if c.own != (owned > 0) {
				t.Errorf("Take handed back %d counts, want some: %v", owned, c.own)
			}
			for j := range c.cfg.Backends {
				if took.InFlight(j) != 0 || picked.InFlight(j) != 0 {
					t.Errorf("backend %d: %d and %d in flight after every end", j, took.InFlight(j), picked.InFlight(j))
				}
			}
			if took.inflight != nil && took.inflight.Load() != 0 {
				t.Errorf("total in flight %d after every end", took.inflight.Load())
			}
			if c.cfg.Strategy == Fair && took.Latency(0) == 0 {
				t.Error("fair: no estimate: the test compared nothing")
			}
		})
	}
}

// TestTicket: a pick's ticket is 0 exactly when the request needs no Done
// on success: the balancer neither counts nor times it and the backend has
// no failures. A counted request stays in flight until Done; with every
// backend down, Pick and Take count nothing.
func TestTicket(t *testing.T) {
	clock := newHCClock()
	for _, c := range []struct {
		cfg  Config
		zero bool
	}{
		{Config{Strategy: SmoothWRR, Backends: hcBackends(1, 1)}, true},
		{Config{Strategy: IPHash, Backends: hcBackends(1, 1)}, true},
		{Config{Strategy: URLHash, HashMode: HashMaglev, Backends: hcBackends(1, 1)}, true},
		{Config{Strategy: SmoothWRR, Backends: []Backend{{Address: "10.0.0.1:80", Weight: 1, MaxConns: 2}, {Address: "10.0.0.2:80", Weight: 1}}}, false},
		{Config{Strategy: LeastConn, Backends: hcBackends(1, 1)}, false},
		{Config{Strategy: Fair, Backends: hcBackends(1, 1)}, false},
		{Config{Strategy: URLHash, HashMode: HashBounded, Backends: hcBackends(1, 1)}, false},
	} {
		c.cfg.Now = clock.now
		b := mustNew(t, c.cfg)
		i, tk := Pick(b, "10.1.2.3", Filter{})
		if (tk == 0) != c.zero {
			t.Errorf("%s %s: ticket %d, want zero: %v", c.cfg.Strategy, c.cfg.HashMode, tk, c.zero)
		}
		if want := int64(0); !c.zero {
			want = 1
			if got := b.InFlight(i); got != want {
				t.Errorf("%s %s: %d in flight after Pick, want %d", c.cfg.Strategy, c.cfg.HashMode, got, want)
			}
			Done(b, i, tk, time.Millisecond, false)
			if got := b.InFlight(i); got != 0 {
				t.Errorf("%s %s: %d in flight after Done", c.cfg.Strategy, c.cfg.HashMode, got)
			}
		}
	}
	// A backend with failures gets a ticket, so that its success reaches
	// Done and clears them after the probe.
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: []Backend{{Address: "10.0.0.1:80", Weight: 1, MaxFails: 3}, {Address: "10.0.0.2:80", Weight: 1, MaxFails: 3}}, Now: clock.now})
	i, tk := Pick(b, "", Filter{})
	Done(b, i, tk, 0, true)
	j, tk := Pick(b, "", Filter{Allow: func(k int) bool { return k == i }})
	if j != i || tk == 0 {
		t.Fatalf("pick of the failed backend: %d, ticket %d; want %d and a ticket", j, tk, i)
	}
	clock.add(time.Millisecond) // the probe: checked moves past the failure
	b.members[i].state.checked.Store(clockNano(b))
	Done(b, i, tk, 0, false)
	if b.Fails(i) != 0 {
		t.Fatalf("fails %d after a success after the probe", b.Fails(i))
	}
	for _, s := range []string{LeastConn, Fair, SmoothWRR} {
		b := mustNew(t, Config{Strategy: s, Backends: []Backend{{Address: "10.0.0.1:80", Weight: 1, Down: true}, {Address: "10.0.0.2:80", Weight: 1, Down: true}}})
		if i, tk := Pick(b, "", Filter{}); i != -1 || tk != 0 {
			t.Errorf("%s: Pick = %d, %d; want -1, 0", s, i, tk)
		}
		if i, n, tk := Take(b, ""); i != -1 || n != nil || tk != 0 {
			t.Errorf("%s: Take = %d, %v, %d; want -1, nil, 0", s, i, n, tk)
		}
		if b.Requests(0)+b.Requests(1) != 0 {
			t.Errorf("%s: requests counted with no backend", s)
		}
	}
	Done(b, -1, 1, 0, true) // out of range: nothing, no panic
	Done(b, 7, 1, 0, true)
}

// TestDoneSincePick: an answer ended with SincePick counts the time since
// its pick (by Pick or Take), one with a latency that latency: a first
// answer is fair's estimate.
func TestDoneSincePick(t *testing.T) {
	clock := newHCClock()
	b := mustNew(t, Config{Strategy: Fair, Backends: hcBackends(1, 1), Now: clock.now, Rand: seededRandFunc(3)})
	i, n, tk := Take(b, "")
	clock.add(5 * time.Millisecond)
	n.Add(-1)
	Done(b, i, tk, SincePick, false)
	if got := b.Latency(i); got != 5*time.Millisecond {
		t.Errorf("SincePick 5ms after Take: estimate %v, want 5ms", got)
	}
	if b.InFlight(i) != 0 {
		t.Errorf("%d in flight: Done counted down a request Take's caller had", b.InFlight(i))
	}
	j, tk := Pick(b, "", Filter{Allow: func(k int) bool { return k != i }})
	clock.add(9 * time.Millisecond)
	Done(b, j, tk, 7*time.Millisecond, false)
	if got := b.Latency(j); got != 7*time.Millisecond {
		t.Errorf("Done with 7ms: estimate %v, want 7ms", got)
	}
	k, tk := Pick(b, "", Filter{Allow: func(k int) bool { return k == i }})
	clock.add(3 * time.Millisecond)
	Done(b, k, tk, SincePick, false)
	if b.InFlight(k) != 0 {
		t.Errorf("%d in flight after Pick and Done", b.InFlight(k))
	}

	// Pick with no filter takes fair's steady read, whose clock reading
	// the ticket carries.
	fresh := mustNew(t, Config{Strategy: Fair, Backends: hcBackends(1, 1), Now: clock.now, Rand: seededRandFunc(3)})
	m, tk := Pick(fresh, "", Filter{})
	clock.add(4 * time.Millisecond)
	Done(fresh, m, tk, SincePick, false)
	if got := fresh.Latency(m); got != 4*time.Millisecond {
		t.Errorf("SincePick 4ms after Pick: estimate %v, want 4ms", got)
	}
	if fresh.InFlight(m) != 0 {
		t.Errorf("%d in flight after Pick and Done", fresh.InFlight(m))
	}
}

// TestTraitsOf: what each strategy declares it needs from its host.
func TestTraitsOf(t *testing.T) {
	for _, c := range []struct {
		strategy, mode string
		want           Traits
	}{
		{SmoothWRR, "", Traits{SlowStart: true, Backup: true}},
		{LeastConn, "", Traits{Counts: true, SlowStart: true, Backup: true}},
		{Fair, "", Traits{Counts: true, Times: true, SlowStart: true, Backup: true, FailStatus: "5xx"}},
		{IPHash, "", Traits{Key: true}},
		{URLHash, HashKetama, Traits{Key: true}},
		{URLHash, HashBounded, Traits{Key: true, Counts: true}},
	} {
		got, err := TraitsOf(c.strategy, c.mode)
		if err != nil || got != c.want {
			t.Errorf("TraitsOf(%s, %s) = %+v, %v; want %+v", c.strategy, c.mode, got, err, c.want)
		}
	}
	if _, err := TraitsOf("nope", ""); err == nil {
		t.Error("TraitsOf an unknown strategy: no error")
	}
}

// cappedBackup returns bs and a backup with max_conns 1.
func cappedBackup(bs []Backend) []Backend {
	return append(bs, Backend{Address: "10.0.9.1:80", Weight: 1, Backup: true, MaxConns: 1})
}

// BenchmarkRequest measures one request's pick and end as a host makes
// them, Pick and then Done (when the ticket is not 0), for every strategy at 10 and 100 backends:
// least_conn idle and with requests held in flight, fair with latencies
// known and requests in flight. Against another tree, alternate the two
// in rounds and compare the fastest rounds:
//
//	go test ./core -run '^$' -bench BenchmarkRequest -benchtime 150ms -count 1
func BenchmarkRequest(b *testing.B) {
	keys := benchKeys()
	v4, _ := benchIPs()
	none := make([]string, 4096)
	for _, c := range []struct {
		name, strategy, mode string
		two, load            bool
	}{
		{"smooth_wrr", SmoothWRR, "", false, false},
		{"gcd_wrr", GCDWRR, "", false, false},
		{"round_robin", RoundRobin, "", false, false},
		{"random", Random, "", false, false},
		{"weighted_random", WeightedRandom, "", false, false},
		{"least_conn_idle", LeastConn, "", false, false},
		{"least_conn_loaded", LeastConn, "", false, true},
		{"least_conn_two", LeastConn, "", true, true},
		{"fair", Fair, "", false, true},
		{"url_hash_ketama", URLHash, HashKetama, false, false},
		{"url_hash_maglev", URLHash, HashMaglev, false, false},
		{"url_hash_bounded", URLHash, HashBounded, false, false},
		{"ip_hash", IPHash, "", false, false},
	} {
		ks := none
		switch c.strategy {
		case URLHash:
			ks = keys
		case IPHash:
			ks = v4
		}
		for _, n := range []int{10, 100} {
			bs := make([]Backend, n)
			for i := range bs {
				bs[i] = Backend{Address: fmt.Sprintf("10.%d.%d.%d:80", i>>16, i>>8&255, i&255), Weight: 1 + i%3}
			}
			bal := mustNew(b, Config{Strategy: c.strategy, HashMode: c.mode, TwoChoices: c.two, Backends: bs})
			if c.load {
				rng := rand.New(rand.NewSource(1))
				for i := 0; i < n; i++ {
					bal.hold(i)
					bal.release(i, time.Duration(1+rng.Intn(50))*time.Millisecond, false)
					for k := rng.Intn(10); k > 0; k-- {
						bal.hold(i)
					}
				}
			}
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					j, t := Pick(bal, ks[i&4095], Filter{})
					if t != 0 { // a ticket of 0 needs no Done (see Ticket)
						Done(bal, j, t, 5*time.Millisecond, false)
					}
				}
			})
		}
	}
}
