package core

func init() {
	register(WeightedRandom, strategyInfo{build: buildWeightedRandom})
}

// weightedRandom picks at random in proportion to weight among the members
// that are not down, in O(1) through Walker's alias method (Vose's
// construction), in exact integer arithmetic.
type weightedRandom struct {
	up    []int32
	cells []aliasCell
	total uint64 // each cell's capacity: the sum of the weights
}

// aliasCell is one column of the alias table: a draw d in [0, total) that
// lands in the column yields pos when d < threshold and alias otherwise.
type aliasCell struct {
	threshold uint64
	pos       int32
	alias     int32
}

func buildWeightedRandom(g *group, c *Config) (strategy, error) {
	s := &weightedRandom{up: upPositions(g)}
	n := len(s.up)
	if n == 0 {
		return s, nil
	}
	// Member k owns weight_k * n of the n * total units; every column holds
	// total units, shared by at most two members.
	units := make([]uint64, n)
	for k, p := range s.up {
		w := uint64(g.members[p].weight)
		s.total += w
		units[k] = w * uint64(n)
	}
	s.cells = make([]aliasCell, n)
	var small, large []int
	for k := 0; k < n; k++ {
		s.cells[k] = aliasCell{threshold: s.total, pos: s.up[k], alias: s.up[k]}
		if units[k] < s.total {
			small = append(small, k)
		} else {
			large = append(large, k)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		l := small[len(small)-1]
		small = small[:len(small)-1]
		h := large[len(large)-1]
		s.cells[l].threshold = units[l]
		s.cells[l].alias = s.up[h]
		units[h] -= s.total - units[l]
		if units[h] < s.total {
			large = large[:len(large)-1]
			small = append(small, h)
		}
	}
	// In integers nothing is left over: the remaining columns are full.
	return s, nil
}

func (s *weightedRandom) pick(g *group, r request) int {
	if len(s.cells) == 0 {
		return -1
	}
	// During a slow start weights differ from the table's; draw exactly
	// from the weights of the moment instead.
	if !g.steady() {
		return sampleEligible(g, &r, s.up, true)
	}
	n := uint64(len(s.cells))
	for t := 0; t < randomTries; t++ {
		col, lo := fastrange(r.b.rand(), n)
		c := &s.cells[col]
		pos := c.alias
		if d, _ := fastrange(lo, s.total); d < c.threshold {
			pos = c.pos
		}
		if r.ok(g.members[pos]) {
			return int(pos)
		}
	}
	return sampleEligible(g, &r, s.up, true)
}
