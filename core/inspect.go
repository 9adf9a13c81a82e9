package core

import (
	"math"
	"time"
)

// This file holds what a balancer shows of its runtime state (for admin
// endpoints and metrics) and what callers with their own health checks tell
// it. None of it is on the pick path.

// EffectiveWeight returns the weight backend i takes part with in the next
// selection, as nginx's smooth weighted round robin would add it: its
// configured weight, lowered by the failure penalty not yet worked off, and
// capped by its slow-start weight while it ramps. Precisely:
//
//   - nginx's effective weight: a failed request (Done with failed, on a
//     backend with MaxFails) lowers it by Weight/MaxFails, not below 0, and
//     each later selection pass that sees the backend raises it by 1 until
//     it is Weight again. Only the strategies that run nginx's smooth pass
//     penalize failures (smooth_wrr, least_conn's ties, and the round-robin
//     fallback of ip_hash and url_hash); for the others it stays Weight.
//   - during a slow start (a backend added by Update, recovered after
//     MaxFails failures, or given Recover), at most Weight times 10% rising
//     linearly to 100% over SlowStart, rounded down and never below 1.
//     The strategies ramp in thousandths of a weight (so a backend of
//     weight 1 ramps too); this is that ramped weight rounded down to a
//     whole one.
//
// The hash strategies map keys by configured weight at all times; for them
// this is the weight of their round-robin fallback. A down backend, and an
// index out of range, have effective weight 0.
func (b *Balancer) EffectiveWeight(i int) int {
	if i < 0 || i >= len(b.members) {
		return 0
	}
	m := b.members[i]
	if m.down {
		return 0
	}
	s := m.group.smooth
	s.mu.Lock()
	e := s.effective[m.pos]
	s.mu.Unlock()
	r := request{b: b}
	if w := r.weight(m); w < e {
		e = w
	}
	return e
}

// Latency returns the latency estimate the balancer keeps for backend i:
// fair's EWMA of the latencies reported through Done, times its
// failure penalty (each failure doubles it, up to 1024 times; successes bring
// it back). It is 0 while the backend has no measurement, for strategies
// that keep no estimate, and for an index out of range; never negative
// (an estimate beyond time.Duration's range reads as its maximum).
func (b *Balancer) Latency(i int) time.Duration {
	if i < 0 || i >= len(b.members) {
		return 0
	}
	f := b.members[i].state.fair
	if f == nil {
		return 0
	}
	e := f.est.Load().(*fairEst).e
	if !(e < math.MaxInt64) { // MaxInt64 rounds up to 2^63 as a float64
		return math.MaxInt64
	}
	return time.Duration(e)
}

// Requests returns the number of requests to backend i that a pick began
// and counted so far (a balancer that counts requests: Traits.Counts, or a
// backend with max_conns), over every balancer Update derived for its
// address; 0 for an index out of range.
func (b *Balancer) Requests(i int) int64 {
	if i < 0 || i >= len(b.members) {
		return 0
	}
	return b.members[i].state.requests.Load()
}

// Recover tells the balancer that backend i has just become available again
// after the caller's own health checks (Caddy's or Traefik's) had it
// unavailable. As in NGINX Plus, a backend with a SlowStart then ramps its
// weight up from 10% over SlowStart, starting now (a ramp already under way
// starts over); see EffectiveWeight. Without SlowStart, for a down backend,
// and for an index out of range, Recover does nothing. Failures the balancer
// counted itself (MaxFails) are not cleared: they expire as in nginx.
func (b *Balancer) Recover(i int) {
	if i < 0 || i >= len(b.members) {
		return
	}
	m := b.members[i]
	if m.slowStart <= 0 || m.down {
		return
	}
	m.startRamp(clockNano(b))
}
