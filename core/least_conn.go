package core

import "sync/atomic"

// tieBits is how many members least_conn's steady read marks in its tie
// mask; a tie in a larger group takes the full pick.
const tieBits = 64

// LeastConn names the least_conn strategy in Config.Strategy.
const LeastConn = "least_conn"

func init() {
	register(LeastConn, strategyInfo{counts: always, total: manyBackends, smooth: exactTies, build: buildLeastConn})
}

// leastTotalMin is the fewest backends for which least_conn keeps a count
// of requests in flight over all of them. Below it, an idle pick scans, a
// handful of backends, and a request is two atomic operations cheaper, and
// its count can be handed to Take's caller (see interp.go); from it, an
// idle pick is the table's next entry, O(1) however many backends.
const leastTotalMin = 9

// manyBackends is least_conn's strategyInfo.total.
func manyBackends(c *Config) bool { return len(c.Backends) >= leastTotalMin }

// exactTies is least_conn's strategyInfo.smooth: nginx's exact choice
// shares ties by the smooth pass; two choices' table does not.
func exactTies(c *Config) bool { return !c.TwoChoices }

// leastConn is nginx's weighted least connections
// (ngx_http_upstream_least_conn_module): the eligible member with the fewest
// requests in flight per unit of weight, compared by cross-multiplication so
// that no division rounds; the first such member in configuration order
// wins, and when several tie, nginx's smooth weighted round robin runs among
// the tied members only. Weights are slow-start weights, in thousandths so
// that a ramping backend of weight 1 ramps too.
//
// The exact scan is O(n) and lock-free; only a tie takes the group's smooth
// lock. When every member that is not down ties (all of them idle, as at
// low load), nginx's pass among the tied is smooth_wrr's, and the shared
// smooth state follows smooth_wrr's table, both modes included (see
// smoothWRR): while no request is in flight a pick is the table's next entry,
// O(1) with no scan. With Config.TwoChoices it compares two random members instead
// (power of two choices), drawn in proportion to weight so that idle
// backends share by weight as nginx's ties do: O(1), lock-free, and within
// a small factor of the exact choice's balance on large pools.
type leastConn struct {
	twoChoices bool
	pairs      pairDraw
	ties       *smoothWRR // the smooth passes among tied members
	up         int        // members not down
}

func buildLeastConn(g *group, c *Config) (strategy, error) {
	g.smooth.tied = make([]int, 0, len(g.members))
	up := upPositions(g)
	lc := &leastConn{twoChoices: c.TwoChoices, up: len(up)}
	if lc.twoChoices {
		// Exact passes only: two choices' steady read reads the schedule's
		// gate as steadiness alone, with no table mode in it.
		lc.ties = &smoothWRR{sched: &g.sched}
		lc.pairs = newPairDraw(g)
		if len(up) > 2 {
			g.setTable(tableTwo, weightedLook(g, up))
		}
		return lc, nil
	}
	lc.ties = newSmoothWRR(g, 0)
	g.ties = lc.ties
	if g.table == tableSchedule {
		g.table = tableLeast
	}
	// The steady read marks ties in a mask of tieBits: a larger group
	// takes the full pick.
	g.leastScan = g.allUp && !g.capped && len(g.members) <= tieBits
	g.allMask = uint64(1)<<uint(len(g.members)) - 1 // all ones at 64 members
	return lc, nil
}

// noFailing is the count of failing backends of a group none of whose
// members has max_fails or max_conns (see group.watch): always 0.
var noFailing atomic.Int32

func (lc *leastConn) pick(g *group, req request) int {
	r := &req
	if lc.twoChoices && len(g.members) > 2 {
		if p := twoLeast(lc, g, r); p >= 0 {
			return p
		}
	}
	return exactLeast(lc, g, r)
}

