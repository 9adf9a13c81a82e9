package core

import "math"

// url_hash's bounded mode is consistent hashing with bounded loads (Mirrokni,
// Thorup and Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA
// 2018), on nginx's ketama ring.
//
// With T requests in flight over the group, no member may take a request
// while it already has
//
//	cap = ceil(c * (T + 1) * weight / W)
//
// requests in flight, where W is the total weight of the members not marked
// down and c = Config.LoadFactor (default 1.25). With equal weights that is
// the paper's ceil(c * (T + 1) / E) for E members; with unequal weights each
// member's bound is c times its weighted share. A key walks the ring from its
// ketama point and goes to the first available member below its cap. While
// loads are light that is the ketama member, so keys keep their backend (and
// its caches); a hot key or a slow backend spills over to the next members on
// the ring instead of piling up. The in-flight counts are the balancer's own
// (Pick begins a request, Done ends it).
//
// Since c > 1 the caps add up to more than T, so some member is below its
// cap, and the walk finds one in O(1) expected steps. After boundedWalk ring
// points the walk continues over the members in configuration order; if every
// available member is at its cap (possible only when unavailable members hold
// the headroom, or when reports race), the available member with the least
// load per weight is chosen. An empty key goes to nginx's round robin, as in
// the other modes.

// boundedWalk is how many ring points a pick examines before it scans the
// members in order.
const boundedWalk = 64

type bounded struct {
	ring *ketamaRing
}

func newBounded(g *group, factor float64) (*bounded, error) {
	ring, err := newKetamaRing(g)
	if err != nil {
		return nil, err
	}
	upWeight := 0
	for _, m := range g.members {
		if !m.down {
			upWeight += m.weight
		}
	}
	if upWeight == 0 {
		upWeight = 1 // every member is down: no pick gets as far as the cap
	}
	g.lookScale = factor / float64(upWeight)
	ringTable(g, ring, tableBounded)
	return &bounded{ring: ring}, nil
}

// boundedShare returns the cap of a member of weight 1 for total requests in
// flight over the group; a member's cap is ceil(share * weight).
func boundedShare(g *group, total int64) float64 {
	if total < 0 {
		total = 0
	}
	return g.lookScale * float64(total+1)
}

func (s *bounded) pick(g *group, req request) int {
	r := &req
	if r.key == "" {
		return fallback(g, r)
	}
	share := boundedShare(g, r.b.inflight.Load())
	ring := s.ring
	n := len(ring.keys)
	i := ringFind(ring, crcString(r.key))
	best, bestLoad := -1, math.Inf(1)
	steps := boundedWalk
	if steps > n {
		steps = n
	}
	last := -1
	for step := 0; step < steps; step++ {
		if pos := int(uint32(ring.keys[i])); pos != last { // the point's owner
			last = pos
			if visit(g, r, pos, share, &best, &bestLoad) {
				return pos
			}
		}
		if i++; i == n {
			i = 0
		}
	}
	// Rare: the walk met only full or unavailable members.
	for k := 1; k <= len(g.members); k++ {
		if pos := (last + k) % len(g.members); visit(g, r, pos, share, &best, &bestLoad) {
			return pos
		}
	}
	return best
}

// visit reports whether member pos is available and below its cap. Otherwise
// it keeps in best the available member with the least load per weight seen
// so far, the choice when every available member is at its cap.
func visit(g *group, r *request, pos int, share float64, best *int, bestLoad *float64) bool {
	m := g.members[pos]
	if !usable(r, m) {
		return false
	}
	// Below the cap ceil(x): for a whole number of requests, below x.
	load := float64(m.state.inflight.Load())
	if load < share*float64(m.weight) {
		return true
	}
	if perWeight := load / float64(m.weight); perWeight < *bestLoad {
		*best, *bestLoad = pos, perWeight
	}
	return false
}
