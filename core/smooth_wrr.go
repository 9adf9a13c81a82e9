package core

import "sync/atomic"

func init() {
	register(SmoothWRR, strategyInfo{build: buildSmoothWRR})
}

// Bounds on the precomputed schedules of smooth_wrr and gcd_wrr. A period of
// at most MaxScheduleEntries picks is stored as one int32 per pick (4 MiB at
// the bound) when building it takes at most maxScheduleWork steps; beyond
// either bound the strategy runs its exact scheduler pick by pick instead.
// smooth_wrr allocates a second period of the same size the first time it
// learns an orbit after a disturbance. Weights of 1..10 over 100,000
// backends, or 1..100 over 10,000, fit.
const (
	// MaxScheduleEntries is the longest period, in picks, that smooth_wrr
	// and gcd_wrr precompute.
	MaxScheduleEntries = 1 << 20
	maxScheduleWork    = 1 << 27
)

// smoothWRR is nginx's smooth weighted round robin, with one authoritative
// nginx state at every moment, held in one of two forms:
//
//   - table mode: nginx's state is implicit in a position p of a precomputed
//     period (the orbit nginx's state runs through while nothing perturbs it),
//     read through an atomic cursor: O(1), lock-free, allocation-free. Member
//     i's current weight at position p is base_i + p*w_i - W*c_i(p), with base
//     the state at position 0 (zero for the canonical period that starts from
//     nginx's initial state), W the sum of the weights, and c_i(p) the picks
//     of i in table[0:p].
//   - exact mode: nginx's O(n) pass over g.smooth's current and effective
//     weights, under the group's lock.
//
// The first pick the table cannot serve (a member that is not down is
// ineligible: refused by the caller, full, failed, whether or not the table
// schedules it; or a member is unsteady: lowered by failures, ramping)
// switches to exact mode, seeding g.smooth's current weights from the table
// position, so that nginx's sequence goes on exactly.
// Exact mode returns to a table as soon as nginx's state is back on an orbit
// nothing perturbs: at once when every current weight is 0 (the canonical
// period's position 0), otherwise when a run of W/gcd unperturbed passes
// (every member taking part at its configured weight) ends in the state it
// started from. Those picks, recorded, are then the learned period and that
// state its base. (Unperturbed, nginx's state is periodic with that period
// from any state, after a transient shorter than one period, so the return
// takes at most about two periods of exact passes.)
//
// A table pick first makes sure nginx's pass would see every member that is
// not down: O(1) without a caller's filter and without max_conns or
// max_fails; O(members with those flags) with them; with a caller's filter
// (PickFunc), one call of it per member, since nginx's state depends on each
// answer. Under concurrent picks the order of picks is not defined, as in
// nginx with several workers; while nothing perturbs the schedule, every
// whole period still gives each member exactly its weight's share. Beyond
// the schedule bound the exact mode is all there is.
type smoothWRR struct {
	table []int32 // the canonical period; nil beyond the bound
	cur   *cursor // the canonical period's cursor

	// sched is the group's schedule, which Balancer.Pick reads too. Its
	// mode (in sched.gate) is 0 in exact mode, k when nginx's state is the position of
	// orbits[k-1]'s cursor; the orbits are the canonical period and the
	// learned one. The learned orbit's entries are read and written
	// atomically: a pick that loaded the mode just before a switch may still
	// read it while exact mode records a new period into it.
	sched *schedule

	// Exact mode's bookkeeping, under g.smooth.mu.
	rec   int   // unperturbed passes recorded into orbits[1]
	count []int // scratch: picks per member in a table prefix
}

func buildSmoothWRR(g *group, c *Config) (strategy, error) {
	return newSmoothWRR(g, staggerStart(c)), nil
}

// newSmoothWRR returns nginx's smooth weighted round robin over g, in table
// mode at position start of its canonical period (reduced modulo the
// period), and gives g the table strategies' quick path; beyond the schedule
// bound, in exact mode for good.
func newSmoothWRR(g *group, start uint64) *smoothWRR {
	s := &smoothWRR{sched: &g.sched}
	gen := newSmoothGen(g)
	if gen == nil || gen.period > MaxScheduleEntries || gen.period*int64(len(gen.classes)) > maxScheduleWork {
		return s
	}
	s.table = make([]int32, gen.period)
	for i := range s.table {
		s.table[i] = int32(gen.next())
	}
	s.cur = newCursor(len(s.table), start)
	s.count = make([]int, len(g.members))
	s.sched.follow(1, &orbit{table: s.table, cur: s.cur})
	g.setSchedule(s.table, s.cur)
	return s
}

// staggerStart returns where a schedule's cursor starts: 0, or a random point
// with Config.Stagger (the cursor reduces it modulo the period).
func staggerStart(c *Config) uint64 {
	if !c.Stagger {
		return 0
	}
	return c.Rand()
}

func (s *smoothWRR) pick(g *group, r request) int { return pickSmoothWRR(s, g, &r) }

// pickSmoothWRR is the pick as a plain function, which pickIn calls without going
// through the interface.
func pickSmoothWRR(s *smoothWRR, g *group, r *request) int {
	// A pick from the table is nginx's only when nginx's pass would see
	// every member that is not down: a member skipped gains no weight and
	// shrinks the total the chosen one gives up, so it moves nginx off the
	// table's orbit even when it is not the member the table schedules.
	// One load of the gate gives the mode and the steadiness.
	gate := s.sched.gate.Load()
	if k := gate & modeMask; k != 0 && gate>>modeBits == 0 && allEligible(g, r) {
		o := s.sched.orbits[k-1]
		return int(atomic.LoadInt32(&o.table[o.cur.take(1)]))
	}
	return s.exact(g, r)
}

