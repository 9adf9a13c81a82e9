package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// member is one backend inside a balancer: its configuration, flattened for
// the hot path, and its runtime state.
type member struct {
	// The fields every pick reads come first, in one cache line.
	state  *backendState
	weight int
	// ramping is 1 while this member is counted in its group's unsteady members for a slow
	// start; it lets the pick path skip the clock when nobody ramps.
	ramping atomic.Int32
	// plain is true when the member has none of down, max_conns, max_fails:
	// then only the caller's filter can make it ineligible.
	plain bool

	index       int // position in Config.Backends
	addr        string
	down        bool
	maxConns    int
	maxFails    int
	failTimeout int64 // nanoseconds
	slowStart   int64 // nanoseconds

	group *group // the group the member belongs to
	pos   int    // position in group.members
}

// backendState is the runtime state of one backend address. It is shared by
// every balancer that Update derives for that address, so that counters,
// latency estimates and failure state survive a change of the backend set.
type backendState struct {
	inflight atomic.Int64 // requests started and not yet done
	requests atomic.Int64 // requests started, ever
	fails    atomic.Int64 // nginx's fails: failures since the last success
	accessed atomic.Int64 // clockNano of the last failure
	checked  atomic.Int64 // clockNano of the last failure or probe
	ramp     atomic.Int64 // clockNano when slow start began; 0 when not ramping

	// deficit is configured weight minus nginx's effective weight, as last
	// left by a smooth pass or a failure; a rebuilt group starts from it.
	deficit atomic.Int64

	// fair's estimate (see observe): est is what picks read, a *fairEst
	// replaced whole. lat, sq (the EWMA of squared latencies), v (the sum
	// of the squared weights of the answers in lat), n (successes seen),
	// penalty and stamp (the clockNano of the last update) change under
	// mu. lastPick is the clockNano of the last fair pick.
	est      atomic.Value
	mu       sync.Mutex
	lat      float64
	sq       float64
	v        float64
	n        int64
	penalty  float64
	stamp    int64
	lastPick atomic.Int64
	// batch and batchSq hold the successes Report has batched since the
	// estimate's last update: their count (above fairCountShift) and sum
	// of latencies in ns, and the sum of their squares in units of
	// (2^fairSqShift ns)^2. folded is the clockNano of that update, 0
	// while the estimate is young (every answer then goes in at once).
	batch   atomic.Uint64
	batchSq atomic.Uint64
	folded  atomic.Int64
	// counts are the failing counts this backend's failures go to (under
	// mu; see failing.go).
	counts []*failRef

	// owner is the member of the newest balancer built over this address
	// (a *member), so that a slow start begun through an older balancer
	// still reaches the group that picks now.
	owner atomic.Value
}

// newBackendState returns the state of an address no balancer has had.
func newBackendState() *backendState {
	s := &backendState{}
	s.est.Store(unmeasured)
	return s
}

// newMember fills in m, an element of the balancer's slab of members, for
// backend be at index, taking over the runtime state of the same address in
// prev, and returns m.
func newMember(m *member, index int, be Backend, b *Balancer, prev *Balancer) *member {
	*m = member{
		index:       index,
		addr:        be.Address,
		weight:      be.Weight,
		down:        be.Down,
		maxConns:    be.MaxConns,
		maxFails:    be.MaxFails,
		failTimeout: int64(be.FailTimeout),
		slowStart:   int64(be.SlowStart),
	}
	if m.failTimeout == 0 {
		m.failTimeout = int64(DefaultFailTimeout)
	}
	m.plain = !m.down && m.maxConns == 0 && m.maxFails == 0
	if prev != nil {
		if j, ok := prev.byAddr[be.Address]; ok {
			m.state = prev.members[j].state
			if prev.members[j].maxFails == 0 && m.maxFails > 0 {
				// Failures counted while max_fails was 0 (nginx counts
				// them but nothing reads them) must not take the backend
				// out the moment max_fails is turned on.
				clearFails(m.state, -1)
			}
			return m
		}
	}
	m.state = newBackendState()
	if prev != nil && m.slowStart > 0 {
		// A backend added to a running balancer ramps up; one present at
		// construction does not (a restart should not throttle everyone).
		// newGroup counts the ramp in the group.
		m.state.ramp.Store(clockNano(b))
	}
	return m
}

// Start records that a request to backend i has begun. Every Start must be
// matched by one Done. Only least_conn, fair, url_hash's bounded mode and
// MaxConns read requests in flight; with none of them a caller may skip
// Start and Done for a request that succeeds while Fails(i) is 0, and call
// both at its end otherwise.
func (b *Balancer) Start(i int) { Start(b, i) }

