package core

import (
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

// IPHash names the ip_hash strategy in Config.Strategy.
const IPHash = "ip_hash"

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
		// The table reaches past 6270, so that ipHashParsed can skip the
		// modulo (see ipv4Hi): entry h is entry h%6271.
		look := lookIndices(g, s.byHash)
		ext := make([]int32, ipHashNone+1)
		for h := range ext {
			ext[h] = look[h%ipHashMod]
		}
		ext[ipHashNone] = -1
		g.setTable(tableIPHash, ext)
	}
	return s, nil
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

func (s *ipHash) pick(g *group, req request) int {
	r := &req
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
