package core

import (
	"sort"
	"sync"
)

// GCDWRR names the gcd_wrr strategy in Config.Strategy.
const GCDWRR = "gcd_wrr"

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
// as LVS skips an unavailable server. After a lap of misses the pick jumps
// there instead of stepping (see lvsJump), so a pick costs O(n) at worst
// whatever the period: with weights 1000000,1 and the heavy backend full,
// stepping would pass a million entries.
//
// While a member ramps up (slow start), the schedule stays LVS's over the
// configured weights, and each turn of a ramping member is taken only as
// often as its slow-start share says (see takeTurn): at 10% of its weight it
// takes one turn in ten and passes the others on, so its share is that of
// its ramped weight, for a weight of 1 too. (LVS's own answer to a weight
// change, recomputing gcd and maximum, would need weights in fine steps to
// ramp a weight of 1, and with them a period of thousands of picks, which
// serves a newcomer in bursts.)
type gcdWRR struct {
	up    int     // members that are not down
	table []int32 // member positions, one period; nil beyond the bound
	cur   *cursor
	// rounds[j] is the table position where the round of current weight
	// max - j*gcd begins (table only).
	rounds []int32
	turns  rampTurns

	mu  sync.Mutex // guards gen
	gen *lvsGen    // beyond the bound
}

func buildGCDWRR(g *group, c *Config) (strategy, error) {
	gen := newLVSGen(g)
	if gen == nil {
		return &gcdWRR{}, nil
	}
	s := &gcdWRR{up: len(gen.pos), gen: gen, turns: newRampTurns(g)}
	nrounds := gen.max / gen.gcd
	if gen.period > MaxScheduleEntries || int64(len(gen.pos))*nrounds > maxScheduleWork {
		return s, nil
	}
	s.table = make([]int32, gen.period)
	s.rounds = make([]int32, nrounds)
	for i := range s.table {
		s.table[i] = int32(gen.next())
		if gen.i == firstIn(&gen.lvsWeights, gen.cw) {
			s.rounds[(gen.max-gen.cw)/gen.gcd] = int32(i)
		}
	}
	s.cur = newCursor(len(s.table), staggerStart(c))
	g.sched.follow(1, &orbit{table: s.table, cur: s.cur})
	g.setSchedule(s.table, s.cur)
	return s, nil
}

// firstIn returns the first member of the round of current weight cw.
func firstIn(w *lvsWeights, cw int64) int {
	for k, x := range w.weight {
		if x >= cw {
			return k
		}
	}
	return -1
}

func (s *gcdWRR) pick(g *group, req request) int {
	r := &req
	if s.up == 0 {
		return -1
	}
	if s.table == nil {
		return s.pickExact(g, r)
	}
	ramps := g.ramps.Load() != 0
	p0 := s.cur.take(1)
	p := p0
	for k, miss := 0, 0; miss < s.up && k < lapSteps(s.up); k++ {
		if pos, ok := turnAt(s, g, r, int(s.table[p]), ramps); ok {
			if k > 0 {
				// The entries passed over are used up, as in LVS.
				s.cur.take(uint64(k))
			}
			return pos
		} else if pos < 0 {
			miss++
		}
		p++
		if p == len(s.table) {
			p = 0
		}
	}
	return s.jumpTable(g, r, p0)
}

// turnAt looks at the turn of the member at position pos: it returns pos and
// true when the member takes it; pos and false when the member passes it on
// for its slow start; -1 and false when the member may not be picked.
func turnAt(s *gcdWRR, g *group, r *request, pos int, ramps bool) (int, bool) {
	m := g.members[pos]
	if !usable(r, m) {
		return -1, false
	}
	return pos, !ramps || takeTurn(&s.turns, r, m)
}

// lapSteps bounds the turns a pick steps through before it jumps: a lap of
// up members that may not be picked, and the turns ramping members pass on
// (each takes one in ten at most later, see rampShare).
func lapSteps(up int) int { return up * (smoothUnit/rampFloor + 1) }

