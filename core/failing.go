package core

import "sync/atomic"

// A balancer's failing count is the number of its backends whose failure
// count (nginx's fails) is not 0. While it is 0, no backend can be out for
// max_fails, and a pick skips every max_fails check (see isQuiet).
//
// A backend's runtime state is shared by every balancer Update derives over
// its address, so a failure seen through any of them counts in each. Each
// state keeps the counts of the failKeep newest balancers over it and
// updates them all under its lock; a balancer pushed out of a state's list
// by newer ones can no longer be kept exact, and its count is pinned above 0
// for good (it makes every check, which is always right). A backend that an
// Update removes is in no count of the new balancer: its failures, which
// nothing will clear there, no longer hold the new balancer's picks on the
// slow path.

// failKeep is how many of the newest balancers over an address a failure
// updates exactly.
const failKeep = 4

// failPinned is what a pinned count holds at least.
const failPinned = 1 << 24

// failRef is one balancer's failing count as the states it covers see it.
type failRef struct {
	count  atomic.Int32
	pinned atomic.Int32 // 1 once count is pinned
}

// attachFails makes state s count its failures in ref, the count of a
// balancer being built, from now on and for the failures it has now.
func attachFails(s *backendState, ref *failRef) {
	s.mu.Lock()
	if s.fails.Load() != 0 {
		ref.count.Add(1)
	}
	if len(s.counts) == failKeep {
		old := s.counts[failKeep-1]
		if old.pinned.CompareAndSwap(0, 1) {
			old.count.Add(failPinned)
		}
		s.counts = s.counts[:failKeep-1]
	}
	// A new slice: the list is never changed in place.
	s.counts = append([]*failRef{ref}, s.counts...)
	s.mu.Unlock()
}

// addFail counts one failure of s; a first failure puts s in the counts.
func addFail(s *backendState) {
	s.mu.Lock()
	if s.fails.Add(1) == 1 {
		bumpFails(s, 1)
	}
	s.mu.Unlock()
}

// clearFails sets s's failures to 0 if they are still from (any value but 0
// when from is -1), takes s out of the counts, and reports whether it did.
func clearFails(s *backendState, from int64) bool {
	s.mu.Lock()
	f := s.fails.Load()
	ok := f != 0 && (from < 0 || f == from)
	if ok {
		s.fails.Store(0)
		bumpFails(s, -1)
	}
	s.mu.Unlock()
	return ok
}

// bumpFails changes every count s is in by d. Called with s.mu held.
func bumpFails(s *backendState, d int32) {
	for _, ref := range s.counts {
		ref.count.Add(d)
	}
}
