package sim

import (
	"fmt"
	"testing"

	"github.com/lbpack/lbpack/core"
)

func TestX(t *testing.T) {
	for _, c := range []int{1, 5, 10, 20, 50} {
		for _, st := range []string{"round_robin", "least_conn", "fair"} {
			var bs []core.Backend
			lat := map[string]Dist{}
			for i := 0; i < 5; i++ {
				a := fmt.Sprintf("10.0.0.%d:80", i+1)
				bs = append(bs, core.Backend{Address: a, Weight: 1})
				d, _ := ParseDist("exp:10ms")
				if i == 4 {
					d, _ = ParseDist("exp:100ms")
				}
				lat[a] = d
			}
			res, err := Run(Options{Config: core.Config{Strategy: st, Backends: bs}, Latency: lat, Concurrency: c, Requests: 20000, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("C=%d %-12s p50=%v p90=%v p99=%v slow=%.4f elapsed=%v", c, st, res.P50, res.P90, res.P99, res.Backends[4].Share, res.Elapsed)
		}
	}
}
