package caddyplugin

import (
	"sync"
	"sync/atomic"
	"time"
)

// healthRefresh is the least time between two scans (reads of Caddy's health
// of all of a policy's upstreams) unless a pick finds one amiss: O(n) once
// per interval, not per pick.
const healthRefresh = 250 * time.Millisecond

// clockEvery: while no upstream is seen unhealthy, a pick looks at the clock
// (for a scan that is due) only when the chosen upstream's pick count reaches
// a multiple of clockEvery, about one pick in clockEvery: reading the clock
// would cost as much as the rest of the pick.
const clockEvery = 8

// seen is what a policy has seen of Caddy's health (Upstream.Healthy: active
// and passive checks, circuit breaker) for the upstreams of one balancer.
//
// It exists so that a pick need not ask Caddy about every upstream. The
// strategies that follow nginx exactly (smooth_wrr above all) must hear about
// every unavailable upstream on every pick, because nginx's state changes
// for a peer it skips even when it would not have chosen it; asking Caddy
// about each one is O(n) calls per pick. Instead a pick leaves out the
// upstreams seen unhealthy and asks Caddy about the chosen upstream only.
// With none seen unhealthy it has no filter: O(1) for the scheduled
// strategies. With some, the filter has a version that changes whenever
// what has been seen changes (core.Filter's Version): smooth_wrr learns nginx's
// schedule over the others within two of its periods and is O(1) again
// until the next change. (A retry's filter, the upstreams it has tried, is
// its own: it is asked about every upstream.)
// When Caddy says the chosen upstream is unavailable, the pick is made again with
// Caddy's answer for every upstream; when it is unhealthy, it is also marked
// and all upstreams are scanned first. When every upstream left is seen
// unhealthy, all are scanned again before Select answers that none is
// available.
//
// A balancer's first scan comes before its first pick; later ones at the
// first pick that looks at the clock once healthRefresh has passed: every
// pick while some upstream is seen unhealthy, about one in clockEvery
// otherwise.
//
// What that means for exactness: the choices are nginx's own as long as
// health is stable. A change of health is seen at the next scan, and at
// once when the chosen upstream is the one that changed: then the pick is
// made again without it (the first pick counts in nginx's state as if the
// upstream had been served). An upstream that is only full (max_requests) is
// not marked: that pick is made again among the available ones and the next
// pick may try it again. An upstream seen unhealthy comes back at the scan
// that sees it healthy, which also starts its slow start (core's Recover),
// so that its return and its ramp begin together. Select never returns an
// upstream that Caddy says is unavailable at the moment of the pick.
type seen struct {
	mu    sync.Mutex    // held by the scan; a pick never waits for it
	down  []atomic.Bool // by backend index: seen unhealthy
	count atomic.Int32  // how many of down are set
	next  atomic.Int64  // monotonic ns when the next scan is due; 0: at once
	// version changes with down: it is the version of the pick's filter
	// (core.Filter's Version), whose answers are down's alone. Each change
	// of down bumps it after the change, so that a pick that loads the
	// new version sees the new answers.
	version atomic.Uint64
}

// mark records that backend i was seen unhealthy.
func (h *seen) mark(i int) {
	if h.down[i].CompareAndSwap(false, true) {
		h.count.Add(1)
		h.version.Add(1)
	}
}

// unmark records that backend i was seen healthy, and reports whether it had
// been seen unhealthy before.
func (h *seen) unmark(i int) bool {
	if h.down[i].CompareAndSwap(true, false) {
		h.count.Add(-1)
		h.version.Add(1)
		return true
	}
	return false
}

// scanIfDue scans when healthRefresh has passed since the last scan.
func (p *policy) scanIfDue(s *snapshot) {
	if now := p.clock(); now >= s.entry.health.next.Load() {
		p.scan(s, now, false)
	}
}

// scan reads Caddy's health of every upstream of snapshot s at now, when a
// scan is due or force is set. An upstream seen healthy again after being
// seen unhealthy recovers in the balancer (its slow start begins). A scan
// under way elsewhere makes this one return at once: the pick goes on with
// what has been seen so far, which its own checks keep safe.
func (p *policy) scan(s *snapshot, now int64, force bool) {
	h := &s.entry.health
	if !h.mu.TryLock() {
		return
	}
	defer h.mu.Unlock()
	if !force && now < h.next.Load() {
		return // another pick has just scanned
	}
	h.next.Store(now + int64(healthRefresh))
	for i, u := range s.ups {
		switch {
		case u == nil:
		case p.healthy(u):
			if h.unmark(i) {
				s.entry.bal.Recover(i)
			}
		default:
			h.mark(i)
		}
	}
}

// epoch is the origin of monotonicNow.
var epoch = time.Now()

// monotonicNow is the default policy clock: monotonic ns since epoch, one
// read of the monotonic clock (no wall clock) per call.
func monotonicNow() int64 { return int64(time.Since(epoch)) }
