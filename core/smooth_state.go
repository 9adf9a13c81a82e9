package core

import "sync"

// smoothState is nginx's smooth weighted round robin
// (ngx_http_upstream_get_peer) over one group, exactly: a current and an
// effective weight per member, one O(n) pass per pick, under the group's lock.
//
// Current weights are kept in thousandths of a weight (smoothUnit), so that
// a slow start can lower any weight, 1 included, to a fraction of itself.
// While nobody ramps every weight a pass adds is a whole number of units, so
// every current weight is nginx's times smoothUnit, and every comparison and
// tie comes out as in nginx. Sums are 64-bit, also on 32-bit platforms.
type smoothState struct {
	g         *group
	mu        sync.Mutex
	current   []int64 // nginx's current weights, in units
	effective []int   // nginx's effective weights, in whole weights
	weight    []int   // configured weights, flat for the pass
	// low marks members whose effective weight is below their weight; each
	// is counted once in g's unsteady members until it has climbed back.
	low []bool
	// tied is least_conn's scratch list of tied positions (nil for other
	// strategies); it is used under mu only.
	tied []int
	// upTotal is the sum of the weights of the members that are not down,
	// in units; allTotal of every member's, down and draining ones too
	// (nginx's total_weight, which a bound pick's low limit reads).
	upTotal, allTotal int64
	// What the last pass says of itself, so that smooth_wrr can tell an
	// unperturbed pass over a set of members from one that left nginx's
	// steady orbit over it: clean is true when every member that took part
	// added its configured weight (none lowered by failures or ramping);
	// set is the fingerprint of the members that took part (the XOR of
	// their tags), partTotal the sum of their configured weights in units.
	clean     bool
	set       uint64
	partTotal int64
	// tag is a fixed random value per member, for set; wunit the
	// configured weights in units.
	tag   []uint64
	wunit []int64
}

// smoothUnit is the number of units of current weight in one weight: the
// resolution of a slow start's ramp (a weight of 1 starts at 100 units).
const smoothUnit = 1000

func newSmoothState(g *group) *smoothState {
	n := len(g.members)
	s := &smoothState{
		g:         g,
		current:   make([]int64, n),
		effective: make([]int, n),
		weight:    make([]int, n),
		low:       make([]bool, n),
		tag:       make([]uint64, n),
		wunit:     make([]int64, n),
	}
	for i, m := range g.members {
		s.weight[i] = m.weight
		s.tag[i] = mix64(uint64(i) + 0x9e3779b97f4a7c15)
		s.wunit[i] = int64(m.weight) * smoothUnit
		s.allTotal += s.wunit[i]
		if !m.down {
			s.upTotal += int64(m.weight) * smoothUnit
		}
		// A penalty that was still being worked off carries over an Update.
		e := m.weight - int(m.state.deficit.Load())
		if e < 0 {
			e = 0
		}
		s.effective[i] = e
		if e < m.weight {
			s.low[i] = true
			if g.lowUnsteady {
				g.addUnsteady(1)
			}
		}
	}
	return s
}

// next runs one nginx selection pass over the eligible members and returns
// the chosen position, or -1. When among is not nil, only the positions it
// lists take part (least_conn shares ties out among the tied members only).
func (s *smoothState) next(g *group, r *request, among []int) int {
	s.mu.Lock()
	best := smoothPass(s, g, r, among)
	s.mu.Unlock()
	return best
}

// smoothPass is next with s.mu held.
func smoothPass(s *smoothState, g *group, r *request, among []int) int {
	best, total := smoothAdd(s, g, r, among)
	if best >= 0 {
		s.current[best] -= total
	}
	return best
}

// smoothAdd is nginx's pass without its last step: every eligible member
// among those listed (nil: all) adds its effective weight to its current
// weight. It returns the member the pass chooses (-1: none) and the total
// the chosen one gives up. Called with s.mu held.
func smoothAdd(s *smoothState, g *group, r *request, among []int) (int, int64) {
	best, total, part, set := -1, int64(0), int64(0), uint64(0)
	simple, ramps := simpleScan(g, r), g.ramps.Load() != 0
	count := len(g.members)
	if among != nil {
		count = len(among)
	}
	for k := 0; k < count; k++ {
		i := k
		if among != nil {
			i = among[k]
		}
		if !simple && !usable(r, g.members[i]) {
			continue
		}
		// The member's effective weight, as nginx adds it. The common case
		// (configured weight, nobody ramping) stays in this loop.
		e := s.wunit[i]
		if ramps || s.effective[i] < s.weight[i] {
			e = s.adjust(r, i, ramps)
		}
		s.current[i] += e
		total += e
		part += s.wunit[i]
		set ^= s.tag[i]
		// Ties go to the earlier member, as in nginx.
		if best < 0 || s.current[i] > s.current[best] {
			best = i
		}
	}
	// Effective and slow-start weights never exceed the configured weight,
	// so the total reaches part only when every member that took part did
	// so fully.
	s.clean, s.set, s.partTotal = total == part, set, part
	return best, total
}

// adjust returns the weight member i adds in this pass, in units, when it is
// not simply its configured weight: its effective weight, capped by its
// slow-start weight (in thousandths, milliWeightNow) when members ramp; and
// lets the effective weight recover by one toward the configured weight, as
// nginx does on every pass that sees it.
func (s *smoothState) adjust(r *request, i int, ramps bool) int64 {
	m := s.g.members[i]
	e := int64(s.effective[i]) * smoothUnit
	if ramps {
		if w := milliWeightNow(r, m); e > w {
			e = w
		}
	}
	if s.effective[i] < s.weight[i] {
		s.effective[i]++
		s.settle(i, m)
	}
	return e
}

// fail applies nginx's penalty for a failed request to member m: its
// effective weight drops by weight/max_fails (not below 0) and then climbs
// back by one per selection pass.
func (s *smoothState) fail(m *member) {
	if m.maxFails == 0 || !s.g.penalize {
		return
	}
	i := m.pos
	s.mu.Lock()
	s.effective[i] -= m.weight / m.maxFails
	if s.effective[i] < 0 {
		s.effective[i] = 0
	}
	s.settle(i, m)
	s.mu.Unlock()
}

// settle keeps g's count of unsteady members and the carried-over deficit in step with member
// i's effective weight, after it changed. Called with s.mu held.
func (s *smoothState) settle(i int, m *member) {
	d := m.weight - s.effective[i]
	m.state.deficit.Store(int64(d))
	if d > 0 && !s.low[i] {
		s.low[i] = true
		if s.g.lowUnsteady {
			s.g.addUnsteady(1)
		}
	} else if d == 0 && s.low[i] {
		s.low[i] = false
		if s.g.lowUnsteady {
			s.g.addUnsteady(-1)
		}
	}
}
