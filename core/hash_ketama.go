package core

import "fmt"

// url_hash's ketama mode is nginx's "hash $key consistent"
// (ngx_http_upstream_init_chash and get_chash_peer), point for point.
//
// Each member gets 160 points per unit of weight on a ring of 32-bit values.
// Its address is split as nginx splits the server string written in its
// configuration: HOST is everything before the last ':' when only digits
// follow it, PORT those digits (empty when there are none), and
//
//	base = crc32 register after HOST, "\x00", PORT
//	point[j] = crc32 continued from base over point[j-1] (4 bytes, little
//	           endian; 0 for the first point)
//
// The points of all members are sorted and duplicates dropped (the earlier
// member keeps a shared value, as nginx's qsort on glibc, a stable merge
// sort, leaves it). A key goes to the first point >= crc32(key), wrapping to
// the first point; an unavailable member passes the key to the next point,
// up to 20 times, then nginx's round robin takes over. An empty key goes to
// round robin straight away. Down members keep their points, so marking one
// down moves only its keys.
//
// Our addresses always carry a port; nginx hashes a server written without
// one ("server example.com;") with an empty PORT, so to share nginx's
// mapping, write the port in nginx's configuration too.

// ketamaPoints is nginx's number of points per unit of weight.
const ketamaPoints = 160

// ketamaMaxWeight bounds the ring at about 10.5 million points: 80 MiB,
// which is about all the build allocates (the points are sorted with a
// buffer of a 256th of them, see ringSort).
const ketamaMaxWeight = 1 << 16

// ketamaIndexBits bounds the ring's lookup index at 2^16+1 entries (256 KiB).
const ketamaIndexBits = 16

// ketamaRing is nginx's consistent-hash ring, read-only once built.
type ketamaRing struct {
	// keys are the points, sorted ascending and distinct, each as
	// point<<32 | the position of the member that owns it.
	keys []uint64
	// index[b] is the first i with points[i]>>shift >= b, so that a lookup
	// searches one small bucket of the ring: O(1) expected, O(log n) at worst.
	index []int32
	shift uint
}

func newKetamaRing(g *group) (*ketamaRing, error) {
	total := 0
	for _, m := range g.members {
		total += m.weight
		if total > ketamaMaxWeight {
			return nil, fmt.Errorf("lbpack: backends[%d].weight %d: ketama gives each unit of weight %d points; the total weight may not exceed %d",
				m.index, m.weight, ketamaPoints, ketamaMaxWeight)
		}
	}
	// Each entry is point<<32 | member position; sorting by the point alone,
	// stably, keeps configuration order among equal points.
	keys := make([]uint64, 0, total*ketamaPoints)
	for pos, m := range g.members {
		host, port := ketamaSplit(m.addr)
		base := crcUpdate(0xffffffff, host)
		base = crcUpdate(base, "\x00")
		base = crcUpdate(base, port)
		prev := uint32(0)
		for j := 0; j < ketamaPoints*m.weight; j++ {
			p := ^crcUpdate32(base, prev)
			keys = append(keys, uint64(p)<<32|uint64(pos))
			prev = p
		}
	}
	// Sorting the whole keys puts equal points in member order, as nginx's
	// stable sort does; the first of them stays.
	ringSort(keys)
	w := 0
	for i, k := range keys {
		if i > 0 && k>>32 == keys[w-1]>>32 {
			continue
		}
		keys[w] = k
		w++
	}
	ring := &ketamaRing{keys: keys[:w]}
	ring.buildIndex()
	return ring, nil
}

// ketamaSplit splits a server string into HOST and PORT as nginx's chash
// does: PORT is the run of digits after the last ':', if the string ends in
// one; otherwise the whole string is HOST and PORT is empty.
func ketamaSplit(addr string) (host, port string) {
	for j := len(addr) - 1; j >= 0; j-- {
		c := addr[j]
		if c == ':' {
			return addr[:j], addr[j+1:]
		}
		if c < '0' || c > '9' {
			break
		}
	}
	return addr, ""
}

// ringSort sorts keys ascending with little memory beside them (the ring's
// points at the bound are 80 MiB): one in-place pass by the top byte
// (flagPass), then each of the 256 buckets, which hash values spread evenly
// (a 256th of the keys each, a cache's worth at the bound), by an LSD radix
// sort on the three bytes below through one buffer the size of the largest
// bucket, and an insertion sort for keys that share their upper 32 bits.
// Should one bucket hold more than a sixteenth of the keys, the buckets are
// sorted in place byte by byte instead (flagSort). No comparison callbacks
// (see interp.go).
func ringSort(keys []uint64) {
	end := flagPass(keys, 56)
	largest, start := 0, 0
	for d := range end {
		if end[d]-start > largest {
			largest = end[d] - start
		}
		start = end[d]
	}
	if largest > len(keys)/16+64 {
		flagBuckets(keys, end, 48)
		return
	}
	tmp := make([]uint64, largest)
	start = 0
	for d := range end {
		lsdSort(keys[start:end[d]], tmp)
		start = end[d]
	}
}

// lsdSort sorts keys, which agree on their top byte, by an LSD radix sort
// on bits 32 to 55 through tmp (at least as long), then by insertion, which
// on keys sorted by their upper 32 bits moves only those that share them.
func lsdSort(keys, tmp []uint64) {
	if len(keys) > 32 {
		src, dst := keys, tmp[:len(keys)]
		for shift := uint(32); shift < 56; shift += 8 {
			var next [256]int
			for _, k := range src {
				next[k>>shift&0xff]++
			}
			sum := 0
			for d := range next {
				sum, next[d] = sum+next[d], sum
			}
			for _, k := range src {
				d := k >> shift & 0xff
				dst[next[d]] = k
				next[d]++
			}
			src, dst = dst, src
		}
		copy(keys, src) // three passes: the result is in tmp
	}
	insertionSort(keys)
}

