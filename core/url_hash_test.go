package core

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Helpers shared by the hash strategies' tests.

// nginxServers builds the backends of the upstreams used to observe nginx
// (nginx 1.22.1, Debian): servers 127.0.0.1:19001.. in order, with weights and
// down flags.
func nginxServers(weights []int, down ...int) []Backend {
	bs := make([]Backend, len(weights))
	for i, w := range weights {
		bs[i] = Backend{Address: fmt.Sprintf("127.0.0.1:%d", 19001+i), Weight: w}
	}
	for _, d := range down {
		bs[d].Down = true
	}
	return bs
}

// numbered returns n backends with weight 1 and distinct addresses.
func numbered(n int) []Backend {
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Address: fmt.Sprintf("10.%d.%d.%d:8080", i>>16&0xff, i>>8&0xff, i&0xff), Weight: 1}
	}
	return bs
}

func pickAddr(tb testing.TB, b *Balancer, key string) string {
	tb.Helper()
	i, err := b.choose(key)
	if err != nil {
		tb.Fatalf("Pick(%q): %v", key, err)
	}
	return b.Backend(i).Address
}

// testKeys returns n distinct keys of the kind url_hash sees.
func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "/static/" + strconv.Itoa(i) + "/asset.js"
	}
	return keys
}

// refWalk is nginx's weight walk as nginx writes it: O(n).
func refWalk(weights []int, w int) int {
	p := 0
	for w >= weights[p] {
		w -= weights[p]
		p++
	}
	return p
}

// refModulo is nginx's plain "hash $key" written out the slow way; it
// returns the chosen position, or -1 where nginx falls back to round robin.
func refModulo(key string, weights []int, ok func(int) bool) int {
	if len(weights) < 2 || key == "" {
		return -1
	}
	total := 0
	for _, w := range weights {
		total += w
	}
	var hash uint32
	for t := 0; t <= 20; t++ {
		in := key
		if t > 0 {
			in = strconv.Itoa(t) + key
		}
		hash += crc32.ChecksumIEEE([]byte(in)) >> 16 & 0x7fff
		p := refWalk(weights, int(hash%uint32(total)))
		if ok(p) {
			return p
		}
	}
	return -1
}

// refRing is nginx's ketama ring built the slow way: every point, a stable
// comparison sort, duplicates dropped.
func refRing(addrs []string, weights []int) (points []uint32, owners []int) {
	type pt struct {
		h   uint32
		own int
	}
	var pts []pt
	for i, a := range addrs {
		cut := strings.LastIndexByte(a, ':')
		host, port := a[:cut], a[cut+1:]
		prefix := []byte(host + "\x00" + port)
		prev := make([]byte, 4)
		for j := 0; j < 160*weights[i]; j++ {
			h := crc32.ChecksumIEEE(append(append([]byte{}, prefix...), prev...))
			pts = append(pts, pt{h, i})
			prev = []byte{byte(h), byte(h >> 8), byte(h >> 16), byte(h >> 24)}
		}
	}
	sort.SliceStable(pts, func(a, b int) bool { return pts[a].h < pts[b].h })
	for i, p := range pts {
		if i > 0 && p.h == pts[i-1].h {
			continue
		}
		points = append(points, p.h)
		owners = append(owners, p.own)
	}
	return points, owners
}

// refKetama looks a key up on a reference ring by linear search; -1 means
// round robin.
func refKetama(key string, points []uint32, owners []int, nMembers int, ok func(int) bool) int {
	if nMembers < 2 || key == "" {
		return -1
	}
	h := crc32.ChecksumIEEE([]byte(key))
	i := 0
	for i < len(points) && points[i] < h {
		i++
	}
	for t := 0; t <= 20; t++ {
		p := owners[(i+t)%len(points)]
		if ok(p) {
			return p
		}
	}
	return -1
}

func TestCRCMatchesIEEE(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for n := 0; n < 200; n++ {
		buf := make([]byte, n)
		rng.Read(buf)
		if got, want := crcString(string(buf)), crc32.ChecksumIEEE(buf); got != want {
			t.Fatalf("len %d: crcString = %08x, crc32.ChecksumIEEE = %08x", n, got, want)
		}
	}
	for r := 1; r <= hashTries; r++ {
		if got, want := ^crcUpdate(rehashCRC[r], "key"), crc32.ChecksumIEEE([]byte(strconv.Itoa(r)+"key")); got != want {
			t.Fatalf("rehash %d: %08x, want %08x", r, got, want)
		}
	}
}

