package core

import "time"

// The balancer's clock. Every interval the package measures (fail_timeout,
// slow start, fair's decay and probe staleness) is the difference of two
// readings of clockNano, and so follows the monotonic clock: a step of the
// wall clock (NTP, an operator) neither keeps a failed backend out nor holds
// a ramp back.

// clockBase is the process's reference reading. time.Time's Sub uses the
// monotonic readings when both times carry one (time.Now's do), so a
// reading's distance from clockBase is monotonic time elapsed.
var clockBase = time.Now()

// clockEpoch is clockBase in Unix nanoseconds: readings stay near Unix time,
// and the zero value of a stored reading ("not set") lies in the distant past.
var clockEpoch = clockBase.UnixNano()

// clockNano returns t as a reading of the balancer's clock in nanoseconds,
// never 0 (0 means "not set" in the state): clockEpoch plus t's distance
// from clockBase. For a time with a monotonic reading that distance is
// monotonic; for one without (an injected Config.Now built from a date), it
// is the wall distance, so the reading is t's Unix nanoseconds.
func clockNano(t time.Time) int64 {
	ns := clockEpoch + int64(t.Sub(clockBase))
	if ns == 0 {
		ns = 1
	}
	return ns
}

// clockOf returns b's clock now as a clockNano reading.
func clockOf(b *Balancer) int64 {
	ns := clockEpoch + int64(b.since(clockBase))
	if ns == 0 {
		ns = 1
	}
	return ns
}

// sinceOf returns the distance from a time to now by the clock now:
// time.Since for the system clock, which under Traefik's interpreter is
// one call into compiled code where now().Sub is two.
func sinceOf(now func() time.Time) func(time.Time) time.Duration {
	if now == nil {
		return time.Since
	}
	return func(t time.Time) time.Duration { return now().Sub(t) }
}
