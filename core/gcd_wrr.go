package core

import "sync"

func init() {
	register(GCDWRR, strategyInfo{build: buildGCDWRR})
}

// gcdWRR is LVS's interleaved weighted round robin (ip_vs_wrr): a current
// weight cw steps down from the largest weight by the gcd of the weights,
// and each round takes, in order, every member weighing at least cw. Down
// members take no part, as an LVS server of weight 0. One period is
// precomputed and read through an atomic cursor (O(1), lock-free); beyond the
// schedule bound the LVS scheduler itself runs under a lock.
//
// When the scheduled member is ineligible, the pick moves on through the
// sequence to the next eligible member and the schedule continues after it,
// as LVS skips an unavailable server.
type gcdWRR struct {
	up    int     // members that are not down
	table []int32 // member positions, one period; nil beyond the bound
	cur   *cursor

	mu  sync.Mutex // guards gen, used only beyond the bound
	gen *lvsGen
}

func buildGCDWRR(g *group, c *Config) (strategy, error) {
	gen := newLVSGen(g)
	if gen == nil {
		return &gcdWRR{}, nil
	}
	s := &gcdWRR{up: len(gen.pos)}
	if gen.period > MaxScheduleEntries || len(gen.pos)*(gen.max/gen.gcd) > maxScheduleWork {
		s.gen = gen
		return s, nil
	}
	s.table = make([]int32, gen.period)
	for i := range s.table {
		s.table[i] = int32(gen.next())
	}
	s.cur = newCursor(len(s.table), staggerStart(c))
	return s, nil
}

func (s *gcdWRR) pick(g *group, r request) int {
	if s.up == 0 {
		return -1
	}
	if s.table == nil {
		return s.pickExact(g, &r)
	}
	p := s.cur.take(1)
	for k := 0; k < len(s.table); k++ {
		pos := int(s.table[p])
		if r.ok(g.members[pos]) {
			if k > 0 {
				// The entries passed over are used up, as in LVS.
				s.cur.take(uint64(k))
			}
			return pos
		}
		if k+1 == s.up && !anyEligible(g, &r) {
			return -1
		}
		p++
		if p == len(s.table) {
			p = 0
		}
	}
	return -1
}

// pickExact steps the LVS scheduler itself, for periods beyond the bound.
func (s *gcdWRR) pickExact(g *group, r *request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := 0; k < s.gen.period; k++ {
		pos := s.gen.next()
		if r.ok(g.members[pos]) {
			return pos
		}
		if k+1 == s.up && !anyEligible(g, r) {
			return -1
		}
	}
	return -1
}

// lvsGen is the LVS scheduler's state over the members that are not down.
type lvsGen struct {
	pos    []int32 // positions in g.members, in order
	weight []int
	gcd    int
	max    int
	period int // picks in one period: the sum of the weights over the gcd
	i      int // the last member considered
	cw     int // the current weight
}

// newLVSGen returns the scheduler in its initial state (before the first
// member, cw 0), or nil when every member is down.
func newLVSGen(g *group) *lvsGen {
	gen := &lvsGen{}
	sum := 0
	for i, m := range g.members {
		if m.down {
			continue
		}
		gen.pos = append(gen.pos, int32(i))
		gen.weight = append(gen.weight, m.weight)
		gen.gcd = gcd(gen.gcd, m.weight)
		if m.weight > gen.max {
			gen.max = m.weight
		}
		sum += m.weight
	}
	if len(gen.pos) == 0 {
		return nil
	}
	gen.period = sum / gen.gcd
	gen.i = len(gen.pos) - 1
	return gen
}

// next returns the position of the next member in LVS's order.
func (s *lvsGen) next() int {
	for {
		s.i++
		if s.i == len(s.pos) {
			s.i = 0
			s.cw -= s.gcd
			if s.cw <= 0 {
				s.cw = s.max
			}
		}
		if s.weight[s.i] >= s.cw {
			return int(s.pos[s.i])
		}
	}
}
