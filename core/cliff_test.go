package core

import "testing"

// BenchmarkCliffs measures the cases that once fell off a cost cliff, each
// next to its ordinary case, so that ratios come from one run:
//
//		go test ./core -run '^$' -bench BenchmarkCliffs -benchtime 20x
//
//	  - gcd_wrr with weights 1000000,1 and the heavy backend full (max_conns):
//	    every pick once stepped through the heavy backend's million entries.
//	  - maglev's build at n=4000 with one weight 1e6, beside equal weights:
//	    once O(table x n) rounds of credit.
//	  - ketama's build at its bound (65,536 units of weight: 10.5 million
//	    points), with its allocations.
//	  - a pick after Update removed a backend that had failures, beside one on
//	    a balancer that never saw a failure: the count of failing backends
//	    once stayed up for good and kept picks off the quick path.
func BenchmarkCliffs(b *testing.B) {
	heavy := []Backend{{Address: "10.0.0.1:80", Weight: 1000000, MaxConns: 1}, {Address: "10.0.0.2:80", Weight: 1}}
	for _, s := range []string{GCDWRR, SmoothWRR} {
		bal := mustNew(b, Config{Strategy: s, Backends: heavy})
		bal.hold(0) // the heavy backend is full
		b.Run(s+"/heavy_full", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if bal.chooseIndex("") != 1 {
					b.Fatal("picked the full backend")
				}
			}
		})
	}
	for _, skew := range []bool{false, true} {
		bs := numbered(4000)
		name := "equal"
		if skew {
			bs[0].Weight = MaxWeight
			name = "skewed"
		}
		b.Run("maglev_build/n=4000/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				mustNew(b, Config{Strategy: URLHash, HashMode: HashMaglev, Backends: bs})
			}
		})
	}
	bs := numbered(64)
	for i := range bs {
		bs[i].Weight = 1024 // 65,536 in all: ketama's bound
	}
	b.Run("ketama_build/weight=65536", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			mustNew(b, Config{Strategy: URLHash, HashMode: HashKetama, Backends: bs})
		}
	})
	three := numbered(3)
	for i := range three {
		three[i].MaxFails = 1
	}
	fresh := mustNew(b, Config{Strategy: SmoothWRR, Backends: three[:2]})
	old := mustNew(b, Config{Strategy: SmoothWRR, Backends: three})
	old.hold(2)
	old.release(2, 0, true)
	removed, err := old.Update(three[:2])
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		bal  *Balancer
	}{{"never_failed", fresh}, {"failing_removed", removed}} {
		bal := c.bal
		b.Run("pick/"+c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				bal.chooseIndex("")
			}
		})
	}
}
