package core

import (
	"sync"
	"sync/atomic"
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
	drain       bool // down to every pick but a bound one (Backend.Drain)
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

	// mu guards counts (see failing.go).
	mu sync.Mutex
	// fair is fair's estimate of the backend; nil under the strategies that
	// keep none (a balancer that times answers makes it, see newMember).
	fair *fairState
	// counts are the failing counts this backend's failures go to (under
	// mu; see failing.go).
	counts []*failRef

	// owner is the member of the newest balancer built over this address
	// (a *member), so that a slow start begun through an older balancer
	// still reaches the group that picks now.
	owner atomic.Value
}

// newBackendState returns the state of an address no balancer has had,
// with fair's estimate when timed.
func newBackendState(timed bool) *backendState {
	s := &backendState{}
	if timed {
		s.fair = newFairState()
	}
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
		down:        be.Down || be.Drain,
		drain:       be.Drain,
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
	m.state = newBackendState(b.timed)
	if prev != nil && m.slowStart > 0 {
		// A backend added to a running balancer ramps up; one present at
		// construction does not (a restart should not throttle everyone).
		// newGroup counts the ramp in the group.
		m.state.ramp.Store(clockNano(b))
	}
	return m
}

// single reports nginx's "single peer" case: one primary backend and no
// backups, where failures are not counted (there is nowhere else to go).
func (b *Balancer) single() bool {
	return b.backup == nil && len(b.primary.members) == 1
}

// InFlight returns the number of requests to backend i that a pick began and
// counted and that have not ended (a balancer that counts requests:
// Traits.Counts, or a backend with max_conns; 0 otherwise).
func (b *Balancer) InFlight(i int) int64 {
	if i < 0 || i >= len(b.members) {
		return 0
	}
	return b.members[i].state.inflight.Load()
}

// Fails returns nginx's failure count of backend i: failed requests since
// its failures were last cleared (by a success after a probe, or because it
// is the only backend). A pick of a backend with failures gives a ticket
// that is not 0, so that its success reaches Done and the backend recovers.
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
