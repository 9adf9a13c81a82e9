package core

import (
	"errors"
	"time"
)

// ErrNoBackend is what a caller answers when Pick finds no backend: every
// one is down, full, failed, or refused by the caller's Filter.
var ErrNoBackend = errors.New("lbpack: no backend available")

// Filter narrows one pick to the backends the caller allows on top of the
// balancer's own view (down, full, failed). The zero Filter allows every
// backend.
type Filter struct {
	// Allow reports whether backend i (its index in Config.Backends) may
	// be picked now: false for a backend the caller's health checks have
	// out, or one this request has tried already. A refused backend is
	// skipped the way nginx skips an unavailable peer. nil allows every
	// backend.
	Allow func(i int) bool

	// Version, when not 0, promises that Allow gives the same answers for
	// as long as Version stays the same (a caller bumps it whenever an
	// answer may change, say on every health change). The balancer may
	// then reuse what it learnt of the answers instead of asking about
	// every backend: smooth_wrr, whose next choice with a backend refused
	// depends on every answer, learns nginx's schedule over the allowed
	// backends within two of its periods and follows it in O(1). 0 makes
	// no promise: Allow is asked whenever the choice depends on it.
	Version uint64

	// Sticky is the sticky id the request carries (a cookie's value, a
	// route, a learned session's backend), or "" for none. The first
	// backend whose id (Balancer.ID) it is gets the request when it may
	// take it: not down (draining is allowed), not full, not failed,
	// allowed by Allow, and in the tier in use (a backup's id counts only
	// once no primary backend can be picked). Otherwise the strategy picks
	// as for a request without one. Like nginx, smooth weighting counts a
	// bound request in its weights (see the sticky file), so the requests
	// around it keep nginx's sequence; the other strategies' state does not
	// move for it.
	Sticky string
}

// Ticket is what the end of a request begun by Pick hands to Done. The
// zero Ticket says the request needs no Done unless it fails: the balancer
// neither counts the request in flight nor times its answer, and the
// backend had no failures to clear. Any other value must reach Done.
type Ticket int64

// Latencies with a meaning of their own, for Done.
const (
	// SincePick times the answer from the pick (a timed strategy's ticket
	// carries the pick's clock reading).
	SincePick time.Duration = -1
	// NotSent says the request never went to the backend (the caller
	// changed its mind after the pick): it is counted down, and nothing
	// of it is reported.
	NotSent time.Duration = -2
)

// ticketCount marks a ticket whose request Done counts down (Pick's, when
// the balancer counts; never Take's, whose caller counts the backend's
// count down itself); ticketTotal one whose request Done takes off the
// count over all backends only (Take's, where the balancer keeps one). The
// bits below them are the pick's clock reading, or 1.
const (
	ticketCount = 1 << 62
	ticketTotal = 1 << 61
	ticketFlags = ticketCount | ticketTotal
)

// Pick chooses a backend for one request, with key what the hash
// strategies hash (the client IP for ip_hash, any string for url_hash; the
// others ignore it) among the backends f allows, and begins the request
// there. It returns the backend's index in Config.Backends, or -1 when no
// backend is available (see ErrNoBackend), and the request's ticket, for
// Done at its end. Many goroutines may pick at once.
func Pick(b *Balancer, key string, f Filter) (int, Ticket) {
	if f.Sticky != "" {
		if j, ok := b.byID[f.Sticky]; ok {
			return pickSticky(b, key, f, b.members[j])
		}
	}
	if f.Allow != nil {
		return picked(b, pickFrom(b, request{key: key, avail: f.Allow, b: b, version: f.Version}))
	}
	if g := b.primary; g.table == tableSchedule {
		if i := scheduleNext(g); i != noAnswer { // pickTable's read, inlined: the commonest
			return i, 0 // see pickTable
		}
	} else if i, t := pickTable(b, key); i != noAnswer {
		return i, t
	}
	return picked(b, pickFrom(b, request{key: key, b: b}))
}

// picked begins the request the full pick sent to backend i (none when i
// is -1).
func picked(b *Balancer, i int) (int, Ticket) {
	if i < 0 {
		return -1, 0
	}
	return i, begin(b, i)
}