func TestWeightWalkMatchesNginx(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, maxW := range []int{5, 100, 20000} { // the last mostly exceeds walkTableMax
		for set := 0; set < 20; set++ {
			n := 1 + rng.Intn(40)
			bs := numbered(n)
			weights := make([]int, n)
			for i := range bs {
				bs[i].Weight = 1 + rng.Intn(maxW)
				weights[i] = bs[i].Weight
			}
			b := mustNew(t, Config{Strategy: URLHash, HashMode: HashModulo, Backends: bs})
			ww := newWeightWalk(b.primary)
			if (ww.table == nil) != (b.primary.totalWeight > walkTableMax) {
				t.Fatalf("total %d: table %v", b.primary.totalWeight, ww.table != nil)
			}
			for w := int64(0); w < b.primary.totalWeight; w++ {
				if got, want := walkFind(&ww, w), refWalk(weights, int(w)); got != want {
					t.Fatalf("weights %v, w=%d: %d, want %d", weights, w, got, want)
				}
			}
		}
	}
}

// Observed on nginx 1.22.1 (Debian) with "hash $arg_k" and "hash $arg_k
// consistent" upstreams on loopback: the server each key went to.
var nginxObservedKeys = []struct {
	key                       string
	mod, modDown, ket, ketDwn int // port - 19000
}{
	{"a", 3, 4, 2, 4},
	{"abc", 3, 1, 4, 4},
	{"user-42", 2, 3, 2, 1},
	{"index.html", 3, 4, 5, 5},
	{"session-0001", 4, 4, 5, 5},
	{"session-0002", 3, 3, 2, 4},
	{"cart-7f3a", 3, 4, 5, 5},
	{"0123456789abcdef0123456789abcdef", 3, 3, 5, 5},
	{"k8s-pod-12", 3, 3, 1, 1},
	{"hello_world", 4, 3, 2, 5},
	{"X", 4, 3, 2, 3},
	{"Zz9", 3, 4, 3, 3},
	{"/img/logo.png", 3, 4, 4, 4},
}

func TestModuloNginxObserved(t *testing.T) {
	// upstream hmod { hash $arg_k; 19001 weight=2; 19002; 19003 weight=3; 19004 }
	// upstream hmoddown { hash $arg_k; 19001; 19002 down; 19003; 19004 }
	mod := mustNew(t, Config{Strategy: URLHash, HashMode: HashModulo, Backends: nginxServers([]int{2, 1, 3, 1})})
	down := mustNew(t, Config{Strategy: URLHash, HashMode: HashModulo, Backends: nginxServers([]int{1, 1, 1, 1}, 1)})
	for _, c := range nginxObservedKeys {
		if got, want := pickAddr(t, mod, c.key), fmt.Sprintf("127.0.0.1:%d", 19000+c.mod); got != want {
			t.Errorf("hash %q: %s, nginx chose %s", c.key, got, want)
		}
		if got, want := pickAddr(t, down, c.key), fmt.Sprintf("127.0.0.1:%d", 19000+c.modDown); got != want {
			t.Errorf("hash %q with 19002 down: %s, nginx chose %s", c.key, got, want)
		}
	}
}

func TestKetamaNginxObserved(t *testing.T) {
	// upstream hket { hash $arg_k consistent; 19001; 19002 weight=2; 19003; 19004; 19005 }
	// upstream hketdown { hash $arg_k consistent; 19001; 19002 down; 19003; 19004; 19005 }
	ket := mustNew(t, Config{Strategy: URLHash, HashMode: HashKetama, Backends: nginxServers([]int{1, 2, 1, 1, 1})})
	down := mustNew(t, Config{Strategy: URLHash, Backends: nginxServers([]int{1, 1, 1, 1, 1}, 1)}) // ketama is the default
	for _, c := range nginxObservedKeys {
		if got, want := pickAddr(t, ket, c.key), fmt.Sprintf("127.0.0.1:%d", 19000+c.ket); got != want {
			t.Errorf("consistent %q: %s, nginx chose %s", c.key, got, want)
		}
		if got, want := pickAddr(t, down, c.key), fmt.Sprintf("127.0.0.1:%d", 19000+c.ketDwn); got != want {
			t.Errorf("consistent %q with 19002 down: %s, nginx chose %s", c.key, got, want)
		}
	}
}

