package core

import "testing"

// ketama is nginx's ring: with 160 points per backend its balance is loose
// (about 1.1-1.3 max/mean), but it is strictly consistent: when a backend
// leaves only its keys move, and when one joins only keys that go to it move.
func TestKetamaBalanceAndDisruption(t *testing.T) {
	keys := testKeys(100000)
	for _, c := range []struct {
		n       int
		balance float64
	}{{10, 1.35}, {100, 1.45}} {
		n := c.n
		bs := numbered(n + 1)
		all := mustNew(t, Config{Strategy: URLHash, HashMode: HashKetama, Backends: bs[:n]})
		gone := bs[n/2].Address
		without := append(append([]Backend{}, bs[:n/2]...), bs[n/2+1:n]...)
		left, err := all.Update(without)
		if err != nil {
			t.Fatal(err)
		}
		joined, err := all.Update(bs)
		if err != nil {
			t.Fatal(err)
		}
		balance := spread(t, all, keys)
		leave, join := 0, 0
		for _, k := range keys {
			before := pickAddr(t, all, k)
			if after := pickAddr(t, left, k); after != before {
				if before != gone {
					t.Fatalf("n=%d: key %q moved from %s to %s when %s left", n, k, before, after, gone)
				}
				leave++
			} else if before == gone {
				t.Fatalf("n=%d: key %q stayed on %s, which left", n, k, gone)
			}
			if after := pickAddr(t, joined, k); after != before {
				if after != bs[n].Address {
					t.Fatalf("n=%d: key %q moved from %s to %s, not to the new backend", n, k, before, after)
				}
				join++
			}
		}
		t.Logf("ketama n=%d: 100k keys max/mean %.4f, moved on leave %.4f (1/n %.4f), on join %.4f (1/(n+1) %.4f)",
			n, balance, float64(leave)/float64(len(keys)), 1/float64(n), float64(join)/float64(len(keys)), 1/float64(n+1))
		if balance > c.balance {
			t.Errorf("n=%d: max/mean %.4f > %.2f", n, balance, c.balance)
		}
		// Only the leaving backend's keys move: at most the largest share.
		if f := float64(leave) / float64(len(keys)); f > balance/float64(n) {
			t.Errorf("n=%d: %.4f of keys moved on leave, above the largest share %.4f", n, f, balance/float64(n))
		}
	}
}
