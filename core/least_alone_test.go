package core

import (
	"fmt"
	"math/rand"
	"testing"
)

// leastAlone, least_conn's quick path under load, agrees with the full
// scan: the same member when one has the fewest requests in flight per
// weight, -1 when several tie; and PickIndex through it picks as nginx's
// pass does (twin balancers, one kept off the quick path by a filter that
// refuses nothing).
func TestLeastAloneMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for set := 0; set < 200; set++ {
		n := 1 + rng.Intn(6)
		var bs []Backend
		for i := 0; i < n; i++ {
			bs = append(bs, Backend{Address: fmt.Sprintf("10.2.0.%d:80", i+1), Weight: 1 + rng.Intn(4), MaxFails: 1})
		}
		quick := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		full := mustNew(t, Config{Strategy: LeastConn, Backends: bs})
		for i := 0; i < n; i++ {
			for k := rng.Intn(5); k > 0; k-- {
				quick.Start(i)
				full.Start(i)
			}
		}
		g := quick.primary
		tied := make([]int, n)
		best, ties := scanPlain(g.hot, tied)
		want := -1
		if ties == 1 {
			want = best
		}
		if got := leastAlone(g.hot); got != want {
			t.Fatalf("set %d: leastAlone %d, scan %d with %d tied", set, got, best, ties)
		}
		all := func(int) bool { return true }
		for k := 0; k < 20; k++ {
			got := PickIndex(quick, "")
			want, err := full.PickFunc("", all)
			if err != nil || got != want {
				t.Fatalf("set %d pick %d: quick %d, full %d (%v)", set, k, got, want, err)
			}
			quick.Start(got)
			full.Start(want)
		}
	}
}
