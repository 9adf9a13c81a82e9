package core

import "sync/atomic"

// tieBits is how many members least_conn's quick path marks in its tie
// mask; a tie in a larger group takes the full pick.
const tieBits = 64

func init() {
	register(LeastConn, strategyInfo{build: buildLeastConn})
}

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
		// Exact passes only: two choices' quick path reads the schedule's
		// gate as steadiness alone, with no table mode in it.
		lc.ties = &smoothWRR{sched: &g.sched}
		lc.pairs = newPairDraw(g)
		if len(up) > 2 {
			g.setQuick(quickTwo, weightedLook(g, up))
		}
		return lc, nil
	}
	lc.ties = newSmoothWRR(g, 0)
	g.ties = lc.ties
	if g.quick == quickTable {
		g.quick = quickLeast
	}
	// The quick path marks ties in a mask of tieBits: a larger group takes
	// the full pick.
	g.leastQuick = g.allUp && !g.capped && len(g.members) <= tieBits
	g.allMask = uint64(1)<<uint(len(g.members)) - 1 // all ones at 64 members
	return lc, nil
}

// noFailing is the count of failing backends of a group none of whose
// members has max_fails or max_conns (see group.watch): always 0.
var noFailing atomic.Int32

// pickLeastQuick is PickIndex's quick path for least_conn: while nothing is
// in flight (for a balancer that counts over all backends, see keepsTotal),
// the schedule's next entry (every member that is not down ties, as in
// PickNext); while every member is up, none has max_conns, none is unsteady (ramping, or with a
// weight lowered by failures) and the group is quiet (so each member is
// eligible at its configured weight), one pass over the group's counts and
// weights (in thousandths) finds the member with the fewest requests in
// flight per weight, nginx's choice when it is the only one (scanPlain's
// answer, without the tied members' positions); a tie goes to tiedPass,
// with a bit per tied position (so the quick path is for groups of up to
// tieBits members). Where they have no answer the full pick runs.
// Under the interpreter every call and every subexpression costs
// allocations, so the scan is inline and the conditions few and flat
// (TestLeastAloneMatchesScan, TestLeastTiedMatchesFullPick).
func pickLeastQuick(b *Balancer, key string) int {
	g := b.primary
	gate := g.gate.Load()
	if b.inflight != nil && gate == 1 {
		if i := leastIdle(b, g); i >= 0 {
			return i
		}
	}
	if g.leastQuick && gate < 1<<modeBits && g.watch.Load() == 0 { // isSteady(g), isQuiet(g)
		// bc/bw starts as 1/0, above any load: the first member takes it.
		milli := g.milli
		best, bc, bw, mask, bit := 0, int64(1), int64(0), uint64(0), uint64(1)
		for i, n := range g.counts {
			c, w := n.Load(), milli[i]
			if lhs, rhs := c*bw, bc*w; lhs < rhs {
				best, bc, bw, mask = i, c, w, bit
			} else if lhs == rhs {
				mask |= bit
			}
			bit <<= 1
		}
		if mask&(mask-1) == 0 { // one bit: best alone
			return g.members[best].index
		}
		if p := tiedPass(b, g, mask, gate); p >= 0 {
			return p
		}
	}
	return pickKey(b, key)
}

// leastIdle is pickLeastQuick's answer while nothing is in flight, for a
// balancer that counts over all backends and a schedule on its canonical
// table: every member that is not down ties, and nginx's pass among them
// all is smooth_wrr's next step, the table's next entry (PickNext's,
// inline). It returns -1 while something is in flight or the group is not
// quiet. A function of its own, so that a group below nine members (which
// keeps no count over all of them) pays nothing for it under the
// interpreter.
func leastIdle(b *Balancer, g *group) int {
	if b.inflight.Load() == 0 && !g.capped && g.watch.Load() == 0 { // isQuiet(g)
		return int(g.look[(g.cur.n.Add(1)-1)%g.cur.size])
	}
	return -1
}

