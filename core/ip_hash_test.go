package core

import (
	"fmt"
	"math/rand"
	"net"
	"strings"
	"testing"
)

// refIPHash is nginx's ip_hash loop written out the slow way, with net.ParseIP
// as the address parser; -1 means nginx falls back to round robin.
func refIPHash(key string, weights []int, ok func(int) bool) int {
	if len(weights) < 2 {
		return -1
	}
	addr := []byte{0, 0, 0}
	if ip := net.ParseIP(key); ip != nil {
		if strings.Contains(key, ":") {
			addr = ip.To16()
		} else {
			addr = ip.To4()[:3]
		}
	}
	total := 0
	for _, w := range weights {
		total += w
	}
	hash := 89
	for t := 0; t <= 20; t++ {
		for _, c := range addr {
			hash = (hash*113 + int(c)) % 6271
		}
		if p := refWalk(weights, hash%total); ok(p) {
			return p
		}
	}
	return -1
}

// Observed on nginx 1.22.1 (Debian), the client address set by the realip
// module from X-Real-IP:
//
//	upstream ipw    { ip_hash; 19001 weight=3; 19002; 19003 weight=2; 19004 }
//	upstream ipdown { ip_hash; 19001; 19002 down; 19003; 19004 }
var nginxObservedIPs = []struct {
	ip       string
	w, wDown int // port - 19000
}{
	{"203.0.113.7", 1, 1},
	{"198.51.100.23", 3, 1},
	{"192.0.2.1", 3, 4},
	{"10.1.2.3", 4, 1},
	{"8.8.8.8", 4, 4},
	{"1.2.3.4", 1, 4},
	{"172.16.254.9", 1, 4},
	{"100.64.0.77", 3, 4},
	{"2001:db8::1", 2, 1},
	{"2001:db8:85a3::8a2e:370:7334", 4, 4},
	{"::1", 1, 1},
	{"fe80::1", 3, 4},
	{"2a00:1450:4001:82b::200e", 3, 4},
	{"::ffff:192.0.2.1", 1, 1}, // IPv4-mapped: 16 bytes, unlike 192.0.2.1
}

func TestIPHashNginxObserved(t *testing.T) {
	w := mustNew(t, Config{Strategy: IPHash, Backends: nginxServers([]int{3, 1, 2, 1})})
	down := mustNew(t, Config{Strategy: IPHash, Backends: nginxServers([]int{1, 1, 1, 1}, 1)})
	retried := 0
	for _, c := range nginxObservedIPs {
		if got, want := pickAddr(t, w, c.ip), fmt.Sprintf("127.0.0.1:%d", 19000+c.w); got != want {
			t.Errorf("ip_hash %s: %s, nginx chose %s", c.ip, got, want)
		}
		if got, want := pickAddr(t, down, c.ip), fmt.Sprintf("127.0.0.1:%d", 19000+c.wDown); got != want {
			t.Errorf("ip_hash %s with 19002 down: %s, nginx chose %s", c.ip, got, want)
		}
		if refIPHash(c.ip, []int{1, 1, 1, 1}, func(int) bool { return true }) == 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Fatal("no observed client hashed to the down server first: the retry path is not covered")
	}
}

func TestIPHashMatchesNginxModel(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	var ips []string
	for i := 0; i < 200; i++ {
		ips = append(ips, fmt.Sprintf("%d.%d.%d.%d", rng.Intn(256), rng.Intn(256), rng.Intn(256), rng.Intn(256)))
		ips = append(ips, fmt.Sprintf("2001:db8:%x:%x::%x", rng.Intn(65536), rng.Intn(65536), rng.Intn(65536)))
	}
	ips = append(ips, "", "not-an-ip", "::ffff:10.0.0.1", "fe80::1%eth0")
	for set := 0; set < 60; set++ {
		bs, weights, avail := randomHashSet(rng, 12, 9)
		b := mustNew(t, Config{Strategy: IPHash, Backends: bs})
		checkAgainstRef(t, b, ips, avail, func(k string, ok func(int) bool) int {
			return refIPHash(strings.SplitN(k, "%", 2)[0], weights, ok)
		})
	}
}

