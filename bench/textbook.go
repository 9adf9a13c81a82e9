package bench

import (
	"hash/crc32"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
)

// The textbook implementations below are what one writes from the
// algorithm's description, without lbpack's precomputation: they are the
// baselines lbpack's ratios are stated against.

// naiveSmooth is nginx's smooth weighted round robin as usually written: one
// mutex and one O(n) pass per pick.
type naiveSmooth struct {
	mu      sync.Mutex
	weight  []int
	current []int
	total   int
}

func newNaiveSmooth(weights []int) *naiveSmooth {
	s := &naiveSmooth{weight: weights, current: make([]int, len(weights))}
	for _, w := range weights {
		s.total += w
	}
	return s
}

func (s *naiveSmooth) PickKey(string) int {
	s.mu.Lock()
	best := -1
	for i, w := range s.weight {
		s.current[i] += w
		if best < 0 || s.current[i] > s.current[best] {
			best = i
		}
	}
	s.current[best] -= s.total
	s.mu.Unlock()
	return best
}

// expandedWRR repeats each backend weight times in one list and walks it with
// an atomic counter: O(1), but bursty (a backend's picks come in a row).
type expandedWRR struct {
	list []int
	next atomic.Uint64
}

func newExpandedWRR(weights []int) *expandedWRR {
	e := &expandedWRR{}
	for i, w := range weights {
		for j := 0; j < w; j++ {
			e.list = append(e.list, i)
		}
	}
	return e
}

func (e *expandedWRR) PickKey(string) int {
	return e.list[(e.next.Add(1)-1)%uint64(len(e.list))]
}

// sortedRing is a consistent-hash ring as usually written: replicas points per
// backend (crc32 of "address#r"), kept in a sorted slice, looked up with a
// binary search.
type sortedRing struct {
	points []uint32
	owner  []int
}

// ringReplicas is "a few replicas": enough to look like a textbook ring,
// far fewer than nginx's 160.
const ringReplicas = 16

func newSortedRing(addrs []string) *sortedRing {
	type point struct {
		h uint32
		i int
	}
	pts := make([]point, 0, len(addrs)*ringReplicas)
	for i, a := range addrs {
		for r := 0; r < ringReplicas; r++ {
			pts = append(pts, point{crc32.ChecksumIEEE([]byte(a + "#" + strconv.Itoa(r))), i})
		}
	}
	sort.Slice(pts, func(a, b int) bool { return pts[a].h < pts[b].h })
	s := &sortedRing{points: make([]uint32, len(pts)), owner: make([]int, len(pts))}
	for j, p := range pts {
		s.points[j], s.owner[j] = p.h, p.i
	}
	return s
}

func (s *sortedRing) PickKey(key string) int {
	h := crc32.ChecksumIEEE([]byte(key))
	j := sort.Search(len(s.points), func(j int) bool { return s.points[j] >= h })
	if j == len(s.points) {
		j = 0
	}
	return s.owner[j]
}
