package core

// url_hash's maglev mode is a weighted Maglev lookup table (Eisenbud et al.,
// "Maglev: A Fast and Reliable Software Network Load Balancer", NSDI 2016):
// a key costs one hash and one table read, whatever the number of backends.
//
// Table size: the smallest prime of maglevSizes that is at least 100 times
// the number of members (65537 up to 655 members, 131071 up to 1310, and so
// on), so each member owns about 100 entries or more and the shares are
// within about 1% of the weights.
//
// Each member walks its own permutation of the table (offset and skip from
// two fixed-seed hashes of its address) and claims the next free entry when
// its turn comes. Turns are weighted: in every round each member earns its
// weight in credit and claims one entry per max-weight of credit, so shares
// follow the weights (Envoy's weighted Maglev does the same). A member that
// leaves frees only its own entries plus a few that the permutations shift:
// about 1/n of the keys move.
//
// Down members keep their entries, so marking one down moves only its keys.
// A key whose entry is unavailable is rehashed with the next fixed seed, up
// to 20 times (nginx's bound for its hash methods), then nginx's round robin
// takes over. All seeds are constants: every process maps every key alike.
// An empty key goes to round robin, as in nginx's hash methods.

// maglevSizes are the table sizes, primes, each about twice the previous one.
var maglevSizes = []int{65537, 131071, 262147, 524309, 1048583, 2097169, 4194319, 8388617, 16777259}

// maglevEntriesPerMember is the number of table entries an average member
// gets at least.
const maglevEntriesPerMember = 100

// Fixed seeds of the member permutations.
const (
	maglevSeedOffset = 0x6c627061636b3031 // "lbpack01"
	maglevSeedSkip   = 0x6c627061636b3032 // "lbpack02"
)

type maglev struct {
	table []int32 // entry -> member position; its size is group.lookSize
}

// maglevSize returns the table size for n members.
func maglevSize(n int) int {
	for _, m := range maglevSizes {
		if m >= maglevEntriesPerMember*n {
			return m
		}
	}
	return maglevSizes[len(maglevSizes)-1]
}

func newMaglev(g *group) *maglev {
	size := uint64(maglevSize(len(g.members)))
	n := len(g.members)
	// Member i's permutation is (offset + j*skip) mod size, j = 0, 1, ...;
	// size is prime, so it visits every entry. cur[i] is where member i
	// stands on its permutation.
	cur := make([]uint64, n)
	skip := make([]uint64, n)
	maxWeight := uint64(0)
	for i, m := range g.members {
		cur[i] = hashString(m.addr, maglevSeedOffset) % size
		skip[i] = hashString(m.addr, maglevSeedSkip)%(size-1) + 1
		if uint64(m.weight) > maxWeight {
			maxWeight = uint64(m.weight)
		}
	}
	table := make([]int32, size)
	for i := range table {
		table[i] = -1
	}
	// Turns: in round r = 1, 2, ... each member earns its weight in credit
	// and claims an entry when it holds a max-weight of it, the members of a
	// round in order. So member i's k-th claim falls in round
	// ceil(k*maxWeight/w_i): the members of the largest weight ("full")
	// claim in every round, the others in some, and a heap of those by their
	// next claim hands out each round's in order, O(log n) a claim. Every
	// round has a full member's claim, so the rounds cost O(size) in all,
	// whatever the weights (stepping every member through every round cost
	// O(rounds x n): 4.8 s at n=4000 with one weight of 1e6 among 1s).
	var full []int32
	h := maglevTurns{claims: make([]uint64, n)}
	for i, m := range g.members {
		if w := uint64(m.weight); w == maxWeight {
			full = append(full, int32(i))
		} else {
			h.round = append(h.round, (maxWeight+w-1)/w)
			h.pos = append(h.pos, int32(i))
		}
	}
	for k := len(h.pos)/2 - 1; k >= 0; k-- {
		h.down(k)
	}
	filled := uint64(0)
	for r := uint64(1); filled < size; r++ {
		f := 0 // the next full member of this round
		for filled < size {
			i := int32(-1)
			fromHeap := len(h.pos) > 0 && h.round[0] == r && (f == len(full) || h.pos[0] < full[f])
			if fromHeap {
				i = h.pos[0]
			} else if f < len(full) {
				i = full[f]
				f++
			} else {
				break // the round is over
			}
			// Claim the first free entry along the member's permutation.
			c := cur[i]
			for table[c] >= 0 {
				if c += skip[i]; c >= size {
					c -= size
				}
			}
			table[c] = i
			if c += skip[i]; c >= size {
				c -= size
			}
			cur[i] = c
			filled++
			if fromHeap {
				h.claims[i]++
				w := uint64(g.members[i].weight)
				h.round[0] = ((h.claims[i]+1)*maxWeight + w - 1) / w
				h.down(0)
			}
		}
	}
	look := table
	if !g.allUp {
		look = lookIndices(g, table)
	}
	g.lookSize = size
	g.setTable(tableMaglev, look)
	return &maglev{table: table}
}

// maglevTurns is a binary min-heap of the members below the largest weight
// by their next claim: round, then position (the order of a round). claims
// is indexed by member position, the rest by heap slot.
type maglevTurns struct {
	round  []uint64
	pos    []int32
	claims []uint64
}

func (h *maglevTurns) less(a, b int) bool {
	return h.round[a] < h.round[b] || h.round[a] == h.round[b] && h.pos[a] < h.pos[b]
}

// down restores the heap below slot k.
func (h *maglevTurns) down(k int) {
	n := len(h.pos)
	for {
		c := 2*k + 1
		if c >= n {
			return
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		if !h.less(c, k) {
			return
		}
		h.round[k], h.round[c] = h.round[c], h.round[k]
		h.pos[k], h.pos[c] = h.pos[c], h.pos[k]
		k = c
	}
}

// maglevKey hashes a key for the table: CRC-32 (see crcString), spread over
// 64 bits by a multiplication by an odd constant, whose high half slot
// reads.
func maglevKey(key string) uint64 { return uint64(crcString(key)) * hashP1 }

func (s *maglev) pick(g *group, req request) int {
	r := &req
	if r.key == "" {
		return fallback(g, r)
	}
	h := maglevKey(r.key)
	for try := 0; try <= hashTries; try++ {
		pos := int(s.table[slot(g, h)])
		if usable(r, g.members[pos]) {
			return pos
		}
		// The next seed: a fixed step through the 64-bit space, mixed again.
		h = avalanche(h + hashP1)
	}
	return fallback(g, r)
}

// slot maps a 64-bit hash to a table entry by multiply-shift (Lemire's fast
// range reduction), which is uniform and cheaper than a modulo.
func slot(g *group, h uint64) uint64 {
	return (h >> 32) * g.lookSize >> 32
}
