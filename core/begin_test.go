package core

import (
	"testing"
	"time"
)

// Begin, Report and the count's Add(-1) leave a balancer as Start and Done
// do: requests in flight and started, nginx's failures and the failing
// count, and fair's estimate, for each strategy and kind of end; where the
// balancer counts over all backends, Begin adds to that total and the end
// takes it off.
func TestBeginReportMatchStartDone(t *testing.T) {
	ends := []struct {
		name    string
		latency time.Duration
		failed  bool
	}{
		{"success", 3 * time.Millisecond, false},
		{"failure", time.Millisecond, true},
		{"success after failure", 2 * time.Millisecond, false},
	}
	for _, strategy := range []string{LeastConn, Fair, SmoothWRR, RoundRobin} {
		t.Run(strategy, func(t *testing.T) {
			clock := newHCClock()
			cfg := Config{Strategy: strategy, Backends: []Backend{
				{Address: "10.9.0.1:80", Weight: 2, MaxFails: 2},
				{Address: "10.9.0.2:80", Weight: 1, MaxFails: 2},
			}, Now: clock.now}
			plain, viaBegin := mustNew(t, cfg), mustNew(t, cfg)
			for k, e := range ends {
				for _, i := range []int{0, 1, 0} {
					plain.Start(i)
					n := Begin(viaBegin, i)
					if n == nil {
						t.Fatalf("%s: Begin(%d) nil", e.name, i)
					}
					if got, want := viaBegin.InFlight(i), plain.InFlight(i); got != want {
						t.Fatalf("%s: in flight %d after Begin, %d after Start", e.name, got, want)
					}
					plain.Done(i, e.latency, e.failed)
					Report(viaBegin, i, e.latency, e.failed)
					n.Add(-1)
					if total := InFlightTotal(viaBegin); total != nil {
						total.Add(-1)
					}
					clock.add(time.Duration(k+1) * 7 * time.Millisecond)
				}
				for i := 0; i < 2; i++ {
					if a, b := viaBegin.InFlight(i), plain.InFlight(i); a != b || a != 0 {
						t.Errorf("%s: backend %d in flight %d, Start/Done %d", e.name, i, a, b)
					}
					if a, b := viaBegin.Requests(i), plain.Requests(i); a != b {
						t.Errorf("%s: backend %d requests %d, Start/Done %d", e.name, i, a, b)
					}
					if a, b := viaBegin.Fails(i), plain.Fails(i); a != b {
						t.Errorf("%s: backend %d fails %d, Start/Done %d", e.name, i, a, b)
					}
					if a, b := viaBegin.Latency(i), plain.Latency(i); a != b {
						t.Errorf("%s: backend %d latency %v, Start/Done %v", e.name, i, a, b)
					}
				}
				if a, b := viaBegin.failing.Load(), plain.failing.Load(); a != b {
					t.Errorf("%s: failing %d, Start/Done %d", e.name, a, b)
				}
				if e.failed && plain.Fails(0) == 0 {
					t.Fatalf("%s: no failure counted: the test compared nothing", e.name)
				}
			}
			if strategy == Fair && plain.Latency(0) == 0 {
				t.Fatal("fair: no estimate: the test compared nothing")
			}
		})
	}
	// The strategies that count over all backends: Begin adds to the
	// total too, and the request ends on both counts.
	for _, cfg := range []Config{
		{Strategy: URLHash, HashMode: HashBounded, Backends: hcBackends(1, 1)},
		{Strategy: LeastConn, Backends: hcBackends(1, 1, 1, 1, 1, 1, 1, 1, 1)},
	} {
		b := mustNew(t, cfg)
		total := InFlightTotal(b)
		if total == nil {
			t.Fatalf("%s %s: no total", cfg.Strategy, cfg.HashMode)
		}
		n := Begin(b, 1)
		if n == nil || b.InFlight(1) != 1 || total.Load() != 1 || b.Requests(1) != 1 {
			t.Fatalf("%s %s: after Begin: in flight %d, total %d, requests %d", cfg.Strategy, cfg.HashMode, b.InFlight(1), total.Load(), b.Requests(1))
		}
		n.Add(-1)
		total.Add(-1)
		if b.InFlight(1) != 0 || total.Load() != 0 {
			t.Fatalf("%s %s: after the end: in flight %d, total %d", cfg.Strategy, cfg.HashMode, b.InFlight(1), total.Load())
		}
	}
	for _, cfg := range []Config{{Strategy: Fair, Backends: hcBackends(1, 1)}, {Strategy: LeastConn, Backends: hcBackends(1, 1)}} {
		if total := InFlightTotal(mustNew(t, cfg)); total != nil {
			t.Fatalf("%s over %d backends has a total", cfg.Strategy, len(cfg.Backends))
		}
	}
	// least_conn decides at New and keeps the decision through Update,
	// either way: a count begun later would miss the requests in flight.
	small, large := mustNew(t, Config{Strategy: LeastConn, Backends: hcBackends(1, 1)}), mustNew(t, Config{Strategy: LeastConn, Backends: hcBackends(1, 1, 1, 1, 1, 1, 1, 1, 1)})
	grown, err := small.Update(hcBackends(1, 1, 1, 1, 1, 1, 1, 1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	shrunk, err := large.Update(hcBackends(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if InFlightTotal(grown) != nil || InFlightTotal(shrunk) != InFlightTotal(large) {
		t.Fatal("Update changed whether least_conn counts over all backends")
	}
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: hcBackends(1, 1)})
	if n := Begin(b, 5); n != nil || Begin(b, -1) != nil {
		t.Fatal("Begin out of range: not nil")
	}
	Report(b, -1, 0, true) // out of range: nothing, no panic
}
