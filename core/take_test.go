package core

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestTakeMatchesPickIndexBegin holds Take and ReportSince equal to
// PickIndex, Begin and Report on a twin balancer, request for request: the
// same backend, the same counts in flight and requests, failures and fair's
// estimates, with requests overlapping (so least_conn and fair see load) and
// one in seven failing. Take's clock reading is the pick's under fair and 0
// under the others.
func TestTakeMatchesPickIndexBegin(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		key  string
	}{
		{"least_conn", Config{Strategy: LeastConn, Backends: hcBackends(5, 3, 2)}, ""},
		{"least_conn nine", Config{Strategy: LeastConn, Backends: hcBackends(1, 2, 3, 1, 2, 3, 1, 2, 3)}, ""},
		{"least_conn two_choices", Config{Strategy: LeastConn, TwoChoices: true, Backends: hcBackends(5, 3, 2)}, ""},
		{"fair", Config{Strategy: Fair, Backends: hcBackends(5, 3, 2)}, ""},
		{"fair ten", Config{Strategy: Fair, Backends: hcBackends(1, 2, 3, 4, 5, 1, 2, 3, 4, 5)}, ""},
		{"smooth_wrr", Config{Strategy: SmoothWRR, Backends: hcBackends(5, 3, 2)}, ""},
		{"random", Config{Strategy: WeightedRandom, Backends: hcBackends(5, 3, 2)}, ""},
		{"url_hash bounded", Config{Strategy: URLHash, HashMode: HashBounded, Backends: hcBackends(1, 1, 1)}, "/a/b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := newHCClock()
			for i := range c.cfg.Backends {
				c.cfg.Backends[i].MaxFails = 3
				c.cfg.Backends[i].FailTimeout = 50 * time.Millisecond
			}
			c.cfg.Now = clock.now
			plainCfg, takeCfg := c.cfg, c.cfg
			plainCfg.Rand, takeCfg.Rand = seededRandFunc(11), seededRandFunc(11)
			plain, took := mustNew(t, plainCfg), mustNew(t, takeCfg)
			type open struct {
				i     int
				n     *atomic.Int64
				at    int64
				start time.Time
			}
			var ends []open
			none := 0
			finish := func(o open, failed bool) {
				plain.Done(o.i, clock.now().Sub(o.start), failed)
				ReportSince(took, o.i, o.at, failed)
				o.n.Add(-1)
				if total := InFlightTotal(took); total != nil {
					total.Add(-1)
				}
			}
			for k := 0; k < 600; k++ {
				want := PickIndex(plain, c.key)
				i, n, at := Take(took, c.key)
				if want < 0 {
					if i != -1 || n != nil || at != 0 {
						t.Fatalf("request %d: no backend for PickIndex, Take = %d, %v, %d", k, i, n, at)
					}
					none++
					clock.add(10 * time.Millisecond)
					continue
				}
				plain.Start(want)
				if i != want || n == nil {
					t.Fatalf("request %d: Take = %d (count %v), PickIndex %d", k, i, n, want)
				}
				if wantAt := int64(0); c.cfg.Strategy == Fair {
					if wantAt = clockNano(took); at != wantAt {
						t.Fatalf("request %d: Take's clock %d, want %d", k, at, wantAt)
					}
				} else if at != 0 {
					t.Fatalf("request %d: Take's clock %d under %s, want 0", k, at, c.cfg.Strategy)
				}
				ends = append(ends, open{i, n, at, clock.now()})
				clock.add(time.Duration(k%5) * 300 * time.Microsecond)
				if len(ends) > 4 { // up to five in flight; the oldest ends
					finish(ends[0], k%13 == 0)
					ends = ends[1:]
				}
				for j := range c.cfg.Backends {
					if a, b := took.InFlight(j), plain.InFlight(j); a != b {
						t.Fatalf("request %d: backend %d in flight %d, PickIndex/Begin %d", k, j, a, b)
					}
					if a, b := took.Requests(j), plain.Requests(j); a != b {
						t.Fatalf("request %d: backend %d requests %d, PickIndex/Begin %d", k, j, a, b)
					}
					if a, b := took.Fails(j), plain.Fails(j); a != b {
						t.Fatalf("request %d: backend %d fails %d, Done %d", k, j, a, b)
					}
					if a, b := took.Latency(j), plain.Latency(j); a != b {
						t.Fatalf("request %d: backend %d latency %v, Done %v", k, j, a, b)
					}
				}
			}
			for _, o := range ends {
				finish(o, false)
			}
			if none > 60 {
				t.Errorf("%d of 600 requests found no backend: the test compared little", none)
			}
			for j := range c.cfg.Backends {
				if took.InFlight(j) != 0 {
					t.Errorf("backend %d: %d in flight after every end", j, took.InFlight(j))
				}
			}
			if total := InFlightTotal(took); total != nil && total.Load() != 0 {
				t.Errorf("total in flight %d after every end", total.Load())
			}
			if c.cfg.Strategy == Fair && took.Latency(0) == 0 {
				t.Error("fair: no estimate: the test compared nothing")
			}
		})
	}
}

// TestTakeNoBackend: with every backend down, Take counts nothing and says
// so with -1 and a nil count.
func TestTakeNoBackend(t *testing.T) {
	for _, s := range []string{LeastConn, Fair, SmoothWRR} {
		b := mustNew(t, Config{Strategy: s, Backends: []Backend{{Address: "10.0.0.1:80", Weight: 1, Down: true}, {Address: "10.0.0.2:80", Weight: 1, Down: true}}})
		if i, n, at := Take(b, ""); i != -1 || n != nil || at != 0 {
			t.Errorf("%s: Take = %d, %v, %d; want -1, nil, 0", s, i, n, at)
		}
		if b.Requests(0)+b.Requests(1) != 0 {
			t.Errorf("%s: requests counted with no backend", s)
		}
	}
}

// TestReportSinceTimesFromTake: an answer reported with ReportSince counts
// the time since Take's pick, and one reported with Report the latency
// given: a first answer is the estimate.
func TestReportSinceTimesFromTake(t *testing.T) {
	clock := newHCClock()
	b := mustNew(t, Config{Strategy: Fair, Backends: hcBackends(1, 1), Now: clock.now, Rand: seededRandFunc(3)})
	i, n, at := Take(b, "")
	clock.add(5 * time.Millisecond)
	ReportSince(b, i, at, false)
	n.Add(-1)
	if got := b.Latency(i); got != 5*time.Millisecond {
		t.Errorf("ReportSince 5ms after Take: estimate %v, want 5ms", got)
	}
	j := 1 - i
	Begin(b, j).Add(-1)
	Report(b, j, 7*time.Millisecond, false)
	if got := b.Latency(j); got != 7*time.Millisecond {
		t.Errorf("Report of 7ms: estimate %v, want 7ms", got)
	}
}
