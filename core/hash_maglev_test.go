package core

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// spread returns max/mean of the keys each backend gets, over keys.
func spread(tb testing.TB, b *Balancer, keys []string) float64 {
	tb.Helper()
	counts := make([]int, b.Len())
	for _, k := range keys {
		i, err := b.choose(k)
		if err != nil {
			tb.Fatal(err)
		}
		counts[i]++
	}
	maxC := 0
	for _, c := range counts {
		if c > maxC {
			maxC = c
		}
	}
	return float64(maxC) * float64(b.Len()) / float64(len(keys))
}

// moved returns the fraction of keys whose backend address differs between
// two balancers.
func moved(tb testing.TB, a, b *Balancer, keys []string) float64 {
	tb.Helper()
	n := 0
	for _, k := range keys {
		if pickAddr(tb, a, k) != pickAddr(tb, b, k) {
			n++
		}
	}
	return float64(n) / float64(len(keys))
}

// tableSpread returns max/mean of the maglev table entries each member owns,
// relative to its weight: the share of an unbounded number of keys.
func tableSpread(b *Balancer) float64 {
	g := b.primary
	s := g.strategy.(*maglev)
	counts := make([]float64, len(g.members))
	for _, p := range s.table {
		counts[p]++
	}
	worst := 0.0
	for i, m := range g.members {
		r := counts[i] / (float64(len(s.table)) * float64(m.weight) / float64(g.totalWeight))
		if r > worst {
			worst = r
		}
	}
	return worst
}

// consistency measures, for n equal backends: key balance max/mean, and the
// fraction of keys moved when the middle backend leaves and when a new one
// joins.
func consistency(tb testing.TB, mode string, n int, keys []string) (balance, leave, join float64) {
	bs := numbered(n + 1)
	all := mustNew(tb, Config{Strategy: URLHash, HashMode: mode, Backends: bs[:n]})
	without := append(append([]Backend{}, bs[:n/2]...), bs[n/2+1:n]...)
	left, err := all.Update(without)
	if err != nil {
		tb.Fatal(err)
	}
	joined, err := all.Update(bs)
	if err != nil {
		tb.Fatal(err)
	}
	return spread(tb, all, keys), moved(tb, all, left, keys), moved(tb, all, joined, keys)
}

func TestMaglevBalanceAndDisruption(t *testing.T) {
	keys := testKeys(100000)
	for _, n := range []int{10, 100} {
		balance, leave, join := consistency(t, HashMaglev, n, keys)
		b := mustNew(t, Config{Strategy: URLHash, HashMode: HashMaglev, Backends: numbered(n)})
		table := tableSpread(b)
		t.Logf("maglev n=%d: table max/mean %.4f, 100k keys max/mean %.4f, moved on leave %.4f (1/n %.4f), on join %.4f (1/(n+1) %.4f)",
			n, table, balance, leave, 1/float64(n), join, 1/float64(n+1))
		// The table shares are what an unbounded number of keys sees.
		if table > 1.02 {
			t.Errorf("n=%d: table max/mean %.4f > 1.02", n, table)
		}
		// 100k keys add sampling noise: mean 10000 (n=10) or 1000 (n=100)
		// keys per backend, so the maximum of n counts sits about 3 standard
		// deviations above the mean.
		if limit := 1 + 4/math.Sqrt(float64(len(keys)/n)); balance > limit {
			t.Errorf("n=%d: 100k keys max/mean %.4f > %.4f", n, balance, limit)
		}
		if leave > 1/float64(n)+0.01 {
			t.Errorf("n=%d: %.4f of keys moved when one backend left; bound 1/n + 1%% = %.4f", n, leave, 1/float64(n)+0.01)
		}
		if join > 1/float64(n+1)+0.01 {
			t.Errorf("n=%d: %.4f of keys moved when one backend joined; bound 1/(n+1) + 1%% = %.4f", n, join, 1/float64(n+1)+0.01)
		}
	}
}

func TestMaglevWeights(t *testing.T) {
	bs := numbered(4)
	for i := range bs {
		bs[i].Weight = i + 1
	}
	b := mustNew(t, Config{Strategy: URLHash, HashMode: HashMaglev, Backends: bs})
	if s := tableSpread(b); s > 1.01 {
		t.Errorf("weights 1,2,3,4: table share up to %.4f of the weight share, want <= 1.01", s)
	}
	counts := make([]int, 4)
	for _, p := range b.primary.strategy.(*maglev).table {
		counts[p]++
	}
	for i, c := range counts {
		want := float64(len(b.primary.strategy.(*maglev).table)) * float64(i+1) / 10
		if math.Abs(float64(c)-want)/want > 0.01 {
			t.Errorf("backend %d (weight %d): %d entries, want %.0f +- 1%%", i, i+1, c, want)
		}
	}
}

func TestMaglevTableSize(t *testing.T) {
	for _, size := range maglevSizes {
		for d := 2; d*d <= size; d++ {
			if size%d == 0 {
				t.Fatalf("table size %d is divisible by %d", size, d)
			}
		}
	}
	for _, c := range []struct{ n, size int }{{1, 65537}, {655, 65537}, {656, 131071}, {1000, 131071}, {5000, 524309}} {
		if got := maglevSize(c.n); got != c.size {
			t.Errorf("maglevSize(%d) = %d, want %d", c.n, got, c.size)
		}
	}
}

