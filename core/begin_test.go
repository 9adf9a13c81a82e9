package core

import (
	"testing"
	"time"
)

// Begin, Report and the count's Add(-1) leave a balancer as Start and Done
// do: requests in flight and started, nginx's failures and the failing
// count, and fair's estimate, for each strategy and kind of end; and Begin
// gives way to Start (nil) where the balancer counts over all backends.
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
	bounded := mustNew(t, Config{Strategy: URLHash, HashMode: HashBounded, Backends: hcBackends(1, 1)})
	if n := Begin(bounded, 0); n != nil || bounded.InFlight(0) != 1 {
		t.Fatalf("bounded: Begin %v, in flight %d; want nil after a Start", n, bounded.InFlight(0))
	}
	if n := Begin(bounded, 5); n != nil {
		t.Fatal("Begin out of range: not nil")
	}
	Report(bounded, -1, 0, true) // out of range: nothing, no panic
}
