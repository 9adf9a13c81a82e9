package core

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
)

// A strategy chooses among the members of one group: the primary backends,
// or the backup backends when no primary is available.
type strategy interface {
	// pick returns the chosen member's position in g.members, or -1 when no
	// member is eligible (r.ok is false for all of them).
	pick(g *group, r request) int
}

// strategyInfo describes one strategy for the registry.
type strategyInfo struct {
	// hashed strategies pick by key; like nginx, they refuse backup
	// backends and slow starts.
	hashed bool
	// counts and times are the strategy's Traits.Counts and Times for a
	// config (url_hash counts in its bounded mode only); nil is false.
	counts, times func(c *Config) bool
	// failStatus is Traits.FailStatus.
	failStatus string
	// total says whether a balancer New builds from c counts requests in
	// flight over all its backends too (Update keeps the answer: a count
	// begun later would miss the requests already in flight); nil is
	// false.
	total func(c *Config) bool
	// smooth says whether the strategy's table follows nginx's effective
	// weights (smooth_wrr's schedule, least_conn's ties), so that a member
	// whose effective weight a failure lowered makes the group unsteady;
	// nil is false.
	smooth func(c *Config) bool
	// build makes the strategy's state for one group, or rejects the options.
	build func(g *group, c *Config) (strategy, error)
}

// traits returns what the strategy needs from its host for config c.
func (info strategyInfo) traits(c *Config) Traits {
	t := Traits{Key: info.hashed, SlowStart: !info.hashed, Backup: !info.hashed, FailStatus: info.failStatus}
	t.Counts = info.counts != nil && info.counts(c)
	t.Times = info.times != nil && info.times(c)
	return t
}

// always is a strategyInfo's counts or times for a strategy that always
// counts or times.
func always(*Config) bool { return true }

// Traits says what a strategy needs from the host that runs it, as the
// strategy declares it: the plugins and the nginx converter read it instead
// of knowing each strategy by name.
type Traits struct {
	// Key: a pick hashes a key the host supplies (ip_hash: the client's
	// address; url_hash: the key it is configured with).
	Key bool
	// Counts: the balancer counts requests in flight (least_conn, fair,
	// url_hash's bounded mode; a backend with max_conns makes any
	// strategy's balancer count), so every request a pick begins must
	// reach Done (its ticket is never 0).
	Counts bool
	// Times: the strategy keeps a latency estimate of each backend (fair),
	// so Done must be given the answer's real latency (or SincePick).
	Times bool
	// SlowStart and Backup: backends may have a slow start, or be
	// backups. The hash strategies refuse both, as nginx refuses backups
	// (and NGINX Plus slow_start) with its hash methods: a key's backend
	// follows the configured weights.
	SlowStart, Backup bool
	// FailStatus lists the answer statuses that count as a backend's
	// failure by default, as ParseStatuses reads them ("5xx" for fair,
	// whose estimate must not reward fast failures); "" for none.
	FailStatus string
}

// TraitsOf returns what strategy needs from its host, with url_hash's hash
// mode (the other strategies take none).
func TraitsOf(strategy, hashMode string) (Traits, error) {
	info, ok := strategies[strategy]
	if !ok {
		return Traits{}, fmt.Errorf("lbpack: strategy %q: unknown (want one of %s)", strategy, strategyNames())
	}
	return info.traits(&Config{Strategy: strategy, HashMode: hashMode}), nil
}

// strategies is the registry; each strategy's file adds itself in init.
var strategies = map[string]strategyInfo{}

func register(name string, info strategyInfo) { strategies[name] = info }