func TestKetamaSplit(t *testing.T) {
	for _, c := range []struct{ in, host, port string }{
		{"127.0.0.1:8080", "127.0.0.1", "8080"},
		{"[::1]:80", "[::1]", "80"},
		{"example.com:443", "example.com", "443"},
		{"example.com", "example.com", ""}, // nginx: no PORT when none is written
		{"[::1]", "[::1]", ""},
		{"host:", "host", ""},
		{"8080", "8080", ""},
		{"a:b1", "a:b1", ""},
	} {
		host, port := ketamaSplit(c.in)
		if host != c.host || port != c.port {
			t.Errorf("ketamaSplit(%q) = %q, %q; want %q, %q", c.in, host, port, c.host, c.port)
		}
	}
}

// randomHashSet returns a random backend set and a random availability.
func randomHashSet(rng *rand.Rand, maxN, maxW int) ([]Backend, []int, []bool) {
	n := 1 + rng.Intn(maxN)
	bs := numbered(n)
	weights := make([]int, n)
	avail := make([]bool, n)
	for i := range bs {
		bs[i].Weight = 1 + rng.Intn(maxW)
		weights[i] = bs[i].Weight
		bs[i].Down = rng.Intn(6) == 0
		avail[i] = !bs[i].Down && rng.Intn(4) != 0
	}
	return bs, weights, avail
}

// checkAgainstRef compares a balancer with a reference model on keys under
// an availability; where the model says round robin, the pick must be an
// available backend, or ErrNoBackend when there is none.
func checkAgainstRef(t *testing.T, b *Balancer, keys []string, avail []bool, ref func(key string, ok func(int) bool) int) {
	t.Helper()
	ok := func(i int) bool { return avail[i] }
	anyOK := false
	for _, a := range avail {
		anyOK = anyOK || a
	}
	for _, k := range keys {
		got, err := b.chooseFunc(k, ok)
		want := ref(k, ok)
		switch {
		case want >= 0 && (err != nil || got != want):
			t.Fatalf("key %q avail %v: got %d %v, want %d", k, avail, got, err, want)
		case want < 0 && anyOK && (err != nil || !avail[got]):
			t.Fatalf("key %q avail %v: round robin gave %d %v", k, avail, got, err)
		case want < 0 && !anyOK && !errors.Is(err, ErrNoBackend):
			t.Fatalf("key %q: nothing available, got %d %v", k, got, err)
		}
	}
}

func TestModuloMatchesNginxModel(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	keys := append(testKeys(300), "", "x")
	for set := 0; set < 60; set++ {
		bs, weights, avail := randomHashSet(rng, 12, 9)
		b := mustNew(t, Config{Strategy: URLHash, HashMode: HashModulo, Backends: bs})
		checkAgainstRef(t, b, keys, avail, func(k string, ok func(int) bool) int { return refModulo(k, weights, ok) })
	}
}

func TestKetamaMatchesNginxModel(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	keys := append(testKeys(300), "", "x")
	for set := 0; set < 40; set++ {
		bs, weights, avail := randomHashSet(rng, 12, 4)
		addrs := make([]string, len(bs))
		for i := range bs {
			addrs[i] = bs[i].Address
		}
		points, owners := refRing(addrs, weights)
		b := mustNew(t, Config{Strategy: URLHash, HashMode: HashKetama, Backends: bs})
		ring := b.primary.strategy.(*ketama).ring
		if len(ring.keys) != len(points) {
			t.Fatalf("ring has %d points, nginx's %d", len(ring.keys), len(points))
		}
		for i := range points {
			if p, o := uint32(ring.keys[i]>>32), int(uint32(ring.keys[i])); p != points[i] || o != owners[i] {
				t.Fatalf("point %d: %08x of %d, nginx's %08x of %d", i, p, o, points[i], owners[i])
			}
		}
		checkAgainstRef(t, b, keys, avail, func(k string, ok func(int) bool) int {
			return refKetama(k, points, owners, len(bs), ok)
		})
	}
}

