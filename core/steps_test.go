package core

import "time"

// Step-by-step drivers for the tests: a pick's choice alone (the request it
// begins is taken back at once, so that a sequence of choices is not skewed
// by counts a test did not ask for), and requests held in flight and ended
// one by one on any backend (as proxied requests leave them), whether or
// not the balancer would count them itself.

// choose is Pick's choice for key with no filter: the backend index, or
// ErrNoBackend.
func (b *Balancer) choose(key string) (int, error) {
	return b.chooseVersion(key, nil, 0)
}

// chooseFunc is Pick's choice for key among the backends allow allows.
func (b *Balancer) chooseFunc(key string, allow func(int) bool) (int, error) {
	return b.chooseVersion(key, allow, 0)
}

// chooseVersion is Pick's choice for key with the filter allow at version.
func (b *Balancer) chooseVersion(key string, allow func(int) bool, version uint64) (int, error) {
	i, _ := Pick(b, key, Filter{Allow: allow, Version: version})
	if i < 0 {
		return -1, ErrNoBackend
	}
	if b.counted {
		b.counts[i].Add(-1)
		b.requests[i].Add(-1)
		if b.inflight != nil {
			b.inflight.Add(-1)
		}
	}
	return i, nil
}

// chooseIndex is choose with one result: -1 for none.
func (b *Balancer) chooseIndex(key string) int {
	i, _ := b.choose(key)
	return i
}

// hold counts a request to backend i in flight, as a pick that chose it
// would in a balancer that counts.
func (b *Balancer) hold(i int) {
	if uint(i) >= uint(len(b.members)) {
		return
	}
	if b.inflight != nil {
		b.inflight.Add(1)
	}
	b.counts[i].Add(1)
	b.requests[i].Add(1)
}

// release ends a request held with hold, after latency: Done's count-down
// and report.
func (b *Balancer) release(i int, latency time.Duration, failed bool) {
	if uint(i) >= uint(len(b.members)) {
		return
	}
	b.counts[i].Add(-1)
	if b.inflight != nil {
		b.inflight.Add(-1)
	}
	Done(b, i, 1, latency, failed)
}

// pickKey is Pick's choice for key with no filter, without beginning the
// request: the group's table while it is steady (see table.go), the
// strategy's full pick otherwise.
func pickKey(b *Balancer, key string) int {
	if i := tableChoice(b, key); i != noAnswer {
		return i
	}
	return pickFrom(b, request{key: key, b: b})
}

// tableChoice is the answer of the group's table for key (noAnswer where
// the full pick must decide), without the request pickTable began there.
func tableChoice(b *Balancer, key string) int {
	i, t := pickTable(b, key)
	if i != noAnswer && t != 0 {
		Done(b, i, t, NotSent, false)
	}
	return i
}

// isSteady reports whether every member currently weighs what it is
// configured to weigh (the gate's count of unsteady members is 0).
func isSteady(g *group) bool { return g.sched.gate.Load()>>modeBits == 0 }

// unsteady returns the number of unsteady members.
func (g *group) unsteady() int { return int(g.sched.gate.Load() >> modeBits) }
