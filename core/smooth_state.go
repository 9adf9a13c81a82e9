package core

import "sync"

// smoothState is nginx's smooth weighted round robin
// (ngx_http_upstream_get_peer) over one group, exactly: a current and an
// effective weight per member, one O(n) pass per pick, under the group's lock.
type smoothState struct {
	mu        sync.Mutex
	current   []int
	effective []int
}

func newSmoothState(g *group) *smoothState {
	s := &smoothState{
		current:   make([]int, len(g.members)),
		effective: make([]int, len(g.members)),
	}
	for i, m := range g.members {
		s.effective[i] = m.weight
	}
	return s
}

// next runs one nginx selection pass over the eligible members and returns
// the chosen position, or -1. When among is not nil, only the positions it
// lists take part (least_conn shares ties out among the tied members only).
func (s *smoothState) next(g *group, r *request, among []int) int {
	s.mu.Lock()
	best, total := -1, 0
	if among == nil {
		for i, m := range g.members {
			if r.ok(m) {
				best, total = s.step(r, i, m, best, total)
			}
		}
	} else {
		for _, i := range among {
			m := g.members[i]
			if r.ok(m) {
				best, total = s.step(r, i, m, best, total)
			}
		}
	}
	if best >= 0 {
		s.current[best] -= total
	}
	s.mu.Unlock()
	return best
}

// step adds member i's effective weight to its current weight and to total,
// lets the effective weight recover by one, and keeps the better of i and
// best (ties go to the earlier member, as in nginx).
func (s *smoothState) step(r *request, i int, m *member, best, total int) (int, int) {
	s.current[i] += s.effective[i]
	total += s.effective[i]
	if w := r.weight(m); s.effective[i] < w {
		s.effective[i]++
	}
	if best < 0 || s.current[i] > s.current[best] {
		best = i
	}
	return best, total
}

// fail applies nginx's penalty for a failed request to member i: its
// effective weight drops by weight/max_fails (not below 0) and then climbs
// back by one per selection pass.
func (s *smoothState) fail(i int, m *member) {
	if m.maxFails == 0 {
		return
	}
	s.mu.Lock()
	s.effective[i] -= m.weight / m.maxFails
	if s.effective[i] < 0 {
		s.effective[i] = 0
	}
	s.mu.Unlock()
}