// Keys hashing above the last point wrap to the first; keys equal to a point
// go to that point.
func TestKetamaRingEdges(t *testing.T) {
	b := mustNew(t, Config{Strategy: URLHash, Backends: numbered(3)})
	ring := b.primary.strategy.(*ketama).ring
	last := len(ring.keys) - 1
	point := func(i int) uint32 { return uint32(ring.keys[i] >> 32) }
	for _, c := range []struct {
		h    uint32
		want int
	}{
		{0, 0},
		{point(0), 0},
		{point(0) + 1, 1},
		{point(last), last},
		{point(last) + 1, 0},
		{math.MaxUint32, 0},
	} {
		if c.h == math.MaxUint32 && point(last) == math.MaxUint32 {
			continue
		}
		if got := ringFind(ring, c.h); got != c.want {
			t.Errorf("find(%08x) = %d, want %d", c.h, got, c.want)
		}
	}
}

// Marking a backend down moves only the keys it had.
func TestHashDownMovesOnlyItsKeys(t *testing.T) {
	keys := testKeys(20000)
	for _, c := range []struct{ strategy, mode string }{
		{IPHash, ""}, {URLHash, HashModulo}, {URLHash, HashKetama}, {URLHash, HashMaglev},
	} {
		t.Run(c.strategy+"/"+c.mode, func(t *testing.T) {
			bs := numbered(7)
			bs[2].Weight = 3
			all := mustNew(t, Config{Strategy: c.strategy, HashMode: c.mode, Backends: bs})
			bs[4].Down = true
			down := mustNew(t, Config{Strategy: c.strategy, HashMode: c.mode, Backends: bs})
			moved := 0
			for i, k := range keys {
				if c.strategy == IPHash {
					k = fmt.Sprintf("%d.%d.%d.1", 10+i>>16, i>>8&0xff, i&0xff)
				}
				before, _ := all.choose(k)
				after, _ := down.choose(k)
				if before != after {
					if before != 4 {
						t.Fatalf("key %q moved from %d to %d though only 4 went down", k, before, after)
					}
					moved++
				}
				if after == 4 {
					t.Fatalf("key %q went to the down backend", k)
				}
			}
			if moved == 0 {
				t.Fatalf("no key was on backend 4")
			}
		})
	}
}

// nginx sends an empty key, or a single server, to round robin.
func TestHashRoundRobinCases(t *testing.T) {
	for _, mode := range []string{HashModulo, HashKetama, HashMaglev, HashBounded} {
		b := mustNew(t, Config{Strategy: URLHash, HashMode: mode, Backends: numbered(3)})
		var got []int
		for i := 0; i < 6; i++ {
			j, err := b.choose("")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, j)
		}
		if fmt.Sprint(got) != "[0 1 2 0 1 2]" {
			t.Errorf("%s, empty key: %v, want round robin 0 1 2 0 1 2", mode, got)
		}
		one := mustNew(t, Config{Strategy: URLHash, HashMode: mode, Backends: numbered(1)})
		if j, err := one.choose("k"); j != 0 || err != nil {
			t.Errorf("%s, one backend: %d %v", mode, j, err)
		}
		if _, err := one.chooseFunc("k", func(int) bool { return false }); !errors.Is(err, ErrNoBackend) {
			t.Errorf("%s, one refused backend: %v, want ErrNoBackend", mode, err)
		}
	}
}

// After 21 unavailable candidates, nginx's hash methods hand the request to
// round robin, which shares it out among the available backends.
func TestHashFallbackAfterTries(t *testing.T) {
	// Backend 0 weighs 30 of 32: find keys whose 21 candidates all land on
	// it, by the reference models; refusing 0 must then give round robin
	// between 1 and 2 (equal weights: 1, 2, 1, 2), not a fixed backend.
	weights := []int{30, 1, 1}
	bs := numbered(3)
	for i := range bs {
		bs[i].Weight = weights[i]
	}
	without0 := func(i int) bool { return i != 0 }
	addrs := []string{bs[0].Address, bs[1].Address, bs[2].Address}
	points, owners := refRing(addrs, weights)
	cases := []struct {
		mode string
		ref  func(key string) int
	}{
		{HashModulo, func(k string) int { return refModulo(k, weights, without0) }},
		{HashKetama, func(k string) int { return refKetama(k, points, owners, 3, without0) }},
	}
	for _, c := range cases {
		var key string
		for i := 0; i < 100000 && key == ""; i++ {
			if k := "k" + strconv.Itoa(i); c.ref(k) < 0 {
				key = k
			}
		}
		if key == "" {
			t.Fatalf("%s: no key found", c.mode)
		}
		b := mustNew(t, Config{Strategy: URLHash, HashMode: c.mode, Backends: bs})
		var got []int
		for i := 0; i < 4; i++ {
			j, err := b.chooseFunc(key, without0)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, j)
		}
		if fmt.Sprint(got) != "[1 2 1 2]" {
			t.Errorf("%s key %q without backend 0: %v, want round robin [1 2 1 2]", c.mode, key, got)
		}
	}
}

