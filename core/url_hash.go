package core

import (
	"fmt"
	"math"
	"strconv"
)

// url_hash maps any key string (a URL, a header, a cookie) to a backend.
// Its modes share the key hashing below and nginx's rule for an unavailable
// backend: try another candidate a bounded number of times (hashTries), then
// fall back to nginx's round robin.

// URLHash names the url_hash strategy in Config.Strategy.
const URLHash = "url_hash"

// Hash modes accepted in Config.HashMode (url_hash only).
const (
	HashKetama  = "ketama"
	HashModulo  = "modulo"
	HashMaglev  = "maglev"
	HashBounded = "bounded"
)

func init() {
	register(URLHash, strategyInfo{hashed: true, counts: boundedMode, total: boundedMode, build: buildURLHash})
}

// boundedMode is url_hash's Traits.Counts and strategyInfo.total: its
// bounded mode counts requests in flight, over all backends too.
func boundedMode(c *Config) bool { return c.HashMode == HashBounded }

// hashTries is how many further candidates nginx's hash methods examine when
// a candidate is unavailable before they fall back to round robin: the first
// candidate plus 20 retries ("if (++tries > 20)").
const hashTries = 20

// defaultLoadFactor is the bounded mode's c when Config.LoadFactor is 0.
const defaultLoadFactor = 1.25

func buildURLHash(g *group, c *Config) (strategy, error) {
	switch c.HashMode {
	case "", HashKetama:
		return newKetama(g)
	case HashModulo:
		return newModulo(g), nil
	case HashMaglev:
		return newMaglev(g), nil
	case HashBounded:
		lf := c.LoadFactor
		if lf == 0 {
			lf = defaultLoadFactor
		}
		if !(lf > 1) || math.IsInf(lf, 0) {
			return nil, fmt.Errorf("lbpack: load_factor %v: must be above 1 (default %v)", c.LoadFactor, defaultLoadFactor)
		}
		return newBounded(g, lf)
	}
	return nil, fmt.Errorf("lbpack: hash_mode %q: unknown (want %s, %s, %s or %s)",
		c.HashMode, HashKetama, HashModulo, HashMaglev, HashBounded)
}

// fallback is nginx's last resort for the hash methods: its smooth weighted
// round robin among the eligible members.
func fallback(g *group, r *request) int {
	return g.smooth.next(g, r, nil)
}

// crcPoly is the IEEE CRC-32 polynomial, bit-reversed (as hash/crc32.IEEE).
const crcPoly = 0xedb88320

// crcTable holds the IEEE CRC-32 tables for slicing by 8, table k at
// [k*256:], so that keys of any length are hashed from the string itself,
// without a []byte copy. (One flat array: see interp.go.)
var crcTable [8 * 256]uint32

// rehashCRC[t] is the CRC-32 register after nginx's rehash prefix: the
// decimal digits of t (plain hash's try t > 0 hashes "t" + key).
var rehashCRC [hashTries + 1]uint32

func init() {
	// The table is computed here rather than copied from hash/crc32, whose
	// IEEETable Traefik's plugin loader misreads (see interp.go).
	for i := 0; i < 256; i++ {
		c := uint32(i)
		for k := 0; k < 8; k++ {
			if c&1 == 1 {
				c = c>>1 ^ crcPoly
			} else {
				c >>= 1
			}
		}
		crcTable[i] = c
	}
	for i := 0; i < 256; i++ {
		c := crcTable[i]
		for k := 1; k < 8; k++ {
			c = crcTable[c&0xff] ^ c>>8
			crcTable[k<<8|i] = c
		}
	}
	rehashCRC[0] = 0xffffffff
	for t := 1; t <= hashTries; t++ {
		rehashCRC[t] = crcUpdate(0xffffffff, strconv.Itoa(t))
	}
}