func insertionSort(keys []uint64) {
	for i := 1; i < len(keys); i++ {
		k, j := keys[i], i
		for ; j > 0 && keys[j-1] > k; j-- {
			keys[j] = keys[j-1]
		}
		keys[j] = k
	}
}

// flagSort sorts keys ascending in place (American flag sort: a most
// significant byte first radix sort that moves keys between buckets by
// swaps), from the byte at shift down to bit 32; keys that agree on their
// upper 32 bits, and small buckets, are finished by insertion sort.
func flagSort(keys []uint64, shift uint) {
	if len(keys) <= 32 || shift < 32 {
		insertionSort(keys)
		return
	}
	flagBuckets(keys, flagPass(keys, shift), shift-8)
}

// flagBuckets sorts each bucket that flagPass left (end) from the byte at
// shift.
func flagBuckets(keys []uint64, end [256]int, shift uint) {
	start := 0
	for d := range end {
		flagSort(keys[start:end[d]], shift)
		start = end[d]
	}
}

// flagPass moves keys into 256 buckets by the byte at shift, in place, and
// returns where each bucket ends.
func flagPass(keys []uint64, shift uint) [256]int {
	var end, next [256]int
	for _, k := range keys {
		end[k>>shift&0xff]++
	}
	sum := 0
	for d := range end {
		next[d] = sum
		sum += end[d]
		end[d] = sum
	}
	for d := 0; d < 256; d++ {
		for next[d] < end[d] {
			// Carry the key at the bucket's next place to its own bucket,
			// and the key found there on, until one belongs here.
			k := keys[next[d]]
			for e := int(k >> shift & 0xff); e != d; e = int(k >> shift & 0xff) {
				keys[next[e]], k = k, keys[next[e]]
				next[e]++
			}
			keys[next[d]] = k
			next[d]++
		}
	}
	return end
}

func (k *ketamaRing) buildIndex() {
	bits := uint(1)
	for (1<<bits) < len(k.keys) && bits < ketamaIndexBits {
		bits++
	}
	k.shift = 32 - bits
	k.index = make([]int32, (1<<bits)+1)
	i := 0
	for b := 0; b <= 1<<bits; b++ {
		for i < len(k.keys) && k.keys[i]>>32>>k.shift < uint64(b) {
			i++
		}
		k.index[b] = int32(i)
	}
}

// ringFind returns the position on ring k of the first point >= h, or 0 when
// h is above every point (the ring wraps).
func ringFind(k *ketamaRing, h uint32) int {
	b := h >> k.shift
	lo, hi := int(k.index[b]), int(k.index[b+1])
	key := uint64(h) << 32 // the first key at or above it holds the point
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if k.keys[mid] < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(k.keys) {
		return 0
	}
	return lo
}

type ketama struct {
	ring *ketamaRing
}

func newKetama(g *group) (*ketama, error) {
	ring, err := newKetamaRing(g)
	if err != nil {
		return nil, err
	}
	ringTable(g, ring, tableCRC)
	return &ketama{ring: ring}, nil
}

// ringLookBits bounds the table's buckets (2^18 int32s: 1 MiB).
const ringLookBits = 18

// ringTable gives g a table of kind over ring's buckets: the hash space
// is cut into 64 buckets per point (up to 2^ringLookBits), and a bucket that
// holds no point but possibly at its last hash maps every hash in it to one
// point, whose owner look holds. The other buckets (one in 64 while the ring
// has at most 4096 points) hold -1: their keys take the full pick, as do
// keys whose owner is down.
func ringTable(g *group, ring *ketamaRing, kind int) {
	if len(g.members) < 2 {
		return // nginx's round robin picks for a single backend
	}
	buckets, bits := 2, uint(1)
	for buckets < 64*len(ring.keys) && bits < ringLookBits {
		buckets, bits = 2*buckets, bits+1
	}
	g.lookShift = 32 - bits
	width := uint64(1) << g.lookShift // hashes per bucket
	look := make([]int32, buckets)
	j := 0 // the first point at or after the bucket's first hash
	for b := range look {
		lo := uint64(b) * width
		hi := lo + width - 1
		for j < len(ring.keys) && ring.keys[j]>>32 < lo {
			j++
		}
		switch {
		case j == len(ring.keys):
			look[b] = int32(uint32(ring.keys[0])) // past the last point: the ring wraps
		case ring.keys[j]>>32 >= hi:
			look[b] = int32(uint32(ring.keys[j]))
		default:
			look[b] = -1
			continue
		}
		if g.members[look[b]].down {
			look[b] = -1
		}
	}
	g.setTable(kind, look)
}

func (s *ketama) pick(g *group, req request) int {
	r := &req
	if len(g.members) < 2 || r.key == "" {
		return fallback(g, r)
	}
	ring := s.ring
	n := len(ring.keys)
	i := ringFind(ring, crcString(r.key))
	for try := 0; try <= hashTries; try++ {
		pos := int(uint32(ring.keys[i])) // the point's owner
		if usable(r, g.members[pos]) {
			return pos
		}
		if i++; i == n {
			i = 0
		}
	}
	return fallback(g, r)
}
