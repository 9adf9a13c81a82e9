package core

import (
	"net"
	"strings"
)

// ip_hash is nginx's ip_hash (ngx_http_upstream_ip_hash_module), choice for
// choice: the key is the client's IP address; an IPv4 client is hashed by its
// first three octets (so a /24 shares a backend), an IPv6 client by all
// sixteen bytes.
//
//	hash = 89; for each byte b: hash = (hash*113 + b) % 6271
//	w = hash % total weight, then nginx's weight walk over every member
//
// An unavailable choice feeds the address bytes into the running hash again
// (up to 20 more times), then nginx's round robin takes over. Down members
// keep their place in the walk, so marking one down moves only its clients.

func init() {
	register(IPHash, strategyInfo{hashed: true, build: buildIPHash})
}

// nginx's ip_hash constants.
const (
	ipHashInit = 89
	ipHashMul  = 113
	ipHashMod  = 6271
)

type ipHash struct {
	// byHash maps every possible hash value (0..6270) straight to the member
	// nginx's walk reaches for it, so a candidate costs one load.
	byHash []int32
}

// ipv4Hi[q] and ipv4Mid[q] are the terms of nginx's first hash of an IPv4
// address (89*113^3 + q0*113^2 + q1*113 + q2, modulo 6271: see ipv4Hash) for
// a first and a second octet q, each reduced modulo 6271. With the third
// octet added they sum to below ipHashNone, and the quick-path table repeats
// byHash past 6270, so that no modulo is needed: under the interpreter two
// loads cost less than the conversions, products and modulo they replace.
var ipv4Hi, ipv4Mid [256]int

// ipHashNone is the last entry of ip_hash's quick-path table, past every
// sum of ipv4Hi, ipv4Mid and an octet: -1, the entry of a key the quick path
// does not read.
const ipHashNone = 2*(ipHashMod-1) + 255 + 1

func init() {
	for q := 0; q < 256; q++ {
		ipv4Hi[q] = (ipHashInit*ipHashMul*ipHashMul*ipHashMul + q*ipHashMul*ipHashMul) % ipHashMod
		ipv4Mid[q] = q * ipHashMul % ipHashMod
	}
}

// ipHashPow[k] is 113^k mod 6271. Feeding bytes b[0..n-1] into the running
// hash one at a time is, modulo 6271, the same as
//
//	hash = hash*113^n + sum(b[i] * 113^(n-1-i))
//
// so a try costs one multiply-add and one modulo instead of n dependent ones.
var ipHashPow [17]int

func init() {
	ipHashPow[0] = 1
	for k := 1; k < len(ipHashPow); k++ {
		ipHashPow[k] = ipHashPow[k-1] * ipHashMul % ipHashMod
	}
}

func buildIPHash(g *group, c *Config) (strategy, error) {
	ww := newWeightWalk(g)
	s := &ipHash{byHash: make([]int32, ipHashMod)}
	for h := 0; h < ipHashMod; h++ {
		s.byHash[h] = int32(walkFind(&ww, int64(h)%g.totalWeight))
	}
	if len(g.members) >= 2 {
		// The quick path's table reaches past 6270, so that the interpreter
		// can skip the modulo (see ipv4Hi): entry h is entry h%6271.
		look := lookIndices(g, s.byHash)
		ext := make([]int32, ipHashNone+1)
		for h := range ext {
			ext[h] = look[h%ipHashMod]
		}
		ext[ipHashNone] = -1
		g.setQuick(quickIPHash, ext)
	}
	return s, nil
}

// pickIPHashQuick is PickIndex's quick path for ip_hash: the address's
// first try, while the group is quiet and that member is not down. Compiled,
// it reads IPv4 addresses only (the full pick reads the rest as cheaply).
// Under the interpreter, where a loop over the characters costs microseconds
// and the standard library's parser one call, it reads any address
// net.ParseIP reads: dotted IPv4 text as parseIPv4 reads it (no leading
// zeros, no zone), given in 16 bytes as "::ffff:a.b.c.d" is, which is IPv6
// text to nginx; IPv6 text has a ':', IPv4 text none.
func pickIPHashQuick(b *Balancer, key string) int {
	g := b.primary
	if len(g.flagged) == 0 || g.failing.Load() == 0 { // isQuiet(g)
		h := ipHashNone
		if !interpreted {
			h = ipv4Hash(key)
		} else if ip := net.ParseIP(key); len(ip) == net.IPv6len {
			if strings.IndexByte(key, ':') < 0 {
				h = ipv4Hi[ip[12]] + ipv4Mid[ip[13]] + int(ip[14]) // ipv4Hash's, before its modulo
			} else {
				h = ipv6Hash(ip)
			}
		}
		if i := g.look[h]; i >= 0 {
			return int(i)
		}
	}
	return pickKey(b, key)
}

// ipv4Hash returns nginx's first hash of key when key is an IPv4 address
// (the hash loop over its first three octets, unrolled), and ipHashNone
// otherwise. It reads the address with parseIPv4, which allocates nothing
// (the standard library's parser allocates its error for a key that is not
// an address). Compiled, the products and the modulo cost less than the
// loads of ipv4Hi and ipv4Mid, and keep the quick-path table's reads within
// its first 6271 entries.
func ipv4Hash(key string) int {
	var q [16]byte
	if !parseIPv4(key, &q, 0) {
		return ipHashNone
	}
	return (ipHashInit*ipHashMul*ipHashMul*ipHashMul + int(q[0])*ipHashMul*ipHashMul + int(q[1])*ipHashMul + int(q[2])) % ipHashMod
}