// countIn counts a request to backend i in flight, for a steady read of a
// strategy that counts (least_conn, fair, bounded), and returns its ticket
// (a steady group has no backend with failures to clear).
func countIn(b *Balancer, i int) Ticket {
	if b.inflight != nil {
		b.inflight.Add(1) // first: the total never reads below the members' counts
	}
	s := b.members[i].state // counts[i] and requests[i]
	s.inflight.Add(1)
	s.requests.Add(1)
	return ticketCount
}

// begin counts a request to backend i in flight, when the balancer counts
// them, and returns its ticket.
func begin(b *Balancer, i int) Ticket {
	if !b.counted {
		// Failures matter only to a backend with max_fails: a success
		// after them must reach Done to clear them.
		if m := b.members[i]; m.maxFails != 0 && m.state.fails.Load() != 0 {
			return 1
		}
		return 0
	}
	t := countIn(b, i)
	if b.timed {
		return t | Ticket(clockNano(b)&^ticketFlags) // the pick's clock reading
	}
	if m := b.members[i]; m.maxFails != 0 && m.state.fails.Load() != 0 {
		return t | 1 // for Take's caller, which counts down itself (takeAny)
	}
	return t
}

// Done ends the request to backend i that Pick began with ticket t, after
// latency (SincePick: the time since the pick); failed says whether it
// counts as the backend's failure (nginx's proxy_next_upstream cases: an
// error, a timeout, or an answer the caller counts as failed).
//
// Failures are accounted as nginx does: the backend's fails go up, and under
// smooth weighting its effective weight drops by weight/max_fails and then
// climbs back by one per selection pass. A backend with max_fails failures
// is skipped until fail_timeout has passed since the last one, then gets
// one probe per fail_timeout; a success after a probe clears its failures
// (and starts its slow start if it was out). Like nginx, a balancer with a
// single backend and no backups counts no failures. fair folds latency
// into its estimate of the backend.
func Done(b *Balancer, i int, t Ticket, latency time.Duration, failed bool) {
	if uint(i) >= uint(len(b.members)) {
		return
	}
	if t&ticketFlags != 0 {
		countDown(b, i, t)
	}
	if latency == NotSent {
		return
	}
	if !b.timed {
		settle(b, i, failed)
		return
	}
	now := clockEpoch + int64(b.since(clockBase)) // clockNano, inline: see interp.go
	if latency == SincePick {
		latency = time.Duration(now - int64(t&^ticketFlags))
	}
	report(b, b.members[i], now, int64(latency), failed)
}

// settle is Done's report for a strategy that times nothing: only failures
// to count or to clear (report's second half, which it spares a call).
func settle(b *Balancer, i int, failed bool) {
	if m := b.members[i]; failed || m.state.fails.Load() != 0 {
		account(b, m, failed)
	}
}

// countDown ends a request to backend i that Pick or Take counted in
// flight, as its ticket t says.
func countDown(b *Balancer, i int, t Ticket) {
	if t&ticketCount != 0 {
		b.counts[i].Add(-1)
	}
	if b.inflight != nil {
		b.inflight.Add(-1)
	}
}

// report is Done's report of an answer from member m after x ns, at now (a
// clockNano reading, 0 when the strategy keeps no latency estimate).
//
// fair's answers: a success that follows the estimate's last update by
// less than the group's fold time (DecayTime/fairFoldShare) is added to
// the backend's batch, with two atomic additions; the next answer past the
// fold time, or the one that fills the batch, folds the batch into the
// estimate (see observe). So at a high rate an estimate is updated about a
// hundred times a second per backend, not once per answer; at a lower
// rate, and for a failure, a long answer or a young estimate, every answer
// goes in at once.
func report(b *Balancer, m *member, now, x int64, failed bool) {
	if g := m.group; g.decay > 0 {
		s := m.state.fair
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
	if b.single() {
		if s.fails.Load() != 0 {
			clearFails(s, -1)
		}
		return
	}
	if failed {
		now := clockNano(b)
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
			m.startRamp(clockNano(b))
		}
	}
}