// A key whose ketama point is unavailable goes to the next point's backend.
func TestKetamaNextPoint(t *testing.T) {
	b := mustNew(t, Config{Strategy: URLHash, Backends: numbered(5)})
	ring := b.primary.strategy.(*ketama).ring
	owner := func(i int) int { return int(uint32(ring.keys[i])) }
	for _, k := range testKeys(200) {
		i := ringFind(ring, crcString(k))
		first := owner(i)
		next := i
		for owner(next) == first {
			next = (next + 1) % len(ring.keys)
		}
		got, err := b.chooseFunc(k, func(j int) bool { return j != first })
		if err != nil || got != owner(next) {
			t.Fatalf("key %q: %d %v, want the next point's %d", k, got, err, owner(next))
		}
	}
}

func TestHashConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Strategy: URLHash, HashMode: "rendezvous", Backends: numbered(2)}, `hash_mode "rendezvous"`},
		{Config{Strategy: URLHash, HashMode: HashBounded, LoadFactor: 1, Backends: numbered(2)}, "load_factor 1"},
		{Config{Strategy: URLHash, HashMode: HashBounded, LoadFactor: 0.5, Backends: numbered(2)}, "load_factor 0.5"},
		{Config{Strategy: URLHash, HashMode: HashBounded, LoadFactor: -2, Backends: numbered(2)}, "load_factor -2"},
		{Config{Strategy: URLHash, HashMode: HashBounded, LoadFactor: math.NaN(), Backends: numbered(2)}, "load_factor NaN"},
		{Config{Strategy: URLHash, HashMode: HashBounded, LoadFactor: math.Inf(1), Backends: numbered(2)}, "load_factor +Inf"},
		{Config{Strategy: URLHash, HashMode: HashMaglev, LoadFactor: 1.5, Backends: numbered(2)}, "load_factor 1.5"},
		{Config{Strategy: IPHash, HashMode: HashMaglev, Backends: numbered(2)}, `hash_mode "maglev"`},
		{Config{Strategy: URLHash, Backends: []Backend{{Address: "a:1", Weight: 1}, {Address: "b:1", Weight: 1, Backup: true}}}, "backends[1].backup"},
		{Config{Strategy: IPHash, Backends: []Backend{{Address: "a:1", Weight: 1}, {Address: "b:1", Weight: 1, Backup: true}}}, "backends[1].backup"},
		{Config{Strategy: URLHash, Backends: []Backend{{Address: "a:1", Weight: 60000}, {Address: "b:1", Weight: 6000}}}, "backends[1].weight 6000"},
		{Config{Strategy: URLHash, HashMode: HashBounded, Backends: []Backend{{Address: "a:1", Weight: 70000}}}, "backends[0].weight 70000"},
	} {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%s/%s): %v, want an error naming %s", c.cfg.Strategy, c.cfg.HashMode, err, c.want)
		}
	}
	if _, err := New(Config{Strategy: URLHash, HashMode: HashBounded, LoadFactor: 1.01, Backends: numbered(2)}); err != nil {
		t.Errorf("load factor 1.01: %v", err)
	}
}

