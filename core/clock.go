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

// clockNano returns b's clock now as a reading in nanoseconds, never 0 (0
// means "not set" in the state): clockEpoch plus the time since clockBase
// by b.since. For the system clock that distance is monotonic; for an
// injected Config.Now built from a date it is the wall distance, so the
// reading is its Unix nanoseconds.
func clockNano(b *Balancer) int64 {
	ns := clockEpoch + int64(b.since(clockBase))
	if ns == 0 {
		ns = 1
	}
	return ns
}

// sinceOf returns b.since for the clock now (Config.Now): the distance from
// a time to now, which is time.Since for the system clock (nil): one call
// into the standard library where Now().Sub is two.
func sinceOf(now func() time.Time) func(time.Time) time.Duration {
	if now == nil {
		return time.Since
	}
	return func(t time.Time) time.Duration { return now().Sub(t) }
}