func TestIPHashKeys(t *testing.T) {
	b := mustNew(t, Config{Strategy: IPHash, Backends: numbered(97)})
	same := func(a, c string) {
		t.Helper()
		if x, y := pickAddr(t, b, a), pickAddr(t, b, c); x != y {
			t.Errorf("%q -> %s but %q -> %s; want the same backend", a, x, c, y)
		}
	}
	// An IPv4 client is hashed by its /24.
	same("192.0.2.1", "192.0.2.254")
	same("198.51.100.7", "198.51.100.200")
	// A key that is not an address is hashed as nginx hashes a client
	// without one: three zero bytes, the same as 0.0.0.x.
	same("", "0.0.0.1")
	same("not-an-ip", "0.0.0.9")
	// The zone is not part of the address.
	same("fe80::1%eth0", "fe80::1")
	// IPv6 clients are hashed by all 16 bytes: across 100 addresses that
	// differ only in the last byte, more than one backend is used.
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		seen[pickAddr(t, b, fmt.Sprintf("2001:db8::%x", i))] = true
	}
	if len(seen) < 2 {
		t.Errorf("IPv6 clients differing in the last byte all went to one backend")
	}
}

func TestIPHashFallbackAfterTries(t *testing.T) {
	// Backend 0 weighs 30 of 32; a client whose 21 candidates all land on it
	// goes to round robin between 1 and 2 when 0 is refused.
	weights := []int{30, 1, 1}
	bs := numbered(3)
	for i := range bs {
		bs[i].Weight = weights[i]
	}
	without0 := func(i int) bool { return i != 0 }
	key := ""
	for i := 0; i < 1<<16 && key == ""; i++ {
		if k := fmt.Sprintf("10.%d.%d.1", i>>8, i&0xff); refIPHash(k, weights, without0) < 0 {
			key = k
		}
	}
	if key == "" {
		t.Fatal("no client found")
	}
	b := mustNew(t, Config{Strategy: IPHash, Backends: bs})
	var got []int
	for i := 0; i < 4; i++ {
		j, err := b.chooseFunc(key, without0)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j)
	}
	if fmt.Sprint(got) != "[1 2 1 2]" {
		t.Errorf("client %s without backend 0: %v, want round robin [1 2 1 2]", key, got)
	}
}

func TestIPHashSingleBackend(t *testing.T) {
	b := mustNew(t, Config{Strategy: IPHash, Backends: numbered(1)})
	if i, err := b.choose("192.0.2.1"); i != 0 || err != nil {
		t.Errorf("one backend: %d %v", i, err)
	}
	bs := numbered(1)
	bs[0].Down = true
	b = mustNew(t, Config{Strategy: IPHash, Backends: bs})
	if _, err := b.choose("192.0.2.1"); err != ErrNoBackend {
		t.Errorf("one down backend: %v, want ErrNoBackend", err)
	}
}

// The interpreter's quick path adds ipv4Hi, ipv4Mid and the third octet and
// reads the quick-path table there without a modulo: every such sum must
// stay below ipHashNone and be nginx's hash modulo 6271, and the table must
// repeat its first 6271 entries past them, with -1 at ipHashNone.
func TestIPv4HashTerms(t *testing.T) {
	for q0 := 0; q0 < 256; q0++ {
		for q1 := 0; q1 < 256; q1++ {
			for _, q2 := range []int{0, 1, 128, 255} {
				sum := ipv4Hi[q0] + ipv4Mid[q1] + q2
				want := (ipHashInit*ipHashMul*ipHashMul*ipHashMul + q0*ipHashMul*ipHashMul + q1*ipHashMul + q2) % ipHashMod
				if sum >= ipHashNone || sum%ipHashMod != want {
					t.Fatalf("%d.%d.%d: sum %d (mod %d: %d), want below %d and %d", q0, q1, q2, sum, ipHashMod, sum%ipHashMod, ipHashNone, want)
				}
			}
		}
	}
	b := mustNew(t, Config{Strategy: IPHash, Backends: []Backend{{Address: "a:1", Weight: 3}, {Address: "b:1", Weight: 1, Down: true}, {Address: "c:1", Weight: 2}}})
	look := b.primary.look
	if len(look) != ipHashNone+1 || look[ipHashNone] != -1 {
		t.Fatalf("quick-path table: %d entries, last %d; want %d, last -1", len(look), look[len(look)-1], ipHashNone+1)
	}
	for h := ipHashMod; h < ipHashNone; h++ {
		if look[h] != look[h%ipHashMod] {
			t.Fatalf("quick-path table entry %d is %d, entry %d is %d", h, look[h], h%ipHashMod, look[h%ipHashMod])
		}
	}
}