// tiedPass is least_conn's quick path for a tie under load (about half of
// the picks in a real Traefik at 32 connections), for the members in mask
// as the scan found them tied, gate the schedule's gate as read before the
// scan: nginx's smooth pass among the tied, as exactLeast makes it, in one
// function over the flat arrays, where the full pick costs the interpreter
// a request, its dispatch, a 64-entry buffer, a second scan and some ten
// calls. When every member ties it is smooth_wrr's pass over them all: the
// table's next entry while the schedule follows it, smooth_wrr's own pick
// while it follows an orbit it learnt. Otherwise it is exactPass's, inline:
// leaving the table first if the schedule follows one, smoothPass, and
// follow's part. It returns the backend index, or -1 where the full pick
// must answer (a member unsteady at the pass, or, at a tie among every
// member, the schedule back on a table meanwhile).
func tiedPass(b *Balancer, g *group, mask uint64, gate int64) int {
	all := mask == g.allMask
	if all && gate != 0 {
		return tiedAll(b, g, gate)
	}
	sm := g.smooth
	sm.mu.Lock()
	if gate = g.gate.Load(); gate != 0 && !tiedLeave(g, gate, all) {
		sm.mu.Unlock()
		return -1
	}
	cur, wu, tag := sm.current, sm.wunit, sm.tag
	best, top, total, set := -1, int64(0), int64(0), uint64(0)
	for i, bit := 0, uint64(1); i < len(cur); i, bit = i+1, bit<<1 {
		if mask&bit != 0 {
			c := cur[i] + wu[i]
			cur[i] = c
			total += wu[i]
			set ^= tag[i]
			if best < 0 || c > top { // ties go to the earlier member, as in nginx
				best, top = i, c
			}
		}
	}
	cur[best] -= total
	sm.clean, sm.set, sm.partTotal = true, set, total
	if g.ties.table != nil { // follow's part (beyond the bound there is no table)
		if all {
			tiedFollow(b, g, best)
		} else if cur[best] == 0 && allZero(cur) {
			g.ties.resume()
		} else {
			g.ties.rec = 0
		}
	}
	sm.mu.Unlock()
	return g.members[best].index
}

// tiedLeave is tiedPass's first step when the schedule's gate, read under
// the smooth lock, is not 0: exactPass's, leaving the table the schedule
// follows, unless the full pick must answer (it reports false): a member is
// unsteady (exactPass adjusts its weight), or every member ties and the
// schedule is back on a table.
func tiedLeave(g *group, gate int64, all bool) bool {
	if gate>>modeBits != 0 || all {
		return false
	}
	leaveTable(g.ties, g, gate&modeMask)
	return true
}

// tiedFollow is follow after tiedPass's pass among every member, which
// picked best: it may record the pass towards a learnt orbit.
func tiedFollow(b *Balancer, g *group, best int) {
	r := request{b: b}
	follow(g.ties, g, &r, best, false)
}

// tiedAll is tiedPass's pass when every member ties while the schedule
// follows a table (gate is 1, the canonical one: its next entry, as
// PickNext takes it) or an orbit smooth_wrr learnt (its pick), in a
// function of its own so that tiedPass's frame has neither.
func tiedAll(b *Balancer, g *group, gate int64) int {
	if gate == 1 {
		return int(g.look[(g.cur.n.Add(1)-1)%g.cur.size])
	}
	r := request{b: b}
	return g.members[pickSmoothWRR(g.ties, g, &r)].index
}

// pickTwoQuick is PickIndex's quick path for two choices, while the group is
// steady and quiet: two draws in proportion to weight from look (fairPair's,
// inline: its two results would cost the interpreter a call's worth), and
// the one with fewer requests in flight per weight, the first on a tie.
func pickTwoQuick(b *Balancer, key string) int {
	g := b.primary
	if (len(g.flagged) == 0 || g.failing.Load() == 0) && g.sched.gate.Load() == 0 { // isQuiet(g), isSteady(g)
		n := uint64(len(g.look))
		x := b.rand()
		i, j := g.look[(x&0xffffffff)%n], g.look[(x>>32)%n]
		if i == j {
			j = redraw(b, g.look, i)
		}
		mi, mj := b.members[i], b.members[j]
		if mj.state.inflight.Load()*int64(mi.weight) < mi.state.inflight.Load()*int64(mj.weight) {
			return int(j)
		}
		return int(i)
	}
	return pickKey(b, key)
}

func (lc *leastConn) pick(g *group, r request) int { return pickLeastConn(lc, g, &r) }

// pickLeastConn is the pick as a plain function, which pickIn calls without going
// through the interface.
func pickLeastConn(lc *leastConn, g *group, r *request) int {
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
	i, j, ok := drawPair(&lc.pairs, r.b.rand(), len(g.members))
	if !ok {
		return -1
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
