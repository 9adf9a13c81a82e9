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
//
// While a member ramps up (slow start), weights are not the table's: the LVS
// scheduler runs over the ramped weights of the moment under the lock, O(n)
// per pick, as LVS does when a server's weight is changed (gcd and maximum
// recomputed, the current weight capped by the new maximum). Once every
// member is steady the table takes over again where its cursor stood.
type gcdWRR struct {
	up    int     // members that are not down
	table []int32 // member positions, one period; nil beyond the bound
	cur   *cursor

	mu  sync.Mutex // guards gen
	gen *lvsGen    // beyond the bound, and while members ramp
}

func buildGCDWRR(g *group, c *Config) (strategy, error) {
	gen := newLVSGen(g)
	if gen == nil {
		return &gcdWRR{}, nil
	}
	s := &gcdWRR{up: len(gen.pos), gen: gen}
	if gen.period > MaxScheduleEntries || len(gen.pos)*(gen.max/gen.gcd) > maxScheduleWork {
		return s, nil
	}
	s.table = make([]int32, gen.period)
	for i := range s.table {
		s.table[i] = int32(gen.next())
	}
	s.cur = newCursor(len(s.table), staggerStart(c))
	g.sched.follow(1, &orbit{table: s.table, cur: s.cur})
	g.setSchedule(s.table, s.cur)
	// Ramps start from LVS's initial state.
	gen.i, gen.cw = len(gen.pos)-1, 0
	return s, nil
}

func (s *gcdWRR) pick(g *group, r request) int { return pickGCDWRR(s, g, &r) }

// pickGCDWRR is the pick as a plain function, which pickIn calls without going
// through the interface.
func pickGCDWRR(s *gcdWRR, g *group, r *request) int {
	if s.up == 0 {
		return -1
	}
	if s.table == nil || !isSteady(g) {
		return s.pickExact(g, r)
	}
	p := s.cur.take(1)
	for k := 0; k < len(s.table); k++ {
		pos := int(s.table[p])
		if usable(r, g.members[pos]) {
			if k > 0 {
				// The entries passed over are used up, as in LVS.
				s.cur.take(uint64(k))
			}
			return pos
		}
		if k+1 == s.up && !anyEligible(g, r) {
			return -1
		}
		p++
		if p == len(s.table) {
			p = 0
		}
	}
	return -1
}

// pickExact steps the LVS scheduler itself, over the weights of the moment:
// for periods beyond the bound, and while members ramp.
func (s *gcdWRR) pickExact(g *group, r *request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.ramps.Load() != 0 || s.gen.ramped {
		s.gen.reweigh(g, r)
	}
	for k := 0; k < s.gen.period; k++ {
		pos := s.gen.next()
		if usable(r, g.members[pos]) {
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
	// ramped is true while weight holds slow-start weights rather than the
	// configured ones.
	ramped bool
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

// reweigh sets the weights to the members' weights for this pick (lowered
// while they ramp) and recomputes what depends on them, as LVS does when a
// server's weight changes: gcd, maximum, period, and the current weight
// capped by the new maximum.
func (s *lvsGen) reweigh(g *group, r *request) {
	s.ramped, s.gcd, s.max = false, 0, 0
	sum := 0
	for k, p := range s.pos {
		m := g.members[p]
		w := r.weight(m)
		s.ramped = s.ramped || w != m.weight
		s.weight[k] = w
		s.gcd = gcd(s.gcd, w)
		if w > s.max {
			s.max = w
		}
		sum += w
	}
	s.period = sum / s.gcd
	if s.cw > s.max {
		s.cw = s.max
	}
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