// jumpTable finds, after a lap of misses from table position p0, the next
// entry whose member may be picked, by lvsJump; it uses up the entries
// passed over and returns the member's position, or -1 when none may be
// picked. O(n + log rounds).
func (s *gcdWRR) jumpTable(g *group, r *request, p0 int) int {
	w := &s.gen.lvsWeights // read-only: beside a table, gen only built it
	// p0's round and its member: the rank-th of the round's members.
	j := sort.Search(len(s.rounds), func(j int) bool { return int(s.rounds[j]) > p0 }) - 1
	cw := w.max - int64(j)*w.gcd
	k := rankIn(w, cw, p0-int(s.rounds[j]))
	k, cw, ok := lvsJump(g, r, w, k, cw)
	if !ok {
		return -1
	}
	t := int(s.rounds[(w.max-cw)/w.gcd])
	for q := 0; q < k; q++ {
		if w.weight[q] >= cw {
			t++
		}
	}
	d := t - p0
	if d < 0 {
		d += len(s.table)
	}
	if d > 0 {
		s.cur.take(uint64(d)) // as the lap above: the entries passed over
	}
	return int(w.pos[k])
}

// rankIn returns the member that is the rank-th (from 0) of those weighing
// at least cw.
func rankIn(w *lvsWeights, cw int64, rank int) int {
	for k, x := range w.weight {
		if x >= cw {
			if rank == 0 {
				return k
			}
			rank--
		}
	}
	return len(w.weight) - 1
}

// pickExact steps the LVS scheduler itself, for periods beyond the bound.
func (s *gcdWRR) pickExact(g *group, r *request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.gen
	ramps := g.ramps.Load() != 0
	for k, miss := 0, 0; miss < s.up && k < lapSteps(s.up); k++ {
		if pos, ok := turnAt(s, g, r, gen.next(), ramps); ok {
			return pos
		} else if pos < 0 {
			miss++
		}
	}
	k, cw, ok := lvsJump(g, r, &gen.lvsWeights, gen.i, gen.cw)
	if !ok {
		return -1
	}
	gen.i, gen.cw = k, cw
	return int(gen.pos[k])
}

// lvsWeights are the weights the LVS scheduler runs over, of the members
// that are not down, with their gcd and maximum.
type lvsWeights struct {
	pos    []int32 // positions in g.members, in order
	weight []int64
	gcd    int64
	max    int64
}

// lvsJump returns the LVS state (member k, current weight cw) of the next
// member after state (i, cw) that may be picked now, skipping every member
// that may not, as stepping would but in O(n): the rest of the current
// round, else the first round whose current weight the heaviest member that
// may be picked reaches (rounds above it hold only members that may not).
// ok is false when no member may be picked. (Only after a lap of misses:
// a ramping member it lands on takes that turn whatever its share.)
func lvsJump(g *group, r *request, w *lvsWeights, i int, cw int64) (int, int64, bool) {
	top := int64(0)
	for k, p := range w.pos {
		if w.weight[k] > top && usable(r, g.members[p]) {
			top = w.weight[k]
		}
	}
	if top == 0 {
		return 0, 0, false
	}
	for k := i + 1; k < len(w.pos); k++ {
		if w.weight[k] >= cw && usable(r, g.members[w.pos[k]]) {
			return k, cw, true
		}
	}
	if cw -= w.gcd; cw <= 0 {
		cw = w.max
	}
	if cw > top {
		cw = top // every weight, so top and cw, is a multiple of the gcd
	}
	for k, p := range w.pos {
		if w.weight[k] >= cw && usable(r, g.members[p]) {
			return k, cw, true
		}
	}
	return 0, 0, false // eligibility changed meanwhile
}

// lvsGen is the LVS scheduler's state over the members that are not down.
type lvsGen struct {
	lvsWeights
	period int64 // picks in one period: the sum of the weights over the gcd
	i      int   // the last member considered
	cw     int64 // the current weight
}

// newLVSGen returns the scheduler in its initial state (before the first
// member, cw 0), or nil when every member is down.
func newLVSGen(g *group) *lvsGen {
	gen := &lvsGen{}
	sum := int64(0)
	for i, m := range g.members {
		if m.down {
			continue
		}
		w := int64(m.weight)
		gen.pos = append(gen.pos, int32(i))
		gen.weight = append(gen.weight, w)
		gen.gcd = gcd(gen.gcd, w)
		if w > gen.max {
			gen.max = w
		}
		sum += w
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
