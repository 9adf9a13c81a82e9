package core

import (
	"math"
	"time"
)

func init() {
	register(Fair, strategyInfo{build: buildFair})
}

// DefaultDecayTime is fair's default Config.DecayTime.
const DefaultDecayTime = 10 * time.Second

// fairProbeShare: a backend not picked for DecayTime/fairProbeShare gets the
// probe rule's pick.
const fairProbeShare = 4

// fairExplore is how often fair hands a pick to the next backend in turn
// instead of the better of two: every fairExplore-th pick. It bounds every
// eligible backend's share below by 1/(fairExplore*n) of the picks, so that
// a slow backend keeps being measured and is never starved (Traefik's
// leasttime was seen to give a slow backend 0.3%).
const fairExplore = 16

// fair is latency-aware balancing. Each backend has a peak-EWMA estimate of
// its latency (fed by Done: a sample above the estimate replaces it, one
// below pulls it down with weight 1-exp(-elapsed/DecayTime)). A backend's
// score is estimate * (in flight + 1) / weight; a pick draws two distinct
// backends at random in proportion to weight and takes the lower score (the
// first drawn on a tie, so that idle, unmeasured backends share by weight).
// A backend not yet measured scores 0 while it has nothing in flight (so it
// is tried at once) and +Inf while its first requests are out (so a new
// backend is not flooded before its first answer).
//
// No eligible backend is starved, by two rules, both O(1) through one atomic
// pick counter k (in a group of n backends):
//   - probe: pick k looks at backend k mod n; if that backend has not been
//     picked for DecayTime/4 (2.5 s by default), it gets the pick. So every
//     eligible backend gets a request at least every DecayTime/4 plus n picks,
//     and its estimate never gets older than that.
//   - explore: every 16th pick goes to backend (k/16) mod n if eligible, so each
//     eligible backend receives at least 1/(16n) of the picks under any load.
//
// The two candidates are drawn from the group's weight table (see
// weightedLook) when it has one, from an alias table otherwise.
//
// Picks take no lock; with an injected Config.Now and Config.Rand they are
// deterministic. The pick counter k is the group's cursor.
type fair struct {
	pairs pairDraw
}

func buildFair(g *group, c *Config) (strategy, error) {
	d := c.DecayTime
	if d == 0 {
		d = DefaultDecayTime
	}
	g.decay = int64(d)
	g.cur = newCursor(1, 0) // a plain counter: the picks use n, never take
	if up := upPositions(g); g.allUp && len(up) > 1 {
		g.setQuick(quickFair, weightedLook(g, up))
	}
	f := &fair{}
	if g.look == nil {
		f.pairs = newPairDraw(g) // fairPair draws from look when there is one
	}
	return f, nil
}

// pickFairQuick is PickIndex's quick path for fair, while the group is
// quiet and steady (so every member is eligible at its configured weight):
// pickFair's rules, in its order, with nothing to check per member.
func pickFairQuick(b *Balancer, key string) int {
	g := b.primary
	if (len(g.flagged) == 0 || g.failing.Load() == 0) && g.sched.gate.Load() == 0 { // isQuiet(g), isSteady(g)
		now := b.now().UnixNano() // unixNano, inline
		if now == 0 {
			now = 1
		}
		k := g.cur.n.Add(1)
		m := g.members[k%uint64(len(g.members))]
		if now-m.state.lastPick.Load() < g.decay/fairProbeShare {
			if k%fairExplore == 0 {
				m = g.members[(k/fairExplore)%uint64(len(g.members))]
			} else {
				i, j := lookPair(b, g.look)
				m = b.members[i]
				if mj := b.members[j]; fairCost(mj, int64(mj.weight)*1000) < fairCost(m, int64(m.weight)*1000) {
					m = mj
				}
			}
		}
		if m.state.lastPick.Load() != now { // taken, inline
			m.state.lastPick.Store(now)
		}
		return m.index
	}
	return pickKey(b, key)
}

func (f *fair) pick(g *group, r request) int { return pickFair(f, g, &r) }

// pickFair is the pick as a plain function, which pickIn calls without going
// through the interface.
func pickFair(f *fair, g *group, r *request) int {
	n := uint64(len(g.members))
	now := r.now()
	k := g.cur.n.Add(1)
	if n > 1 {
		c := int(k % n)
		if m := g.members[c]; usable(r, m) && now-m.state.lastPick.Load() >= g.decay/fairProbeShare {
			return taken(m, c, now)
		}
		if k%fairExplore == 0 {
			c = int((k / fairExplore) % n)
			if m := g.members[c]; usable(r, m) {
				return taken(m, c, now)
			}
		}
		i, j, drawn := fairPair(f, g, r.b)
		mi, mj := g.members[i], g.members[j]
		oki, okj := drawn && usable(r, mi), drawn && usable(r, mj)
		switch {
		case oki && okj:
			if fairScore(r, mj) < fairScore(r, mi) {
				return taken(mj, j, now)
			}
			return taken(mi, i, now)
		case oki:
			return taken(mi, i, now)
		case okj:
			return taken(mj, j, now)
		}
	}
	// Neither candidate is eligible (or n is 1): the lowest score among all.
	best, bs := -1, 0.0
	for i, m := range g.members {
		if usable(r, m) {
			if s := fairScore(r, m); best < 0 || s < bs {
				best, bs = i, s
			}
		}
	}
	if best < 0 {
		return -1
	}
	return taken(g.members[best], best, now)
}

// fairPair draws fair's two candidates (member positions): from the
// group's weight table when it has one, as the quick path does, so that
// both paths make the same choices; from the alias table otherwise.
func fairPair(f *fair, g *group, b *Balancer) (i, j int, ok bool) {
	if g.look == nil {
		return drawPair(&f.pairs, b.rand(), len(g.members))
	}
	bi, bj := lookPair(b, g.look)
	return b.members[bi].pos, b.members[bj].pos, true
}

// taken records that member m (at position pos) was picked at now.
func taken(m *member, pos int, now int64) int {
	if m.state.lastPick.Load() != now {
		m.state.lastPick.Store(now)
	}
	return pos
}

// fairScore is m's expected cost: latency estimate times (in flight + 1),
// divided by its (slow-start) weight.
func fairScore(r *request, m *member) float64 {
	return fairCost(m, milliWeightNow(r, m))
}

// fairCost is fairScore at weight milli (in thousandths).
func fairCost(m *member, milli int64) float64 {
	e := math.Float64frombits(m.state.ewma.Load())
	in := m.state.inflight.Load()
	if e == 0 {
		if in > 0 {
			return math.Inf(1)
		}
		return 0
	}
	return e * float64(in+1) / float64(milli)
}