// exact makes the pick by nginx's pass, first leaving table mode if the
// schedule is still in it.
func (s *smoothWRR) exact(g *group, r *request) int {
	sm := g.smooth
	if s.table == nil {
		return sm.next(g, r, nil)
	}
	sm.mu.Lock()
	best := exactPass(s, g, r, nil)
	sm.mu.Unlock()
	return best
}

// exactPass is nginx's pass over the members among lists (nil: every
// eligible member) in exact mode, which it enters first if the schedule is
// in table mode, and after which it watches for the return to a table (see
// follow). A pass over some of the members only (least_conn's ties) is a
// perturbation like any other. Called with g.smooth.mu held. (A function,
// as the pick path's helpers are: see pickFrom.)
func exactPass(s *smoothWRR, g *group, r *request, among []int) int {
	if s.table == nil {
		return smoothPass(g.smooth, g, r, among)
	}
	if k := s.sched.gate.Load() & modeMask; k != 0 { // s.sched.mode()
		o := s.sched.orbits[k-1]
		s.seed(g, o, int(o.cur.n.Load()%o.cur.size))
		s.sched.setMode(0)
		s.rec = 0
	}
	best := smoothPass(g.smooth, g, r, among)
	if best >= 0 {
		follow(s, g, best)
	}
	return best
}

// seed sets g.smooth's current weights to nginx's state at position p of
// orbit o. Effective weights need no seeding: g.smooth holds them in every
// mode (a failure lowers them at once), and table mode runs only while they
// are all at their configured weights. Called with g.smooth.mu held; O(p + n).
func (s *smoothWRR) seed(g *group, o *orbit, p int) {
	sm := g.smooth
	for i := range s.count {
		s.count[i] = 0
	}
	for j := 0; j < p; j++ {
		s.count[atomic.LoadInt32(&o.table[j])]++
	}
	for i, m := range g.members {
		if m.down {
			sm.current[i] = 0 // nginx never adds weight to a down peer
			continue
		}
		cw := (int64(p)*int64(sm.weight[i]))*smoothUnit - sm.upTotal*int64(s.count[i])
		if o.base != nil {
			cw += o.base[i]
		}
		sm.current[i] = cw
	}
}

// follow watches exact mode's passes for nginx's state coming back onto an
// unperturbed orbit, and returns to table mode when it does. best is the
// pass's pick. Called with g.smooth.mu held. It is a function with few
// values, and what an unperturbed pass records is in record: most passes
// that are not full (least_conn's among some tied members) end here, and
// under the interpreter a call pays for every value of its function.
func follow(s *smoothWRR, g *group, best int) {
	sm := g.smooth
	if sm.current[best] == 0 && allZero(sm.current) {
		// nginx's initial state: the canonical period's position 0.
		s.resume(0)
		return
	}
	if !sm.full {
		s.rec = 0
		return
	}
	s.record(g, best)
}

// record adds an unperturbed pass, which picked best, to the learned
// orbit, and returns to table mode when the orbit closes. Called with
// g.smooth.mu held.
func (s *smoothWRR) record(g *group, best int) {
	sm := g.smooth
	o := s.sched.orbits[1]
	if o == nil {
		o = &orbit{
			table: make([]int32, len(s.table)),
			base:  make([]int64, len(g.members)),
			cur:   newCursor(len(s.table), 0),
		}
		s.sched.orbits[1] = o
	}
	if s.rec == 0 {
		// The state before this pass: every member that is not down gained
		// its weight, and best gave up the total.
		for i, m := range g.members {
			o.base[i] = sm.current[i]
			if !m.down {
				o.base[i] -= int64(sm.weight[i]) * smoothUnit
			}
		}
		o.base[best] += sm.upTotal
	}
	atomic.StoreInt32(&o.table[s.rec], int32(best))
	s.rec++
	if s.rec < len(o.table) {
		return
	}
	s.rec = 0
	for i, cw := range sm.current {
		if cw != o.base[i] {
			return // still in the transient: record the next period
		}
	}
	s.resume(1)
}

// resume returns to table mode at position 0 of orbit k (0 canonical, 1
// learned). Called with g.smooth.mu held.
func (s *smoothWRR) resume(k int) {
	s.rec = 0
	s.sched.orbits[k].cur.n.Store(0)
	s.sched.setMode(k + 1)
}

func allZero(v []int64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
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
	// 64-bit: on 32-bit platforms t*weight passes 2^31 within the bound.
	total   int64 // W: the sum of the scaled weights
	period  int64 // picks in one period: total
	t       int64 // picks made in the current period
	classes []smoothClass
}

// smoothClass is the members of one weight, in configuration order.
type smoothClass struct {
	weight int64   // scaled
	pos    []int32 // positions in g.members, ascending
	next   int     // index in pos of the member whose turn it is
	rounds int64   // complete rotations in the current period
}

// newSmoothGen returns a generator at the start of the period, or nil when
// every member is down.
func newSmoothGen(g *group) *smoothGen {
	d := int64(0)
	for _, m := range g.members {
		if !m.down {
			d = gcd(d, int64(m.weight))
		}
	}
	if d == 0 {
		return nil
	}
	gen := &smoothGen{}
	class := make(map[int64]int)
	for i, m := range g.members {
		if m.down {
			continue
		}
		w := int64(m.weight) / d
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
	var bestKey int64
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

// gcd is the greatest common divisor, in 64 bits so that sums of weights fit
// on 32-bit platforms too.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
