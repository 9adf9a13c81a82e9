package core

import (
	"sync/atomic"
	"time"
)

// member is one backend inside a balancer: its configuration, flattened for
// the hot path, and its runtime state.
type member struct {
	index       int // position in Config.Backends
	addr        string
	weight      int
	down        bool
	maxConns    int
	maxFails    int
	failTimeout int64 // nanoseconds
	slowStart   int64 // nanoseconds
	state       *backendState
}

// backendState is the runtime state of one backend address. It is shared by
// every balancer that Update derives for that address, so that counters,
// latency estimates and failure state survive a change of the backend set.
type backendState struct {
	inflight atomic.Int64 // requests started and not yet done
	requests atomic.Int64 // requests started, ever
	fails    atomic.Int64 // nginx's fails: failures since the last success
	accessed atomic.Int64 // Unix ns of the last failure
	checked  atomic.Int64 // Unix ns of the last failure or probe
	ramp     atomic.Int64 // Unix ns when slow start began; 0 when not ramping
}

func newMember(index int, be Backend, b *Balancer, prev *Balancer) *member {
	m := &member{
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
	if prev != nil {
		if j, ok := prev.byAddr[be.Address]; ok {
			m.state = prev.members[j].state
			return m
		}
	}
	m.state = &backendState{}
	if prev != nil && m.slowStart > 0 {
		// A backend added to a running balancer ramps up; one present at
		// construction does not (a restart should not throttle everyone).
		m.state.ramp.Store(b.now().UnixNano())
	}
	return m
}

// Start records that a request to backend i has begun. Every Start must be
// matched by one Done.
func (b *Balancer) Start(i int) {
	if i < 0 || i >= len(b.members) {
		return
	}
	s := b.members[i].state
	s.inflight.Add(1)
	s.requests.Add(1)
}

// Done records that a request to backend i has ended after latency; failed
// says whether it counts as a failure (nginx's proxy_next_upstream errors).
func (b *Balancer) Done(i int, latency time.Duration, failed bool) {
	if i < 0 || i >= len(b.members) {
		return
	}
	m := b.members[i]
	s := m.state
	s.inflight.Add(-1)
	if failed {
		now := b.now().UnixNano()
		s.fails.Add(1)
		s.accessed.Store(now)
		s.checked.Store(now)
		return
	}
	// nginx marks a peer live again when a request succeeds after its last
	// failure or probe.
	if s.fails.Load() != 0 && s.accessed.Load() < s.checked.Load() {
		s.fails.Store(0)
	}
}

// InFlight returns the number of requests to backend i started and not done.
func (b *Balancer) InFlight(i int) int64 {
	if i < 0 || i >= len(b.members) {
		return 0
	}
	return b.members[i].state.inflight.Load()
}
