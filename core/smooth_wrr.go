package core

import "sync/atomic"

// SmoothWRR names the smooth_wrr strategy in Config.Strategy.
const SmoothWRR = "smooth_wrr"

func init() {
	register(SmoothWRR, strategyInfo{smooth: always, build: buildSmoothWRR})
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
// period's position 0), otherwise when a run of W_S/gcd_S unperturbed
// passes over one set S of members (each taking part at its configured
// weight, the others left out: those the caller refuses, as its health
// checks do) ends in the state it started from. Those picks, recorded, are
// then the learned orbit, that state its base, S its members. (Unperturbed,
// nginx's state over S is periodic with that period from any state, after a
// transient shorter than one period, while the members left out keep their
// current weights; so the return takes at most about two periods of exact
// passes.) A health change is then a switch to exact mode and, two periods
// later, a table over the new set: picks stay O(1) while backends are out.
//
// A table pick first makes sure nginx's pass would see exactly the table's
// members: O(1) without a caller's filter and without max_conns or
// max_fails; O(members with those flags) with them; with a caller's filter
// (a Filter), one call of it per member, since nginx's state depends on each
// answer; with a versioned filter (Filter.Version) at the version the orbit was
// learnt with, O(1) again. Under concurrent picks the order of picks is not
// defined, as in nginx with several workers; while nothing perturbs the
// schedule, every whole period still gives each member exactly its weight's
// share. Beyond the schedule bound the exact mode is all there is.
type smoothWRR struct {
	table []int32 // the canonical period; nil beyond the bound
	cur   *cursor // the canonical period's cursor

	// sched is the group's schedule, which Balancer.Pick reads too. Its
	// mode (in sched.gate) is 0 in exact mode, 1 when nginx's state is the
	// position of the canonical period's cursor (sched.orbits[0]), 2 when it
	// is the position of the learned orbit's.
	sched *schedule
	// learned is the learned orbit (an *orbit), a new one each time exact
	// mode learns one, immutable once stored: a pick that loaded the mode
	// just before a switch may still read the one it found.
	learned atomic.Value
	// fullSet is the fingerprint (see smoothState.set) of every member that
	// is not down.
	fullSet uint64

	// Exact mode's bookkeeping, under g.smooth.mu: the recording of an
	// orbit (see record).
	rec          int     // unperturbed passes recorded into recTable
	count        []int   // scratch: picks per member in a table prefix
	recTable     []int32 // the picks recorded, one period at most
	recBase      []int64 // nginx's current weights before the first of them
	recIn        []bool  // the members taking part
	recSet       uint64  // their fingerprint
	recTotal     int64   // their weights' sum, in units
	recPeriod    int     // the passes after which the state must be back at recBase
	recVersion   uint64  // the caller's version of its filter, when recVersioned
	recVersioned bool
	recQuiet     bool // the group was quiet at every pass recorded
}

func buildSmoothWRR(g *group, c *Config) (strategy, error) {
	return newSmoothWRR(g, staggerStart(c)), nil
}

// newSmoothWRR returns nginx's smooth weighted round robin over g, in table
// mode at position start of its canonical period (reduced modulo the
// period), and gives g the table strategies' table; beyond the schedule
// bound, in exact mode for good.
func newSmoothWRR(g *group, start uint64) *smoothWRR {
	s := &smoothWRR{sched: &g.sched}
	for i, m := range g.members {
		if !m.down {
			s.fullSet ^= g.smooth.tag[i]
		}
	}
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
	o := &orbit{table: s.table, cur: s.cur}
	markOrbit(o, len(g.members))
	s.sched.follow(1, o)
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

// pickSmoothWRR is the pick with the request by pointer, for least_conn's
// pass among every member too.
func pickSmoothWRR(s *smoothWRR, g *group, r *request) int {
	// A pick from the canonical table is nginx's only when nginx's pass
	// would see every member that is not down: a member skipped gains no
	// weight and shrinks the total the chosen one gives up, so it moves
	// nginx off the table's orbit even when it is not the member the table
	// schedules. A learned orbit holds while the members it was learnt over
	// are exactly the ones nginx's pass would see (onOrbit). One load of the
	// gate gives the mode and the steadiness.
	gate := s.sched.gate.Load()
	if k := gate & modeMask; k != 0 && gate>>modeBits == 0 {
		if k == 1 {
			if allEligible(g, r) {
				o := s.sched.orbits[0]
				return int(o.table[o.cur.take(1)])
			}
		} else if o, _ := s.learned.Load().(*orbit); o != nil && onOrbit(s, g, r, o) {
			if pos := int(o.table[o.cur.take(1)]); r.version == 0 || usable(r, g.members[pos]) {
				return pos
			}
			// The caller's answers changed under one version: the entry is
			// used up, and nginx's pass goes on from there.
		}
	}
	return s.exact(g, r)
}

// onOrbit reports whether the members nginx's pass would see now are the
// ones learned orbit o was learnt over. O(1) for a versioned filter at the
// version o holds while the group is quiet; otherwise it asks about every
// member, and a versioned filter found to give o's answers becomes o's
// version (o is replaced by a copy that holds it), so that the picks after
// are O(1) again.
func onOrbit(s *smoothWRR, g *group, r *request, o *orbit) bool {
	if o.in == nil {
		return allEligible(g, r)
	}
	if r.version != 0 && o.versioned && r.version == o.version && o.quiet && isQuiet(g) {
		return true
	}
	for i, m := range g.members {
		if m.down {
			continue
		}
		// usable, with the filter called directly for a plain member, as
		// checkAll does: the loop's cost is the filter's.
		ok := false
		if m.plain {
			ok = r.avail == nil || r.avail(m.index)
		} else {
			ok = check(r, m)
		}
		if ok != o.in[i] {
			return false
		}
	}
	if r.version != 0 && o.quiet && isQuiet(g) {
		c := *o // the slices and the cursor are shared: none changes
		c.version, c.versioned = r.version, true
		s.learned.CompareAndSwap(o, &c)
	}
	return true
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
		leaveTable(s, g, k)
	}
	best := smoothPass(g.smooth, g, r, among)
	if best >= 0 {
		follow(s, g, r, best, among != nil)
	}
	return best
}

// leaveTable switches the schedule from table mode k (1 or 2) to exact
// mode, seeding g.smooth's current weights from the table's position.
// Called with g.smooth.mu held.
func leaveTable(s *smoothWRR, g *group, k int64) {
	o := s.sched.orbits[0]
	if k == 2 {
		o = s.learned.Load().(*orbit)
	}
	s.seed(g, o, int(o.cur.n.Load()%o.cur.size))
	s.sched.setMode(0)
	s.rec = 0
}

// markOrbit gives orbit o, over n members, its marks: a row of counts every
// stride entries, stride at least n, so that they take about as much room
// as the table.
func markOrbit(o *orbit, n int) {
	o.stride = n
	if o.stride < 64 {
		o.stride = 64
	}
	rows := len(o.table)/o.stride + 1
	o.marks = make([]int32, rows*n)
	for c := 1; c < rows; c++ {
		row := o.marks[c*n : (c+1)*n]
		copy(row, o.marks[(c-1)*n:c*n])
		for _, p := range o.table[(c-1)*o.stride : c*o.stride] {
			row[p]++
		}
	}
}

// seed sets g.smooth's current weights to nginx's state at position p of
// orbit o: a member that takes part in o is at base + p*weight - total*picks
// (its picks in o's first p entries), one that does not stays at base.
// Effective weights need no seeding: g.smooth holds them in every mode (a
// failure lowers them at once), and table mode runs only while they are all
// at their configured weights. Called with g.smooth.mu held; O(n + stride),
// from the last mark at or before p.
func (s *smoothWRR) seed(g *group, o *orbit, p int) {
	sm := g.smooth
	n := len(s.count)
	c := p / o.stride
	for i := range s.count {
		s.count[i] = int(o.marks[c*n+i])
	}
	for j := c * o.stride; j < p; j++ {
		s.count[o.table[j]]++
	}
	total := o.total
	if total == 0 {
		total = sm.upTotal
	}
	for i, m := range g.members {
		if m.down {
			sm.current[i] = 0 // nginx never adds weight to a down peer
			continue
		}
		var cw int64
		if o.base != nil {
			cw = o.base[i]
		}
		if o.in == nil || o.in[i] {
			cw += int64(p)*sm.wunit[i] - total*int64(s.count[i])
		}
		sm.current[i] = cw
	}
}

// follow watches exact mode's passes for nginx's state coming back onto an
// unperturbed orbit, and returns to table mode when it does. best is the
// pass's pick; among says it was a pass among some members only. Called
// with g.smooth.mu held. It is a function with few values, and what an
// unperturbed pass records is in record: most passes that are not clean
// (least_conn's among some tied members) end here (see interp.go for why
// that matters).
func follow(s *smoothWRR, g *group, r *request, best int, among bool) {
	sm := g.smooth
	if sm.current[best] == 0 && (among || sm.set == s.fullSet) && allZero(sm.current) {
		// nginx's initial state: the canonical period's position 0. (Not
		// after a pass over some members: their orbit may come by this
		// state every period, and it is theirs that goes on.)
		s.resume()
		return
	}
	if among || !sm.clean {
		s.rec = 0
		return
	}
	record(s, g, r, best)
}

// record adds an unperturbed pass, which picked best, to the recording of an
// orbit: nginx's passes over one set of members, every one at its configured
// weight. Unperturbed, nginx's state over a set is periodic with period
// W/gcd of the set's weights (the members left out keep their current
// weights), after a transient shorter than one period; so when a run of that
// many passes ends in the state it started from, those picks are the orbit,
// and the schedule follows it. A pass over another set, or with the
// caller's version of its filter changed while the set is the same, starts
// or updates the recording. Called with g.smooth.mu held.
func record(s *smoothWRR, g *group, r *request, best int) {
	sm := g.smooth
	if s.rec > 0 && (sm.set != s.recSet || sm.partTotal != s.recTotal) {
		s.rec = 0
	}
	if s.rec == 0 && !startRecord(s, g, r, best) {
		return
	}
	s.recTable[s.rec] = int32(best)
	s.rec++
	s.recVersioned = s.recVersioned && r.version != 0
	s.recVersion = r.version
	s.recQuiet = s.recQuiet && isQuiet(g)
	if s.rec < s.recPeriod {
		return
	}
	learn(s, g)
}

// learn ends a recording of s.recPeriod passes: when nginx's state is back
// where the recording began, its picks are the orbit, and the schedule
// follows it. (A function of its own, so that record, called on every
// unperturbed pass, does not carry its values: see interp.go.) Called with
// g.smooth.mu held.
func learn(s *smoothWRR, g *group) {
	sm := g.smooth
	s.rec = 0
	for i, cw := range sm.current {
		if cw != s.recBase[i] {
			return // still in the transient: record the next period
		}
	}
	o := &orbit{
		table:     append([]int32(nil), s.recTable[:s.recPeriod]...),
		base:      append([]int64(nil), s.recBase...),
		cur:       newCursor(s.recPeriod, 0),
		total:     s.recTotal,
		version:   s.recVersion,
		versioned: s.recVersioned,
		quiet:     s.recQuiet,
	}
	if s.recSet != s.fullSet {
		o.in = append([]bool(nil), s.recIn...)
	}
	markOrbit(o, len(g.members))
	s.learned.Store(o)
	s.sched.setMode(2)
}

// startRecord begins a recording with the pass that just picked best: it
// notes the members that took part, the period of their orbit and the state
// before the pass. It reports false when the caller's answers changed since
// the pass (the members it names now are not the pass's).
func startRecord(s *smoothWRR, g *group, r *request, best int) bool {
	sm := g.smooth
	if s.recTable == nil {
		s.recTable = make([]int32, len(s.table))
		s.recBase = make([]int64, len(g.members))
		s.recIn = make([]bool, len(g.members))
	}
	set, d := uint64(0), int64(0)
	for i, m := range g.members {
		in := !m.down && (sm.set == s.fullSet || usable(r, m))
		s.recIn[i] = in
		if in {
			set ^= sm.tag[i]
			d = gcd(d, int64(m.weight))
		}
	}
	if set != sm.set || d == 0 {
		return false
	}
	// The state before this pass: every member that took part gained its
	// weight, and best gave up their total.
	for i, cw := range sm.current {
		s.recBase[i] = cw
		if s.recIn[i] {
			s.recBase[i] -= sm.wunit[i]
		}
	}
	s.recBase[best] += sm.partTotal
	s.recSet, s.recTotal = sm.set, sm.partTotal
	s.recPeriod = int(sm.partTotal / smoothUnit / d) // at most the canonical period
	s.recVersioned, s.recQuiet = r.version != 0, true
	return true
}

// resume returns to table mode at position 0 of the canonical period.
// Called with g.smooth.mu held.
func (s *smoothWRR) resume() {
	s.rec = 0
	s.sched.orbits[0].cur.n.Store(0)
	s.sched.setMode(1)
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