// Start is b.Start(i) as a function, which an interpreted caller (the
// Traefik plugin) calls for less than the method.
func Start(b *Balancer, i int) {
	if uint(i) >= uint(len(b.members)) {
		return
	}
	if b.inflight != nil {
		b.inflight.Add(1) // first: the total never reads below the members' counts
	}
	s := b.members[i].state
	s.inflight.Add(1)
	s.requests.Add(1)
}

// Done records that a request to backend i has ended after latency; failed
// says whether it counts as a failure (nginx's proxy_next_upstream errors).
//
// Failures are accounted as nginx does: fails goes up, the failure time is
// kept, and under smooth weighting the backend's effective weight drops by
// weight/max_fails and then climbs back by one per selection pass. A backend
// with max_fails failures is skipped until fail_timeout has passed since the
// last failure, then gets one probe per fail_timeout; a success after a probe
// (or after fail_timeout) clears its failures, and starts its slow start if
// it was out. Like nginx, a balancer with a single backend and no backups does
// no failure accounting. fair also feeds latency into its estimate here.
func (b *Balancer) Done(i int, latency time.Duration, failed bool) { Done(b, i, latency, failed) }

// Done is b.Done(i, latency, failed) as a function, which an interpreted
// caller (the Traefik plugin) calls for less than the method.
func Done(b *Balancer, i int, latency time.Duration, failed bool) {
	if uint(i) >= uint(len(b.members)) {
		return
	}
	b.members[i].state.inflight.Add(-1)
	if b.inflight != nil {
		b.inflight.Add(-1)
	}
	Report(b, i, latency, failed)
}

// Begin is Start for a caller that ends its requests with deferred calls
// into compiled code, which under an interpreter cost a fraction of a
// deferred call to Done: it records that a request to backend i has begun
// and returns the backend's count of requests in flight. The request then
// ends with Add(-1) on that count and then on InFlightTotal(b), if not
// nil, after Report, which does the rest of Done's work; Report may be left
// out when that work is none: a success while Fails(i) is 0, under any
// strategy but fair (which times every answer). Begin returns nil, and
// records nothing, when i is out of range.
func Begin(b *Balancer, i int) *atomic.Int64 {
	if uint(i) >= uint(len(b.counts)) {
		return nil
	}
	if b.inflight != nil {
		b.inflight.Add(1) // first: the total never reads below the members' counts
	}
	n := b.counts[i]
	n.Add(1)
	b.requests[i].Add(1)
	return n
}

// Take picks a backend as PickIndex does and begins a request to it as
// Begin does, in one call (under an interpreter each call costs as much
// as a pick): it returns the backend's index, its count of requests in
// flight, which the request's end decrements (see Begin), and, for
// ReportSince, the pick's reading of the balancer's clock (0 under a
// strategy that keeps no latency estimate). When no backend is eligible the
// index is -1 and the count nil.
func Take(b *Balancer, key string) (i int, n *atomic.Int64, at int64) {
	switch b.primary.quick {
	case quickLeast:
		i = pickLeastQuick(b, key)
	case quickFair:
		i, at = fairQuickAt(b, key)
	default:
		i = PickIndex(b, key)
	}
	if i < 0 {
		return -1, nil, 0
	}
	// Begin, inline: the interpreter charges a call for every value of it.
	if b.inflight != nil {
		b.inflight.Add(1)
	}
	n = b.counts[i]
	n.Add(1)
	b.requests[i].Add(1)
	return i, n, at
}

// InFlightTotal returns the count of requests in flight over all backends
// that url_hash's bounded mode and least_conn (from nine backends at New)
// keep, or nil: a request begun with Begin ends with Add(-1) on it, after
// Add(-1) on its backend's count.
func InFlightTotal(b *Balancer) *atomic.Int64 { return b.inflight }

// Report is Done without the end of the count of requests in flight, for a
// request begun with Begin: it accounts a failure, or a success after
// failures, and feeds fair's estimate with latency. The common case ends
// here, in one call: a success, for a backend without failures, under a
// strategy that keeps no latency estimate, and under fair a success that
// joins the backend's batch.
//
// fair's answers: a success that follows the estimate's last update by
// less than the group's fold time (DecayTime/fairFoldShare) is added to
// the backend's batch, with two atomic additions; the next answer past the
// fold time, or the one that fills the batch, folds the batch into the
// estimate (see observe). So at a high rate an estimate is updated about
// a hundred times a second per backend, not once per answer, which under
// Traefik's interpreter was most of a request's cost; at a lower rate, and
// for a failure, a long answer or a young estimate, every answer goes in
// at once.
func Report(b *Balancer, i int, latency time.Duration, failed bool) {
	if uint(i) >= uint(len(b.members)) {
		return
	}
	m := b.members[i]
	var now int64
	if m.group.decay > 0 {
		now = clockNano(b)
	}
	report(b, m, now, int64(latency), failed)
}