// Strategies returns the names of every strategy, sorted.
func Strategies() []string {
	names := make([]string, 0, len(strategies))
	for name := range strategies {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func strategyNames() string { return strings.Join(Strategies(), ", ") }

// group is the set of backends one strategy instance chooses among.
type group struct {
	members []*member
	// counts and milli hold, by position, what least_conn's scans read of
	// each member: its count of requests in flight and its configured
	// weight in thousandths, one index away.
	counts []*atomic.Int64
	milli  []int64
	picks  []*atomic.Int64 // fair's lastPick, likewise
	// board is fair's estimates of a group it scores in whole, for its
	// steady read (see fairBoard); nil otherwise.
	board *fairBoard
	// lookLen is len(look), as the table reads divide by it; fairAll is
	// true when fair scores the group in whole.
	lookLen uint64
	fairAll bool
	// gate is &sched.gate, one selector shorter.
	gate *atomic.Int64
	// allMask has a bit for each member, up to tieBits (least_conn's tie
	// masks).
	allMask uint64
	// leastScan is true when least_conn's steady read may scan the group:
	// every member is up, none has max_conns, and a tie fits a mask.
	leastScan bool
	// watch is failing when a member has max_fails or max_conns, and
	// otherwise a count that stays 0 (noFailing): a group that is not
	// capped is quiet while it reads 0, in one load (isQuiet).
	watch *atomic.Int32
	// totalWeight counts every member, down ones too: nginx's hash walks use
	// it so that marking a backend down does not remap the others.
	totalWeight int64 // 64-bit: on 32-bit platforms an int sum wraps
	strategy    strategy
	// smooth is nginx's exact smooth weighted round robin over this group:
	// smooth_wrr's path when its table does not apply, the tie-break of
	// least_conn, and the fallback of the hash strategies after 20 tries.
	smooth *smoothState
	// ties is least_conn's smooth_wrr among tied members (tiedPass), nil
	// for the other strategies.
	ties *smoothWRR
	// decay is fair's latency decay time in ns; 0 when the strategy does not
	// estimate latency, so that Done reads no clock for it.
	decay int64
	// fold is fair's batching time in ns (see Report), probe the time
	// after which an unpicked member is due for its probe.
	fold, probe int64
	// ramps counts the members in slow start (they are also in unsteady);
	// while it is 0, scans skip every member's ramp check.
	ramps atomic.Int32
	// plain is true when no member is down or has max_conns or max_fails:
	// then, without a caller's filter, every member is eligible.
	plain bool
	// flagged lists the members that are not down and have max_conns or
	// max_fails: without a caller's filter, only they can be ineligible.
	flagged []int32
	// allUp is true when no member is down.
	allUp bool
	// capped is true when a member that is not down has max_conns: only a
	// look at its requests in flight tells whether it is eligible.
	capped bool
	// failing is the balancer's count of backends with failures (shared by
	// every balancer Update derives from one New). While it is 0 and the
	// group is not capped, every flagged member is eligible: a member with
	// max_fails is out only after failures.
	failing *atomic.Int32
	// lowUnsteady says whether a member whose effective weight is lowered
	// counts as unsteady (strategyInfo.smooth): not for the others, whose
	// tables do not follow effective weights (a hash strategy's maps keys
	// by configured weight; only its round-robin fallback runs nginx's
	// smooth pass, which reads the effective weights itself).
	lowUnsteady bool
	// penalize says whether a failure lowers the member's effective weight:
	// for the strategies that run nginx's smooth pass (smooth_wrr, least_conn's
	// ties, the hash strategies' fallback: strategyInfo.smooth or hashed), as
	// nginx does. The others have no
	// effective weight, and nothing would ever restore it.
	penalize bool
	// sched is the schedule of a table strategy (smooth_wrr, gcd_wrr,
	// round_robin), which Pick follows inline while it is exact. Its gate
	// also counts, for every strategy, the unsteady members: those whose
	// weight nginx would not use as configured right now (an effective
	// weight lowered by failures, or a slow start in progress). While any
	// is, strategies with precomputed tables take nginx's exact path.
	sched schedule
	// table is the kind of the group's table (see table.go).
	table int
	// look is the group's table: a backend index per entry, or -1 where
	// the full pick answers.
	look []int32
	// cur is the table strategies' cursor into look, and fair's pick
	// counter.
	cur *cursor
	// lookShift and lookSize place a key's hash in look: ketama's bucket
	// and modulo's first hash are read at crc >> lookShift; maglev's slot
	// is a multiply-shift onto lookSize.
	lookShift uint
	lookSize  uint64
	// lookScale is bounded's c / W (W the total weight of the members not
	// down): the cap per unit of weight per request in flight.
	lookScale float64
}

// schedule is a table strategy's precomputed cycle of member positions, as
// Pick's fast path reads it. The table is exact, and Pick takes its next
// entry without asking the strategy, while every member is steady and
// eligible (see isQuiet); otherwise Pick goes through the strategy, which
// knows what to do instead.
type schedule struct {
	// gate is the one word Pick's fast path loads. Its low byte is the mode:
	// 0 while no table applies (none was built, or smooth_wrr runs nginx's
	// exact pass), k while orbits[k-1] does. The bits above count the
	// group's unsteady members. So gate == 1 says, in one atomic load, that
	// the canonical table applies and every member is steady.
	gate   atomic.Int64
	orbits [2]*orbit
}

// modeBits is the width of the mode in schedule.gate.
const (
	modeBits = 8
	modeMask = 1<<modeBits - 1
)

// mode returns the schedule's mode (see gate).
func (s *schedule) mode() int64 { return s.gate.Load() & modeMask }

// setMode sets the mode and keeps the count of unsteady members.
func (s *schedule) setMode(k int) {
	for {
		old := s.gate.Load()
		if s.gate.CompareAndSwap(old, old&^modeMask|int64(k)) {
			return
		}
	}
}

// orbit is one period of a schedule, immutable once in use (smooth_wrr
// publishes each orbit it learns as a new one).
type orbit struct {
	table []int32 // member positions, one period
	// base is smooth_wrr's nginx current weights (in smoothUnit) at
	// position 0; nil means all 0 (the canonical period).
	base []int64
	cur  *cursor
	// smooth_wrr's learned orbits: in lists the members that take part (nil:
	// every member that is not down), total is the sum of their weights in
	// units (0: the group's upTotal). An orbit over some members, learnt
	// from picks with a caller's filter, holds while that filter refuses
	// exactly the others: while a versioned filter (Filter.Version) keeps the
	// version it was learnt with, and the group is quiet (quiet says it was
	// while learning), that is known in O(1).
	in        []bool
	total     int64
	version   uint64
	versioned bool
	quiet     bool
	// marks[c*n+i] counts member i's entries in table[0:c*stride] (smooth_wrr,
	// n members), so that seeding nginx's state at any position costs
	// O(n + stride), not O(position).
	marks  []int32
	stride int
}

// follow makes orbit o, at the schedule's k-th place, the one Pick follows.
func (s *schedule) follow(k int, o *orbit) {
	s.orbits[k-1] = o
	s.setMode(k)
}

// isQuiet reports, in O(1), whether every member that is not down is
// eligible when the caller has no filter. It may say no when the members are
// in fact eligible (then the caller checks them one by one), never the
// reverse. (This and the other helpers of the pick path are functions, not
// methods, to keep the pick path's calls plain.)
func isQuiet(g *group) bool {
	return !g.capped && g.watch.Load() == 0
}

// addUnsteady changes the number of unsteady members by d.
func (g *group) addUnsteady(d int64) { g.sched.gate.Add(d << modeBits) }

func newGroup(members []*member, info strategyInfo, b *Balancer) (*group, error) {
	c := &b.cfg
	g := &group{members: members, failing: b.failing}
	g.gate = &g.sched.gate
	g.penalize = info.smooth != nil || info.hashed
	g.lowUnsteady = info.smooth != nil && info.smooth(c)
	g.plain, g.allUp = true, true
	g.counts = make([]*atomic.Int64, len(members))
	g.milli = make([]int64, len(members))
	for i, m := range members {
		g.counts[i], g.milli[i] = &m.state.inflight, int64(m.weight)*1000
		g.totalWeight += int64(m.weight)
		g.plain = g.plain && m.plain
		g.allUp = g.allUp && !m.down
		if !m.plain && !m.down {
			g.flagged = append(g.flagged, int32(i))
			g.capped = g.capped || m.maxConns > 0
		}
		m.group = g
		m.pos = i
		m.state.owner.Store(m)
		if m.slowStart > 0 && m.state.ramp.Load() != 0 {
			m.markRamp() // a new backend, or one still ramping before Update
		}
	}
	g.watch = &noFailing
	if len(g.flagged) > 0 {
		g.watch = g.failing
	}
	g.smooth = newSmoothState(g)
	s, err := info.build(g, c)
	if err != nil {
		return nil, err
	}
	g.strategy = s
	return g, nil
}

// chosen does nginx's bookkeeping for the member a pick chose and returns its
// backend index: a member whose fail_timeout has passed gets one probe per
// window, so its "checked" time moves to now. While a member has no failures
// its checked time is never read (the next failure overwrites it), so the
// clock is read only for members with failures.
func chosen(g *group, pos int, r request) int {
	m := g.members[pos]
	if m.maxFails > 0 && m.state.fails.Load() != 0 {
		now := r.now()
		if now-m.state.checked.Load() > m.failTimeout {
			m.state.checked.Store(now)
		}
	}
	return m.index
}

// simpleScan tells a scan over all members whether it may skip every
// eligibility check for this pick: no member can be ineligible now (no
// caller's filter, and no flags, or no member down and the group quiet).
// (The scan may skip every ramp check when g.ramps is 0.)
func simpleScan(g *group, r *request) bool {
	return r.avail == nil && (g.plain || g.allUp && isQuiet(g))
}

// allEligible reports whether every member that is not down may be picked
// now. Without a caller's filter it looks at the members with max_conns or
// max_fails only, and at none of them while quiet; with a filter, it asks the
// filter about every member.
func allEligible(g *group, r *request) bool {
	if r.avail == nil && isQuiet(g) {
		return true
	}
	return checkAll(g, r)
}

func checkAll(g *group, r *request) bool {
	if r.avail == nil {
		for _, p := range g.flagged {
			if !check(r, g.members[p]) {
				return false
			}
		}
		return true
	}
	for _, m := range g.members {
		if m.plain {
			if !r.avail(m.index) {
				return false
			}
		} else if !m.down && !check(r, m) {
			return false
		}
	}
	return true
}

// request is one pick's inputs, passed by value through the strategies.
type request struct {
	key   string
	avail func(int) bool
	b     *Balancer
	nowNs int64 // 0 until read
	// version is avail's version (Filter.Version); 0: none.
	version uint64
	// bound is the member the request is bound to (Filter.Sticky), or nil.
	bound *member
}

// now returns the pick's time (a clockNano reading), reading the clock once.
func (r *request) now() int64 {
	if r.nowNs == 0 {
		r.nowNs = clockNano(r.b)
	}
	return r.nowNs
}

// weight returns member m's weight for this pick: its configured weight,
// scaled down while the member is in slow start (10% rising linearly to 100%
// over Backend.SlowStart), and never below 1, in whole weights: what
// EffectiveWeight shows. The picks ramp in thousandths (milliWeightNow,
// rampShare), so that a weight below 10 ramps too.
func (r *request) weight(m *member) int {
	if m.ramping.Load() == 0 {
		return m.weight
	}
	return int(r.rampWeight(m, 1))
}

// milliWeightNow is weight in thousandths, so that least_conn and fair ramp
// smoothly even for weight 1.
func milliWeightNow(r *request, m *member) int64 {
	if m.ramping.Load() == 0 {
		return int64(m.weight) * smoothUnit
	}
	return r.rampWeight(m, smoothUnit)
}

// rampShare returns the thousandths of its weight that member m has now: 100
// rising to 1000 over its slow start, 1000 when it does not ramp. The
// strategies that ignore weights, or follow a fixed schedule, scale a
// ramping member's turns by it.
func rampShare(r *request, m *member) int64 {
	if m.ramping.Load() == 0 {
		return smoothUnit
	}
	if f := r.rampWeight(m, smoothUnit) / int64(m.weight); f > rampFloor {
		return f
	}
	return rampFloor
}

// rampFloor is the share in thousandths a slow start begins at.
const rampFloor = smoothUnit / 10

// rampTurns holds, per member position, the credit of a ramping member's
// turns in a schedule (gcd_wrr, round_robin).
type rampTurns []atomic.Int64

func newRampTurns(g *group) rampTurns { return make(rampTurns, len(g.members)) }

// takeTurn reports whether member m takes the turn a schedule gives it now:
// always when it does not ramp; otherwise once per smoothUnit of credit,
// which each turn adds rampShare to, so that it takes that share of its
// turns (one in ten at first) and passes the others on. Deterministic: with
// one caller at a time the turns taken are the same in every run.
func takeTurn(t *rampTurns, r *request, m *member) bool {
	f := rampShare(r, m)
	if f >= smoothUnit {
		return true
	}
	c := &(*t)[m.pos]
	if c.Add(f) < smoothUnit {
		return false
	}
	c.Add(-smoothUnit)
	return true
}

// usable reports whether member m may be picked now: not down, not full,
// not failed, and not refused by the caller. It is small enough to inline
// for the common case of a member with no flags and no caller's filter. It
// and check are functions, not methods, as the pick path's helpers are.
func usable(r *request, m *member) bool {
	return m.plain && r.avail == nil || check(r, m)
}

func check(r *request, m *member) bool {
	return !m.down && live(r, m)
}

// live is check but for down: whether m is neither full nor failed and
// the caller allows it.
func live(r *request, m *member) bool {
	s := m.state
	if m.maxConns > 0 && s.inflight.Load() >= int64(m.maxConns) {
		return false
	}
	if m.maxFails > 0 && s.fails.Load() >= int64(m.maxFails) && r.now()-s.checked.Load() <= m.failTimeout && !r.b.single() {
		return false
	}
	if r.avail != nil && !r.avail(m.index) {
		return false
	}
	return true
}
