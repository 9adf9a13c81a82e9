package core

import (
	"fmt"
	"testing"
)

// TestWeightSumsPast2To31: weights whose sum passes 2^31 build and pick on
// every platform (on 32-bit ones an int sum wrapped negative, and New
// panicked with "makeslice: len out of range" in gcd_wrr's period, the
// weight tables and the hash weight walk), or are refused with an error:
// never a panic. Run it with GOARCH=386 too.
func TestWeightSumsPast2To31(t *testing.T) {
	const n = 2200 // 2200 * ~1e6 > 2^31
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Address: fmt.Sprintf("10.%d.%d.1:80", i/250, i%250), Weight: MaxWeight - i%2}
	}
	type cfg struct {
		name string
		c    Config
	}
	var cases []cfg
	for _, s := range Strategies() {
		if s == URLHash {
			for _, m := range []string{HashKetama, HashModulo, HashMaglev, HashBounded} {
				cases = append(cases, cfg{s + " " + m, Config{Strategy: s, HashMode: m}})
			}
			continue
		}
		cases = append(cases, cfg{s, Config{Strategy: s}})
	}
	cases = append(cases, cfg{"least_conn two_choices", Config{Strategy: LeastConn, TwoChoices: true}})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.Backends = bs
			b, err := New(c)
			if err != nil {
				// ketama gives every unit of weight 160 points: refused.
				if tt.c.Strategy != URLHash || tt.c.HashMode != HashKetama && tt.c.HashMode != HashBounded {
					t.Fatalf("New: %v", err)
				}
				return
			}
			counts := make([]int, n)
			for k := 0; k < 2*n; k++ {
				i, err := b.choose(fmt.Sprintf("10.1.%d.%d", k/200, k%200))
				if err != nil {
					t.Fatal(err)
				}
				counts[i]++
			}
			// Unavailable backends are skipped, also with every sum past 2^31.
			odd := func(i int) bool { return i%2 == 1 }
			for k := 0; k < 50; k++ {
				if i, err := b.chooseFunc(fmt.Sprintf("k%d", k), odd); err != nil || i%2 != 1 {
					t.Fatalf("filtered pick: %d, %v", i, err)
				}
			}
		})
	}
}