// An unavailable entry rehashes with the next seed; keys of other backends
// stay.
func TestMaglevRehash(t *testing.T) {
	b := mustNew(t, Config{Strategy: URLHash, HashMode: HashMaglev, Backends: numbered(10)})
	s := b.primary.strategy.(*maglev)
	counts := make([]int, 10)
	for _, k := range testKeys(20000) {
		h := maglevKey(k)
		first := int(s.table[slot(b.primary, h)])
		want := int(s.table[slot(b.primary, avalanche(h+hashP1))])
		for want == first { // the next seeds until another backend
			h = avalanche(h + hashP1)
			want = int(s.table[slot(b.primary, avalanche(h+hashP1))])
		}
		got, err := b.chooseFunc(k, func(i int) bool { return i != first })
		if err != nil || got != want {
			t.Fatalf("key %q without %d: %d %v, want %d", k, first, got, err, want)
		}
		if first == 3 {
			counts[got]++
		}
	}
	// Backend 3's keys spread over the other nine.
	for i, c := range counts {
		if i != 3 && c == 0 {
			t.Errorf("no key of backend 3 went to backend %d: %v", i, counts)
		}
	}
}

// Every process maps every key alike: no per-process seed. A child process
// (this test binary again) prints its mapping; it must equal ours.
func TestMaglevSameInEveryProcess(t *testing.T) {
	mapping := func() string {
		b := mustNew(t, Config{Strategy: URLHash, HashMode: HashMaglev, Backends: numbered(37)})
		var sb strings.Builder
		for _, k := range testKeys(500) {
			i, _ := b.choose(k)
			fmt.Fprintf(&sb, "%d ", i)
		}
		return sb.String()
	}
	if os.Getenv("LBPACK_MAGLEV_CHILD") == "1" {
		fmt.Print("MAPPING:" + mapping())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMaglevSameInEveryProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LBPACK_MAGLEV_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	s := string(out)
	i := strings.Index(s, "MAPPING:")
	if i < 0 {
		t.Fatalf("child printed no mapping: %q", s)
	}
	child := s[i+len("MAPPING:"):]
	child = child[:strings.LastIndexByte(child, ' ')+1]
	if child != mapping() {
		t.Fatal("a child process maps keys differently")
	}
}

// A key whose 21 candidates all land on refused backends goes to round robin.
func TestMaglevFallbackAfterTries(t *testing.T) {
	bs := numbered(3)
	bs[0].Weight = 30
	b := mustNew(t, Config{Strategy: URLHash, HashMode: HashMaglev, Backends: bs})
	s := b.primary.strategy.(*maglev)
	allOn0 := func(k string) bool {
		h := maglevKey(k)
		for try := 0; try <= hashTries; try++ {
			if s.table[slot(b.primary, h)] != 0 {
				return false
			}
			h = avalanche(h + hashP1)
		}
		return true
	}
	key := ""
	for i := 0; i < 100000 && key == ""; i++ {
		if k := "k" + fmt.Sprint(i); allOn0(k) {
			key = k
		}
	}
	if key == "" {
		t.Fatal("no key found")
	}
	var got []int
	for i := 0; i < 4; i++ {
		j, err := b.chooseFunc(key, func(i int) bool { return i != 0 })
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j)
	}
	if fmt.Sprint(got) != "[1 2 1 2]" {
		t.Errorf("key %q without backend 0: %v, want round robin [1 2 1 2]", key, got)
	}
}

// TestMaglevTableMatchesCreditRounds: the table is the one the credit rounds
// give when stepped member by member (the reference below, the build's
// former loop), for weights equal, spread and skewed.
func TestMaglevTableMatchesCreditRounds(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	for k := 0; k < 16; k++ {
		bs := numbered(2 + rng.Intn(200))
		for i := range bs {
			bs[i].Weight = 1 + rng.Intn([]int{1, 4, 100, MaxWeight}[k%4])
		}
		if k%3 == 0 {
			bs[rng.Intn(len(bs))].Weight = MaxWeight
		}
		b := mustNew(t, Config{Strategy: URLHash, HashMode: HashMaglev, Backends: bs})
		got := b.primary.strategy.(*maglev).table
		want := maglevByRounds(b.primary)
		for e := range want {
			if got[e] != want[e] {
				t.Fatalf("case %d (%d backends): entry %d is %d, rounds give %d", k, len(bs), e, got[e], want[e])
			}
		}
	}
}

// maglevByRounds builds the table round by round: each member earns its
// weight in credit per round and claims an entry per max-weight of it.
func maglevByRounds(g *group) []int32 {
	size := uint64(maglevSize(len(g.members)))
	n := len(g.members)
	cur, skip, credit := make([]uint64, n), make([]uint64, n), make([]int, n)
	maxWeight := 0
	for i, m := range g.members {
		cur[i] = hashString(m.addr, maglevSeedOffset) % size
		skip[i] = hashString(m.addr, maglevSeedSkip)%(size-1) + 1
		if m.weight > maxWeight {
			maxWeight = m.weight
		}
	}
	table := make([]int32, size)
	for i := range table {
		table[i] = -1
	}
	for filled := uint64(0); filled < size; {
		for i, m := range g.members {
			if credit[i] += m.weight; credit[i] < maxWeight {
				continue
			}
			credit[i] -= maxWeight
			c := cur[i]
			for table[c] >= 0 {
				c = (c + skip[i]) % size
			}
			table[c] = int32(i)
			cur[i] = (c + skip[i]) % size
			if filled++; filled == size {
				break
			}
		}
	}
	return table
}
