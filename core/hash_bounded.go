package core

import "math"

// url_hash's bounded mode is consistent hashing with bounded loads (Mirrokni,
// Thorup and Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA
// 2018), on nginx's ketama ring.
//
// With T requests in flight over the group and E members not marked down,
// no member may take a request while it already has
//
//	cap = ceil(c * (T + 1) / E)
//
// requests in flight (c = Config.LoadFactor, default 1.25). A key walks the
// ring from its ketama point and goes to the first available member below
// the cap. While loads are light that is the ketama member, so keys keep
// their backend (and its caches); a hot key or a slow backend spills over to
// the next members on the ring instead of piling up. The in-flight counts
// are the ones the caller reports with Start and Done.
//
// Since c > 1, some member is always below the cap, and the walk finds one in
// O(1) expected steps. After boundedWalk ring points the walk continues over
// the members in configuration order; if every available member is at the
// cap (possible only when unavailable members hold the headroom, or when
// reports race), the least loaded available member is chosen. An empty key
// goes to nginx's round robin, as in the other modes.

// boundedWalk is how many ring points a pick examines before it scans the
// members in order.
const boundedWalk = 64

type bounded struct {
	ring   *ketamaRing
	factor float64
	// up is the number of members not marked down: E in the cap.
	up int
}

func newBounded(g *group, factor float64) (*bounded, error) {
	ring, err := newKetamaRing(g)
	if err != nil {
		return nil, err
	}
	s := &bounded{ring: ring, factor: factor}
	for _, m := range g.members {
		if !m.down {
			s.up++
		}
	}
	return s, nil
}

// limit returns the cap for total requests in flight over the group.
func (s *bounded) limit(total int64) int64 {
	if total < 0 {
		total = 0
	}
	up := s.up
	if up < 1 {
		up = 1
	}
	return int64(math.Ceil(s.factor * float64(total+1) / float64(up)))
}

func (s *bounded) pick(g *group, r request) int {
	if r.key == "" {
		return fallback(g, &r)
	}
	limit := s.limit(groupInFlight(g))
	ring := s.ring
	n := len(ring.points)
	i := ring.find(crcString(r.key))
	best, bestLoad := -1, int64(math.MaxInt64)
	steps := boundedWalk
	if steps > n {
		steps = n
	}
	last := -1
	for step := 0; step < steps; step++ {
		pos := int(ring.owner[i])
		if pos != last {
			last = pos
			m := g.members[pos]
			if r.ok(m) {
				load := m.state.inflight.Load()
				if load < limit {
					return pos
				}
				if load < bestLoad {
					best, bestLoad = pos, load
				}
			}
		}
		if i++; i == n {
			i = 0
		}
	}
	// Rare: the walk met only full or unavailable members.
	for k := 1; k <= len(g.members); k++ {
		pos := (last + k) % len(g.members)
		m := g.members[pos]
		if r.ok(m) {
			load := m.state.inflight.Load()
			if load < limit {
				return pos
			}
			if load < bestLoad {
				best, bestLoad = pos, load
			}
		}
	}
	return best
}

// groupInFlight returns the requests in flight over the group's members.
// It reads every member: O(n). A group-wide counter kept by Start and Done
// would make it O(1).
func groupInFlight(g *group) int64 {
	var total int64
	for _, m := range g.members {
		total += m.state.inflight.Load()
	}
	return total
}