// exactLeast is nginx's choice.
func exactLeast(lc *leastConn, g *group, r *request) int {
	// The scan is lock-free and notes the tied members in a buffer on the
	// stack; when more tie than it holds, the scan runs again under the
	// smooth lock into the group's buffer, which holds them all.
	var buf [64]int
	best, n := scanLeast(g, r, buf[:])
	if n < 2 {
		return best // also -1: nothing eligible
	}
	if n == lc.up {
		// Every member that is not down ties (so each is eligible): the
		// pass among them is smooth_wrr's.
		return pickSmoothWRR(lc.ties, g, r)
	}
	// nginx shares ties out by smooth weighted round robin among the tied
	// members only.
	s := g.smooth
	s.mu.Lock()
	tied := buf[:]
	if n > len(buf) {
		best, n = scanLeast(g, r, s.tied[:cap(s.tied)])
		tied = s.tied[:cap(s.tied)]
	}
	p := best
	if n >= 2 {
		p = exactPass(lc.ties, g, r, tied[:n])
	}
	s.mu.Unlock()
	if p < 0 {
		return best // the tied members changed meanwhile; best was eligible
	}
	return p
}

// scanLeast returns the first eligible member with the fewest requests in
// flight per weight, and how many members tie with it (itself included),
// noting their positions in tied as far as it holds them.
func scanLeast(g *group, r *request, tied []int) (best, n int) {
	simple, ramps := simpleScan(g, r), g.ramps.Load() != 0
	if simple && !ramps {
		return scanPlain(g.counts, g.milli, tied)
	}
	best = -1
	var bc, bw int64
	for i, count := range g.counts {
		c, w := count.Load(), g.milli[i]
		if !simple && !usable(r, g.members[i]) {
			continue
		}
		if ramps {
			w = milliWeightNow(r, g.members[i])
		}
		if best < 0 || c*bw < bc*w {
			best, bc, bw, n = i, c, w, 0
		} else if c*bw != bc*w {
			continue
		}
		if n < len(tied) {
			tied[n] = i
		}
		n++
	}
	return best, n
}

// scanPlain is scanLeast when every member is eligible at its configured
// weight, the common case: one pass over the flat array, no call per member,
// the tie bookkeeping only on ties.
func scanPlain(counts []*atomic.Int64, milli []int64, tied []int) (best, n int) {
	if len(counts) == 0 || len(tied) == 0 {
		return -1, 0
	}
	bc, bw := counts[0].Load(), milli[0]
	n = 1
	tied[0] = 0
	for i := 1; i < len(counts); i++ {
		c, w := counts[i].Load(), milli[i]
		lhs, rhs := c*bw, bc*w
		if lhs > rhs {
			continue
		}
		if lhs < rhs {
			best, bc, bw, n = i, c, w, 0
		}
		if n < len(tied) {
			tied[n] = i
		}
		n++
	}
	return best, n
}

// twoLeast is the power of two choices: two distinct members drawn at random
// in proportion to weight, the one with fewer requests in flight per weight
// wins (the first drawn on a tie, so that idle backends share by weight). It
// returns -1 when neither is eligible, and the caller scans.
func twoLeast(lc *leastConn, g *group, r *request) int {
	var i, j int
	if x := r.b.rand(); g.look != nil {
		// From the table, as pickTwoSteady draws: one source of random
		// values gives one sequence whichever way the pick goes.
		a, c := g.look[(x&0xffffffff)%g.lookLen], g.look[(x>>32)%g.lookLen]
		if a == c {
			c = redraw(r.b, g.look, a)
		}
		i, j = r.b.members[a].pos, r.b.members[c].pos
	} else {
		ok := false
		if i, j, ok = drawPair(&lc.pairs, x, len(g.members)); !ok {
			return -1
		}
	}
	mi, mj := g.members[i], g.members[j]
	oki, okj := usable(r, mi), usable(r, mj)
	switch {
	case oki && okj:
		lhs, rhs := mj.state.inflight.Load()*milliWeightNow(r, mi), mi.state.inflight.Load()*milliWeightNow(r, mj)
		if lhs < rhs || lhs == rhs && g.ramps.Load() != 0 && !keepDraw(r, mi, r.b.rand()) {
			// On a tie (idle backends) the first drawn wins, so that shares
			// follow the weights; one in slow start wins its ramp's share
			// of those ties only.
			return j
		}
		return i
	case oki:
		return i
	case okj:
		return j
	}
	return -1
}

// pair turns one random 64-bit value into two distinct positions below n
// (n >= 2): the first from the low half, the second from the high half among
// the n-1 others. The modulo bias is below n/2^32.
func pair(x uint64, n int) (i, j int) {
	i = int((x & 0xffffffff) % uint64(n))
	j = int((x >> 32) % uint64(n-1))
	if j >= i {
		j++
	}
	return i, j
}