// ReportSince is Report for a request begun with Take at the clock
// reading at: its latency is the time since. Only under fair does it read
// the clock; under the other strategies at is 0 and unused.
func ReportSince(b *Balancer, i int, at int64, failed bool) {
	if uint(i) >= uint(len(b.members)) {
		return
	}
	m := b.members[i]
	var now int64
	if m.group.decay > 0 {
		now = clockEpoch + int64(b.since(clockBase)) // clockNano, inline
		if now == 0 {
			now = 1
		}
	}
	report(b, m, now, now-at, failed)
}

// report is Report's work for an answer from member m after x ns, at now
// (a clockNano reading, 0 when the strategy keeps no latency estimate).
func report(b *Balancer, m *member, now, x int64, failed bool) {
	if g := m.group; g.decay > 0 {
		s := m.state
		if failed || uint64(x) >= fairBatchMax || now-s.folded.Load() >= g.fold {
			fold(g, s, x, failed, now)
		} else {
			q := uint64(x) >> fairSqShift
			s.batchSq.Add(q * q)
			if s.batch.Add(1<<fairCountShift|uint64(x))>>fairCountShift >= fairBatchCount {
				fold(g, s, -1, false, now) // the batch is full and holds this answer
			}
		}
	}
	if failed || m.state.fails.Load() != 0 {
		account(b, m, failed)
	}
}

// account is the rest of Done: failures, recovery.
func account(b *Balancer, m *member, failed bool) {
	s := m.state
	var now int64
	if b.single() {
		if s.fails.Load() != 0 {
			clearFails(s, -1)
		}
		return
	}
	if failed {
		if now == 0 {
			now = clockNano(b)
		}
		addFail(s)
		s.accessed.Store(now)
		s.checked.Store(now)
		if m.maxFails > 0 {
			m.group.smooth.fail(m)
		}
		return
	}
	// nginx marks a peer live again when a request succeeds after its last
	// failure was followed by a probe (checked moved past accessed).
	f := s.fails.Load()
	if f != 0 && s.accessed.Load() < s.checked.Load() && clearFails(s, f) {
		if m.maxFails > 0 && f >= int64(m.maxFails) && m.slowStart > 0 {
			if now == 0 {
				now = clockNano(b)
			}
			m.startRamp(now)
		}
	}
}

// single reports nginx's "single peer" case: one primary backend and no
// backups, where failures are not counted (there is nowhere else to go).
func (b *Balancer) single() bool {
	return b.backup == nil && len(b.primary.members) == 1
}

// InFlight returns the number of requests to backend i started and not done.
func (b *Balancer) InFlight(i int) int64 {
	if i < 0 || i >= len(b.members) {
		return 0
	}
	return b.members[i].state.inflight.Load()
}

// Fails returns nginx's failure count of backend i: failed requests since
// its failures were last cleared (by a success after a probe, or because it
// is the only backend). A caller that reports only some requests to Done
// (see Start) must still report a success of a backend with failures, so
// that the backend recovers.
func (b *Balancer) Fails(i int) int64 {
	if uint(i) >= uint(len(b.members)) {
		return 0
	}
	return b.members[i].state.fails.Load()
}

// startRamp begins m's slow start at now, in m's group and in the group of the
// newest balancer over the same address.
func (m *member) startRamp(now int64) {
	m.state.ramp.Store(now)
	m.markRamp()
	if o, ok := m.state.owner.Load().(*member); ok && o != m && o.slowStart > 0 {
		o.markRamp()
	}
}

// markRamp counts m in its group's unsteady members while it ramps.
func (m *member) markRamp() {
	if m.ramping.CompareAndSwap(0, 1) {
		m.group.ramps.Add(1)
		m.group.addUnsteady(1)
	}
}

// rampWeight returns m's weight times scale as slow start has it now: 10%
// rising linearly to 100% over the slow start, at least 1. It reads the
// clock (only members that ramp come here), and ends the ramp when it is over.
func (r *request) rampWeight(m *member, scale int64) int64 {
	full := int64(m.weight) * scale
	start := m.state.ramp.Load()
	if start != 0 && m.slowStart > 0 {
		el := r.now() - start
		if el < m.slowStart {
			if el < 0 {
				el = 0
			}
			w := int64(float64(full) * (0.1 + 0.9*float64(el)/float64(m.slowStart)))
			if w < 1 {
				w = 1
			}
			return w
		}
		m.state.ramp.CompareAndSwap(start, 0)
	}
	if m.ramping.CompareAndSwap(1, 0) {
		m.group.ramps.Add(-1)
		m.group.addUnsteady(-1)
		if m.state.ramp.Load() != 0 {
			// A new ramp began meanwhile (another recovery): count it again.
			m.markRamp()
		}
	}
	return full
}