// Choices from many goroutines at once give what one goroutine gets (run it
// under -race: the tables are read-only once built). The choice alone,
// with no request begun: bounded's caps would otherwise see the other
// goroutines' requests in flight, so bounded's is its full pick's (its
// table's read is ketama's, and TestSteadyMatchesFullPick holds the two
// equal).
func TestHashConcurrentPicks(t *testing.T) {
	keys := testKeys(2000)
	for _, c := range fuzzHashModes {
		b := mustNew(t, Config{Strategy: c.strategy, HashMode: c.mode, Backends: numbered(30)})
		choose := func(k string) int { return pickKey(b, k) }
		if c.mode == HashBounded {
			choose = func(k string) int { return pickFrom(b, request{key: k, b: b}) }
		}
		want := make([]int, len(keys))
		for i, k := range keys {
			want[i] = choose(k)
		}
		errs := make(chan string, 8)
		for w := 0; w < 8; w++ {
			go func() {
				for i, k := range keys {
					if got := choose(k); got != want[i] {
						errs <- fmt.Sprintf("%s %s key %q: %d, want %d", c.strategy, c.mode, k, got, want[i])
						return
					}
				}
				errs <- ""
			}()
		}
		for w := 0; w < 8; w++ {
			if e := <-errs; e != "" {
				t.Error(e)
			}
		}
	}
}

func TestURLHashPicksAllocateNothing(t *testing.T) {
	key := "0123456789abcdef0123456789abcdef"
	for _, c := range []struct{ strategy, mode string }{
		{IPHash, ""}, {URLHash, HashModulo}, {URLHash, HashKetama}, {URLHash, HashMaglev}, {URLHash, HashBounded},
	} {
		b := mustNew(t, Config{Strategy: c.strategy, HashMode: c.mode, Backends: numbered(50)})
		k := key
		if c.strategy == IPHash {
			k = "2001:db8::7"
		}
		avail := func(i int) bool { return i%3 != 0 }
		if n := testing.AllocsPerRun(200, func() {
			b.choose(k)
			b.chooseFunc(k, avail)
			b.choose("")
		}); n != 0 {
			t.Errorf("%s %s: %v allocations per pick", c.strategy, c.mode, n)
		}
	}
}

// benchKeys returns 4096 distinct keys of 32 bytes, so that lookups touch
// the tables as real traffic does rather than one cached entry.
func benchKeys() []string {
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("/api/v1/items/%08x/details.js", uint32(i)*2654435761)[:32]
	}
	return keys
}

// benchIPs returns 4096 distinct IPv4 and 4096 distinct IPv6 client addresses.
func benchIPs() (v4, v6 []string) {
	v4, v6 = make([]string, 4096), make([]string, 4096)
	for i := range v4 {
		v4[i] = fmt.Sprintf("198.%d.%d.%d", 18+i>>10, i>>2&0xff, 1+i*37%254)
		v6[i] = fmt.Sprintf("2001:db8:85a3:%x::8a2e:370:%x", i, uint16(i*40503))
	}
	return v4, v6
}

// BenchmarkHashPick measures one pick, key hashing included, for each hash
// strategy at n = 10, 100 and 1000 equal backends, on one goroutine and in
// parallel: url_hash with 32-byte keys, ip_hash with IPv4 and IPv6 clients.
func BenchmarkHashPick(b *testing.B) {
	keys := benchKeys()
	v4, v6 := benchIPs()
	for _, c := range []struct{ name, strategy, mode string }{
		{"ip_hash", IPHash, ""},
		{"ip_hash_v6", IPHash, ""},
		{"modulo", URLHash, HashModulo},
		{"ketama", URLHash, HashKetama},
		{"maglev", URLHash, HashMaglev},
		{"bounded", URLHash, HashBounded},
	} {
		ks := keys
		switch c.name {
		case "ip_hash":
			ks = v4
		case "ip_hash_v6":
			ks = v6
		}
		for _, n := range []int{10, 100, 1000} {
			bal := mustNew(b, Config{Strategy: c.strategy, HashMode: c.mode, Backends: numbered(n)})
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					bal.choose(ks[i&4095])
				}
			})
			b.Run(fmt.Sprintf("%s/n=%d/parallel", c.name, n), func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for i := 0; pb.Next(); i++ {
						bal.choose(ks[i&4095])
					}
				})
			})
		}
	}
}

// BenchmarkHashBuild measures building the tables for 1000 equal backends.
func BenchmarkHashBuild(b *testing.B) {
	bs := numbered(1000)
	for _, mode := range []string{HashMaglev, HashKetama} {
		b.Run(mode+"/n=1000", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				mustNew(b, Config{Strategy: URLHash, HashMode: mode, Backends: bs})
			}
		})
	}
}
