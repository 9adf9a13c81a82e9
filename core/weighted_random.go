package core

// WeightedRandom names the weighted_random strategy in Config.Strategy.
const WeightedRandom = "weighted_random"

func init() {
	register(WeightedRandom, strategyInfo{build: buildWeightedRandom})
}

// weightedRandom picks at random in proportion to weight among the members
// that are not down, in O(1): a pick draws from the group's table of
// members repeated by weight (weightedLook) while every member is eligible,
// and the pick below through an alias table otherwise (or when that table
// would pass MaxScheduleEntries).
type weightedRandom struct {
	up []int32
	aliasTable
}

func buildWeightedRandom(g *group, c *Config) (strategy, error) {
	up := upPositions(g)
	g.setTable(tableDraw, weightedLook(g, up))
	return &weightedRandom{up: up, aliasTable: newAliasTable(g, up)}, nil
}

// weightedLook lists the backend index of each listed member weight/gcd
// times, where gcd is the weights' greatest common divisor: a uniform entry is
// a draw in exact proportion to weight. It returns nil beyond
// MaxScheduleEntries entries; the alias table then draws every pick.
func weightedLook(g *group, up []int32) []int32 {
	d, total := int64(0), int64(0) // 64-bit: the sum passes 2^31 on 32-bit platforms
	for _, p := range up {
		d = gcd(d, int64(g.members[p].weight))
		total += int64(g.members[p].weight)
	}
	if d == 0 || total/d > MaxScheduleEntries {
		return nil
	}
	look := make([]int32, 0, total/d)
	for _, p := range up {
		for k := int64(0); k < int64(g.members[p].weight)/d; k++ {
			look = append(look, int32(g.members[p].index))
		}
	}
	return look
}

// aliasTable draws member positions in proportion to their configured
// weights in O(1): Walker's alias method (Vose's construction), in exact
// integer arithmetic, so that the probabilities are the weights' shares
// exactly. weighted_random draws from it, and least_conn's two choices and
// fair draw their candidates from it.
type aliasTable struct {
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

// newAliasTable builds the table over the listed positions of g's members.
func newAliasTable(g *group, up []int32) aliasTable {
	var s aliasTable
	n := len(up)
	if n == 0 {
		return s
	}
	// Member k owns weight_k * n of the n * total units; every column holds
	// total units, shared by at most two members.
	units := make([]uint64, n)
	for k, p := range up {
		w := uint64(g.members[p].weight)
		s.total += w
		units[k] = w * uint64(n)
	}
	s.cells = make([]aliasCell, n)
	var small, large []int
	for k := 0; k < n; k++ {
		s.cells[k] = aliasCell{threshold: s.total, pos: up[k], alias: up[k]}
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
		s.cells[l].alias = up[h]
		units[h] -= s.total - units[l]
		if units[h] < s.total {
			large = large[:len(large)-1]
			small = append(small, h)
		}
	}
	// In integers nothing is left over: the remaining columns are full.
	return s
}

// aliasDraw maps a uniform 64-bit x to a member position (the table must not be
// empty): the high part of x picks the column, the rest decides between the
// column's two members.
func aliasDraw(s *aliasTable, x uint64) int32 {
	col, lo := fastrange(x, uint64(len(s.cells)))
	c := &s.cells[col]
	if d, _ := fastrange(lo, s.total); d < c.threshold {
		return c.pos
	}
	return c.alias
}

// pairDraw draws the two distinct candidates of a power-of-two-choices pick
// (least_conn's two choices, fair) in proportion to weight, so that when the
// candidates tie (idle backends) the shares follow the weights, as nginx's
// least_conn shares ties by weight.
type pairDraw struct {
	// uniform is true when no member is down and all weigh the same: then a
	// uniform pair is already proportional to weight, and pair draws it.
	uniform bool
	aliasTable
}

// pairTries bounds the draws for a second candidate distinct from the first;
// a heavy member can come up again (weights 99,1: 99% of the time).
const pairTries = 4

func newPairDraw(g *group) pairDraw {
	up := upPositions(g)
	d := pairDraw{uniform: len(up) == len(g.members)}
	for _, m := range g.members {
		d.uniform = d.uniform && m.weight == g.members[0].weight
	}
	if !d.uniform {
		d.aliasTable = newAliasTable(g, up)
	}
	return d
}

// redraw draws a second candidate from look again, up to pairTries times,
// while it repeats the first, i. (A function of its own, so that rare work
// stays out of the frames of the paths that seldom need it: see interp.go.)
func redraw(b *Balancer, look []int32, i int32) int32 {
	n := uint64(len(look))
	j := i
	for t := 0; t < pairTries && j == i; t++ {
		j = look[b.rand()%n]
	}
	return j
}

// drawPair returns two candidates from one uniform 64-bit x, distinct unless
// pairTries draws all repeat the first (then i == j), or ok false when there
// are fewer than two members to draw from.
func drawPair(d *pairDraw, x uint64, n int) (i, j int, ok bool) {
	if d.uniform {
		if n < 2 {
			return 0, 0, false
		}
		i, j = pair(x, n)
		return i, j, true
	}
	if len(d.cells) < 2 {
		return 0, 0, false
	}
	i = int(aliasDraw(&d.aliasTable, x))
	j = i
	for t := 0; t < pairTries && j == i; t++ {
		x += 0x9e3779b97f4a7c15
		j = int(aliasDraw(&d.aliasTable, mix64(x)))
	}
	return i, j, true
}

func (s *weightedRandom) pick(g *group, req request) int {
	r := &req
	if len(s.cells) == 0 {
		return -1
	}
	// During a slow start a draw that lands on a ramping member stands with
	// its ramp's share (keepDraw), so that draws follow the weights of the
	// moment: O(1) still, a tenth of the draws standing at the least.
	ramps := g.ramps.Load() != 0
	for t := 0; t < randomTries; t++ {
		x := r.b.rand()
		pos := tableDrawn(g, r, x)
		if pos < 0 {
			pos = int(aliasDraw(&s.aliasTable, x))
		}
		if m := g.members[pos]; usable(r, m) && (!ramps || keepDraw(r, m, mix64(x))) {
			return pos
		}
	}
	return sampleEligible(g, r, s.up, true)
}