// crcUpdate feeds s into the CRC-32 (IEEE) register crc. A checksum starts
// from 0xffffffff and ends with ^crc, as nginx's ngx_crc32_init/final do.
func crcUpdate(crc uint32, s string) uint32 {
	t := &crcTable
	for len(s) >= 8 {
		crc ^= uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
		crc = t[0<<8|int(s[7])] ^ t[1<<8|int(s[6])] ^ t[2<<8|int(s[5])] ^ t[3<<8|int(s[4])] ^
			t[4<<8|int(crc>>24)] ^ t[5<<8|int(crc>>16&0xff)] ^ t[6<<8|int(crc>>8&0xff)] ^ t[7<<8|int(crc&0xff)]
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		crc = t[byte(crc)^s[i]] ^ crc>>8
	}
	return crc
}

// crcUpdate32 feeds the 4 bytes of v, little-endian, into the register crc.
func crcUpdate32(crc, v uint32) uint32 {
	for i := 0; i < 4; i++ {
		crc = crcTable[byte(crc)^byte(v)] ^ crc>>8
		v >>= 8
	}
	return crc
}

// Fixed constants of the 64-bit key hash (the primes of xxHash64). They are
// constants on purpose: every process, on every machine, maps every key to
// the same backend, so a fleet of proxies agrees without coordination.
const (
	hashP1 = 0x9e3779b185ebca87
	hashP2 = 0xc2b2ae3d27d4eb4f
	hashP3 = 0x165667b19e3779f9
	hashP4 = 0x85ebca77c2b2ae63
	hashP5 = 0x27d4eb2f165667c5
)

// hashString is a fast 64-bit hash of s under seed, with xxHash64's lane
// round and final avalanche (not its exact output): each 8-byte lane is
// folded into one accumulator by a round that is a bijection of the
// accumulator, so no input is lost, and the avalanche spreads every input
// bit over the result.
func hashString(s string, seed uint64) uint64 {
	// Rotations are written out: the compiler makes the same instruction of
	// them as of bits.RotateLeft64, and a plugin loader saves a call per
	// rotation (see interp.go).
	h := seed + hashP5 + uint64(len(s))*hashP1
	for len(s) >= 8 {
		lane := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		lane *= hashP2
		h ^= (lane<<31 | lane>>33) * hashP1
		h = (h<<27|h>>37)*hashP1 + hashP4
		s = s[8:]
	}
	if len(s) >= 4 {
		h ^= (uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24) * hashP1
		h = (h<<23|h>>41)*hashP2 + hashP3
		s = s[4:]
	}
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i]) * hashP5
		h = (h<<11 | h>>53) * hashP1
	}
	return avalanche(h)
}

// avalanche is xxHash64's finaliser: every input bit affects every output bit.
func avalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= hashP2
	h ^= h >> 29
	h *= hashP3
	h ^= h >> 32
	return h
}

// weightWalk answers nginx's weight walk in O(1) or O(log n) instead of
// nginx's O(n) loop: for w in [0, total weight) it returns the position of
// the member whose share of the weight line holds w ("while (w >= weight)
// { w -= weight; peer = next }"). Down members keep their share, as in nginx.
type weightWalk struct {
	table []int32 // w -> position, when the total weight is small
	ends  []int64 // ends[i]: total weight of members 0..i, otherwise
}

// walkTableMax bounds the O(1) table at 256 KiB; larger totals use a binary
// search over the cumulative weights.
const walkTableMax = 1 << 16

func newWeightWalk(g *group) weightWalk {
	var ww weightWalk
	// 64-bit sums: on 32-bit platforms an int passes 2^31 within MaxWeight.
	ww.ends = make([]int64, len(g.members))
	sum := int64(0)
	for i, m := range g.members {
		sum += int64(m.weight)
		ww.ends[i] = sum
	}
	if sum <= walkTableMax {
		ww.table = make([]int32, sum)
		w := 0
		for i, m := range g.members {
			for k := 0; k < m.weight; k++ {
				ww.table[w] = int32(i)
				w++
			}
		}
		ww.ends = nil
	}
	return ww
}

// walkFind returns the member position for w, 0 <= w < total weight.
func walkFind(ww *weightWalk, w int64) int {
	if ww.table != nil {
		return int(ww.table[w])
	}
	// The first member whose cumulative weight exceeds w.
	lo, hi := 0, len(ww.ends)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ww.ends[mid] > w {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