// ipv6Hash is nginx's first hash of the IPv6 address ip (a function of its
// own, so that the quick path's frame does not carry its values).
func ipv6Hash(ip net.IP) int {
	return (ipHashInit*ipHashPow[net.IPv6len] + ipHashSum(ip)) % ipHashMod
}

// ipHashSum is the sum the hash loop adds up over the bytes of addr:
// addr[i] * 113^(len(addr)-1-i), each term below 255 * 6271.
func ipHashSum(addr []byte) int {
	sum := 0
	for i, x := range addr {
		sum += int(x) * ipHashPow[len(addr)-1-i]
	}
	return sum
}

func (s *ipHash) pick(g *group, r request) int { return pickIPHash(s, g, &r) }

// pickIPHash is the pick as a plain function, which pickIn calls without going
// through the interface.
func pickIPHash(s *ipHash, g *group, r *request) int {
	// nginx hands a single server to round robin directly.
	if len(g.members) < 2 {
		return fallback(g, r)
	}
	var addr [16]byte
	n := ipHashBytes(r.key, &addr)
	sum := ipHashSum(addr[:n]) // at most 16 * 255 * 6270: no overflow
	mul := ipHashPow[n]
	hash := ipHashInit
	for try := 0; try <= hashTries; try++ {
		hash = (hash*mul + sum) % ipHashMod
		pos := int(s.byHash[hash])
		if usable(r, g.members[pos]) {
			return pos
		}
	}
	return fallback(g, r)
}

// ipHashBytes writes the bytes nginx hashes for the client address key into
// addr and returns how many: 3 for IPv4 (the first three octets), 16 for IPv6
// (an IPv4-mapped address such as "::ffff:192.0.2.1" is IPv6 to nginx too).
// A key that is not an IP address is hashed as nginx hashes a client that has
// none (a Unix-socket client): three zero bytes.
func ipHashBytes(key string, addr *[16]byte) int {
	// The zone ("%eth0") is not part of the address nginx hashes.
	if i := strings.IndexByte(key, '%'); i >= 0 {
		key = key[:i]
	}
	switch parseIP(key, addr) {
	case 4:
		return 3
	case 16:
		return 16
	}
	*addr = [16]byte{}
	return 3
}

// parseIP parses an IPv4 address in dotted decimal or an IPv6 address in
// RFC 4291 text form into addr (the first 4 bytes for IPv4) and returns 4,
// 16, or 0 when s is neither. It accepts what net/netip accepts (no leading
// zeros in IPv4 octets, no zone) without allocating, even for bad input.
func parseIP(s string, addr *[16]byte) int {
	if strings.IndexByte(s, ':') < 0 {
		if parseIPv4(s, addr, 0) {
			return 4
		}
		return 0
	}
	if parseIPv6(s, addr) {
		return 16
	}
	return 0
}

// parseIPv4 parses dotted-decimal s into addr[at:at+4].
func parseIPv4(s string, addr *[16]byte, at int) bool {
	for part := 0; part < 4; part++ {
		if part > 0 {
			if len(s) == 0 || s[0] != '.' {
				return false
			}
			s = s[1:]
		}
		v, n := 0, 0
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			if n > 0 && v == 0 { // a leading zero
				return false
			}
			v = v*10 + int(s[n]-'0')
			n++
			if v > 255 {
				return false
			}
		}
		if n == 0 {
			return false
		}
		addr[at+part] = byte(v)
		s = s[n:]
	}
	return len(s) == 0
}

// hexDigit maps a byte to its value as a hex digit, or to 0xff.
var hexDigit [256]byte

func init() {
	for i := range hexDigit {
		hexDigit[i] = 0xff
	}
	for c := 0; c < 10; c++ {
		hexDigit['0'+c] = byte(c)
	}
	for c := 0; c < 6; c++ {
		hexDigit['a'+c] = byte(10 + c)
		hexDigit['A'+c] = byte(10 + c)
	}
}

// parseIPv6 parses s into addr: up to eight groups of 1-4 hex digits, one
// "::" standing for one or more zero groups, and optionally an IPv4 address
// in place of the last two groups.
func parseIPv6(s string, addr *[16]byte) bool {
	var ip [16]byte
	ellipsis := -1 // where "::" stands, as a byte offset into ip
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis = 0
		s = s[2:]
	}
	i := 0
	for len(s) > 0 && i < 16 {
		v, n := 0, 0
		for n < len(s) && n <= 4 {
			d := hexDigit[s[n]]
			if d > 15 {
				break
			}
			v = v<<4 | int(d)
			n++
		}
		if n < len(s) && s[n] == '.' {
			// An IPv4 address ends the text and takes the last 4 bytes.
			if i > 12 || !parseIPv4(s, &ip, i) {
				return false
			}
			i += 4
			s = ""
			break
		}
		if n == 0 || n > 4 {
			return false
		}
		ip[i], ip[i+1] = byte(v>>8), byte(v)
		i += 2
		s = s[n:]
		if len(s) == 0 {
			break
		}
		if s[0] != ':' || len(s) == 1 {
			return false
		}
		s = s[1:]
		if s[0] == ':' {
			if ellipsis >= 0 {
				return false
			}
			ellipsis = i
			s = s[1:]
		}
	}
	if len(s) != 0 {
		return false
	}
	if i < 16 {
		if ellipsis < 0 {
			return false
		}
		// Move the groups after "::" to the end; zeros fill the gap.
		gap := 16 - i
		for j := i - 1; j >= ellipsis; j-- {
			ip[j+gap] = ip[j]
			ip[j] = 0
		}
	} else if ellipsis >= 0 {
		return false
	}
	*addr = ip
	return true
}
