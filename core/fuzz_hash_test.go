package core

import (
	"bytes"
	"errors"
	"math/rand"
	"net"
	"net/netip"
	"strings"
	"testing"
)

var fuzzHashModes = []struct{ strategy, mode string }{
	{IPHash, ""}, {URLHash, HashModulo}, {URLHash, HashKetama}, {URLHash, HashMaglev}, {URLHash, HashBounded},
}

// FuzzHashPick builds a hash balancer from random backends and picks with
// random keys and availability: never a panic; always an available, not-down
// backend, or ErrNoBackend exactly when there is none.
func FuzzHashPick(f *testing.F) {
	f.Add(uint8(0), uint8(4), int64(1), "203.0.113.7", uint64(0xff))
	f.Add(uint8(0), uint8(1), int64(2), "2001:db8::1", uint64(0))
	f.Add(uint8(0), uint8(9), int64(3), "::ffff:1.2.3.4%x", uint64(1<<8))
	f.Add(uint8(1), uint8(7), int64(4), "/index.html", uint64(0x55))
	f.Add(uint8(1), uint8(3), int64(5), "", uint64(0x6))
	f.Add(uint8(2), uint8(12), int64(6), "session-0001", uint64(0xfff0))
	f.Add(uint8(2), uint8(2), int64(7), "\x00\xff", uint64(1))
	f.Add(uint8(3), uint8(30), int64(8), "0123456789abcdef0123456789abcdef", uint64(1<<29))
	f.Add(uint8(3), uint8(5), int64(9), "k", uint64(0))
	f.Add(uint8(4), uint8(10), int64(10), "/hot", uint64(0x3ff))
	f.Add(uint8(4), uint8(40), int64(11), "cart", uint64(0xf0f0f0f0))
	f.Fuzz(func(t *testing.T, mode, n uint8, seed int64, key string, mask uint64) {
		c := fuzzHashModes[int(mode)%len(fuzzHashModes)]
		rng := rand.New(rand.NewSource(seed))
		bs := numbered(1 + int(n)%40)
		for i := range bs {
			bs[i].Weight = 1 + rng.Intn(10)
			bs[i].Down = rng.Intn(5) == 0
		}
		b, err := New(Config{Strategy: c.strategy, HashMode: c.mode, Backends: bs})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		for i := range bs {
			for k := rng.Intn(4); k > 0; k-- {
				b.hold(i)
			}
		}
		avail := func(i int) bool { return mask>>(uint(i)%64)&1 == 1 }
		anyUp, anyAvail := false, false
		for i := range bs {
			anyUp = anyUp || !bs[i].Down
			anyAvail = anyAvail || (!bs[i].Down && avail(i))
		}
		check := func(i int, err error, ok func(int) bool, any bool) {
			if err != nil {
				if !errors.Is(err, ErrNoBackend) || any {
					t.Fatalf("%s %s key %q: %v (some backend available: %v)", c.strategy, c.mode, key, err, any)
				}
				return
			}
			if i < 0 || i >= len(bs) || bs[i].Down || !ok(i) {
				t.Fatalf("%s %s key %q: picked %d, not available", c.strategy, c.mode, key, i)
			}
		}
		for r := 0; r < 3; r++ {
			i, err := b.choose(key)
			check(i, err, func(int) bool { return true }, anyUp)
			i, err = b.chooseFunc(key, avail)
			check(i, err, avail, anyAvail)
		}
	})
}

// FuzzParseIP checks the allocation-free address parser against net/netip,
// and the interpreter's reading (pickIPHashQuick: net.ParseIP, IPv4 when the
// text has no ':') against both.
func FuzzParseIP(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "01.2.3.4", "1.2.3", "256.1.1.1", "::", "::1", "1::", "1:2:3:4:5:6:7:8",
		"1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:8::", "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4",
		"fe80::1", ":1", "1:", "1:::2", "12345::", "2001:DB8::AbCd", "::1.2.3.4", "", "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, '%') >= 0 {
			return // zones are cut off before parsing
		}
		var addr [16]byte
		got := parseIP(s, &addr)
		ip, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			if got != 0 {
				t.Fatalf("parseIP(%q) = %d, netip: %v", s, got, err)
			}
		case ip.Is4():
			if a := ip.As4(); got != 4 || [4]byte{addr[0], addr[1], addr[2], addr[3]} != a {
				t.Fatalf("parseIP(%q) = %d %v, netip %v", s, got, addr[:4], a)
			}
		default:
			if got != 16 || addr != ip.As16() {
				t.Fatalf("parseIP(%q) = %d %v, netip %v", s, got, addr, ip.As16())
			}
		}
		parsed := net.ParseIP(s)
		switch {
		case (parsed != nil) != (got != 0):
			t.Fatalf("net.ParseIP(%q) = %v, parseIP %d", s, parsed, got)
		case got == 4 && (strings.IndexByte(s, ':') >= 0 || !bytes.Equal(parsed[12:], addr[:4])):
			t.Fatalf("net.ParseIP(%q) = %v: not the IPv4 address %v", s, parsed, addr[:4])
		case got == 16 && (strings.IndexByte(s, ':') < 0 || !bytes.Equal(parsed, addr[:])):
			t.Fatalf("net.ParseIP(%q) = %v: not the IPv6 address %v", s, parsed, addr)
		}
	})
}
