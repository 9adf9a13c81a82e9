package core

import (
	"math/rand"
	"runtime"
	"sort"
	"testing"
)

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

// TestRingSort: the ring's sort orders keys as a plain sort does, with
// duplicates, keys that share their upper 32 bits, and every bucket size:
// through its buffered buckets (hash values, spread), through its in-place
// fallback (a quarter of the keys in one bucket), and the fallback alone.
func TestRingSort(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	for _, n := range []int{0, 1, 2, 31, 33, 300, 5000, 100000, -100000} {
		spread := n < 0
		if spread {
			n = -n
		}
		keys := make([]uint64, n)
		for i := range keys {
			if spread {
				keys[i] = uint64(rng.Uint32())<<32 | uint64(rng.Intn(64))
				continue
			}
			switch i % 4 {
			case 0:
				keys[i] = rng.Uint64()
			case 1:
				keys[i] = uint64(rng.Uint32())<<32 | uint64(rng.Intn(3)) // few owners
			case 2:
				keys[i] = uint64(rng.Intn(7))<<32 | uint64(rng.Intn(50)) // shared points
			default:
				keys[i] = keys[rng.Intn(i)] // duplicates
			}
		}
		want := append([]uint64(nil), keys...)
		sort.Slice(want, func(a, b int) bool { return want[a] < want[b] })
		in := append([]uint64(nil), keys...)
		ringSort(keys)
		flagSort(in, 56)
		for i := range want {
			if keys[i] != want[i] || in[i] != want[i] {
				t.Fatalf("n=%d spread %v: key %d is %x (ringSort), %x (flagSort), want %x", n, spread, i, keys[i], in[i], want[i])
			}
		}
	}
}

// TestKetamaBuildMemory: a ring at the bound (65,536 units of weight, 10.5
// million points) allocates what its comment says, about 80 MiB, not the
// 241 MiB of a sort through a second buffer and a copy into two slices.
func TestKetamaBuildMemory(t *testing.T) {
	bs := numbered(64)
	for i := range bs {
		bs[i].Weight = ketamaMaxWeight / 64
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := mustNew(t, Config{Strategy: URLHash, HashMode: HashKetama, Backends: bs})
	runtime.ReadMemStats(&after)
	ring := b.primary.strategy.(*ketama).ring
	mib := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
	if points := ketamaPoints * ketamaMaxWeight; len(ring.keys) < points*99/100 || mib > 85 {
		t.Fatalf("%d points (of %d) in %.1f MiB allocated, want at most 85", len(ring.keys), points, mib)
	}
}
