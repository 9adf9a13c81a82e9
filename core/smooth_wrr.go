package core

func init() {
	register(SmoothWRR, strategyInfo{build: buildSmoothWRR})
}

// Bounds on the precomputed schedules of smooth_wrr and gcd_wrr. A period of
// at most MaxScheduleEntries picks is stored as one int32 per pick (4 MiB at
// the bound) when building it takes at most maxScheduleWork steps; beyond
// either bound the strategy runs its exact scheduler pick by pick instead.
// Weights of 1..10 over 100,000 backends, or 1..100 over 10,000, fit.
const (
	// MaxScheduleEntries is the longest period, in picks, that smooth_wrr
	// and gcd_wrr precompute.
	MaxScheduleEntries = 1 << 20
	maxScheduleWork    = 1 << 27
)

// smoothWRR is nginx's smooth weighted round robin. In the steady state it
// reads nginx's sequence from a precomputed period through an atomic cursor:
// O(1), lock-free. When the scheduled member is ineligible, while a member's
// weight is not its configured one (failures, slow start), and when the
// period is beyond the bound, it takes nginx's exact O(n) pass (g.smooth),
// which shares the pick out among the eligible members by nginx's rule.
type smoothWRR struct {
	table []int32 // member positions, one period; nil beyond the bound
	cur   *cursor
}

func buildSmoothWRR(g *group, c *Config) (strategy, error) {
	s := &smoothWRR{}
	gen := newSmoothGen(g)
	if gen == nil || gen.period > MaxScheduleEntries || gen.period*len(gen.classes) > maxScheduleWork {
		return s, nil
	}
	s.table = make([]int32, gen.period)
	for i := range s.table {
		s.table[i] = int32(gen.next())
	}
	s.cur = newCursor(len(s.table), staggerStart(c))
	return s, nil
}

// staggerStart returns where a schedule's cursor starts: 0, or a random point
// with Config.Stagger (the cursor reduces it modulo the period).
func staggerStart(c *Config) uint64 {
	if !c.Stagger {
		return 0
	}
	return c.Rand()
}

func (s *smoothWRR) pick(g *group, r request) int {
	if s.table != nil && g.steady() {
		pos := int(s.table[s.cur.take(1)])
		if r.ok(g.members[pos]) {
			return pos
		}
	}
	return g.smooth.next(g, &r, nil)
}

// smoothGen generates nginx's smooth sequence over the members of a group
// that are not down (nginx never adds weight to a down peer), in
// O(distinct weights) per pick instead of nginx's O(n).
//
// It relies on two facts. Weights divided by their gcd give the same sequence
// (every current weight scales by the gcd, so every comparison and tie comes
// out the same), and the period is then their sum: after it every current
// weight is back to 0. And members of equal weight are picked in rotation:
// after t picks nginx's current weight of member i is t*w_i - W*c_i (c_i its
// picks so far), so among members of one weight the largest is the first one,
// in configuration order, that has been picked fewest times. Each weight class
// therefore offers one candidate, and nginx's choice is the best candidate,
// ties going to the earlier position.
type smoothGen struct {
	total   int // W: the sum of the scaled weights
	period  int // picks in one period: total
	t       int // picks made in the current period
	classes []smoothClass
}

// smoothClass is the members of one weight, in configuration order.
type smoothClass struct {
	weight int     // scaled
	pos    []int32 // positions in g.members, ascending
	next   int     // index in pos of the member whose turn it is
	rounds int     // complete rotations in the current period
}

// newSmoothGen returns a generator at the start of the period, or nil when
// every member is down.
func newSmoothGen(g *group) *smoothGen {
	d := 0
	for _, m := range g.members {
		if !m.down {
			d = gcd(d, m.weight)
		}
	}
	if d == 0 {
		return nil
	}
	gen := &smoothGen{}
	class := make(map[int]int)
	for i, m := range g.members {
		if m.down {
			continue
		}
		w := m.weight / d
		k, ok := class[w]
		if !ok {
			k = len(gen.classes)
			class[w] = k
			gen.classes = append(gen.classes, smoothClass{weight: w})
		}
		gen.classes[k].pos = append(gen.classes[k].pos, int32(i))
		gen.total += w
	}
	gen.period = gen.total
	return gen
}

// next makes one pick and returns the chosen position in g.members.
func (s *smoothGen) next() int {
	s.t++
	best := 0
	var bestKey int
	var bestPos int32
	for k := range s.classes {
		c := &s.classes[k]
		key := s.t*c.weight - s.total*c.rounds
		p := c.pos[c.next]
		if k == 0 || key > bestKey || (key == bestKey && p < bestPos) {
			best, bestKey, bestPos = k, key, p
		}
	}
	c := &s.classes[best]
	c.next++
	if c.next == len(c.pos) {
		c.next = 0
		c.rounds++
	}
	if s.t == s.period {
		// Every current weight is 0 again: start the next period afresh,
		// which also keeps t*weight from growing without bound.
		s.t = 0
		for k := range s.classes {
			s.classes[k].rounds = 0
		}
	}
	return int(bestPos)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
