package core

// Random names the random strategy in Config.Strategy.
const Random = "random"

func init() {
	register(Random, strategyInfo{build: buildRandom})
}

// randomTries is how many random draws a pick makes before it falls back to a
// scan: with half the members ineligible, 8 draws all miss once in 256 picks.
const randomTries = 8

// random picks uniformly among the members that are not down; a member in
// slow start is drawn in proportion to its ramp's share (rampShare): a draw
// that lands on it stands with that probability and is redrawn otherwise.
type random struct {
	up []int32 // positions of the members that are not down
}

func buildRandom(g *group, c *Config) (strategy, error) {
	s := &random{up: upPositions(g)}
	g.setTable(tableDraw, lookIndices(g, s.up))
	return s, nil
}

func (s *random) pick(g *group, req request) int {
	r := &req
	if len(s.up) == 0 {
		return -1
	}
	n := uint64(len(s.up))
	ramps := g.ramps.Load() != 0
	for t := 0; t < randomTries; t++ {
		x := r.b.rand()
		pos := tableDrawn(g, r, x)
		if pos < 0 {
			i, _ := fastrange(x, n)
			pos = int(s.up[i])
		}
		if m := g.members[pos]; usable(r, m) && (!ramps || keepDraw(r, m, mix64(x))) {
			return pos
		}
	}
	return sampleEligible(g, r, s.up, false)
}

// tableDrawn is the member position a draw x lands on in the group's table
// (as pickTable draws it, so that one source of random values gives one
// sequence whichever way a pick goes), or -1 when the group has none.
func tableDrawn(g *group, r *request, x uint64) int {
	if g.look == nil {
		return -1
	}
	return r.b.members[g.look[x%g.lookLen]].pos
}

// keepDraw reports whether a random draw that landed on member m stands:
// always, unless m ramps; then with probability rampShare/smoothUnit, decided
// by lo, a uniform value left over from the draw.
func keepDraw(r *request, m *member, lo uint64) bool {
	f := rampShare(r, m)
	if f >= smoothUnit {
		return true
	}
	d, _ := fastrange(lo, smoothUnit)
	return int64(d) < f
}

// sampleEligible makes one pass over the listed positions and returns an
// eligible one chosen at random, in proportion to its weight for this pick
// (milliWeightNow) when weighted and to its ramp's share (rampShare) otherwise,
// or -1 when none is eligible. It is the exact fallback behind the O(1) draws, for picks where
// most members are ineligible: reservoir sampling needs one pass and no memory.
func sampleEligible(g *group, r *request, up []int32, weighted bool) int {
	best := -1
	var total uint64
	x := r.b.rand()
	for _, p := range up {
		m := g.members[p]
		if !usable(r, m) {
			continue
		}
		var w uint64
		if weighted {
			w = uint64(milliWeightNow(r, m))
		} else {
			w = uint64(rampShare(r, m))
		}
		total += w
		// Keep this member with probability w/total (splitmix64 supplies
		// the draws: one b.rand call per pick, not one per member).
		x += 0x9e3779b97f4a7c15
		if d, _ := fastrange(mix64(x), total); d < w {
			best = int(p)
		}
	}
	return best
}

// mix64 is splitmix64's output function: a bijection that turns a counter
// into well-mixed bits.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
