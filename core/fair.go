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

// fairProbeShare: a backend not picked for DecayTime/fairProbeShare gets
// the probe rule's pick.
const fairProbeShare = 4

// fairScan is the largest group fair scores in whole: up to 8 backends
// every pick looks at them all (at that size the best of all is markedly
// better than the best of two: in lbsim's scenarios, seed 1, 10.1 against
// 11.6 ms mean latency in "slow", 6.2 against 10.3 in "mixed-cost"); above,
// the better of two.
const fairScan = 8

// fairInf is the score of a backend not yet measured with requests in
// flight: a variable, since under the interpreter math.Inf is a call into
// compiled code on every use (three per pick over three backends).
var fairInf = math.Inf(1)

// fairTie is how much lower a score must be to take the pick from the
// weighted first candidate when it is not less loaded: scores within a
// factor of 2 count as equal then. So backends of about equal latency share
// by weight however their estimates jitter.
const fairTie = 2

// fair is latency-aware balancing. Each backend has an estimate of its
// latency (see observe): an EWMA of its answers' latencies times a failure
// penalty, and of how long a request in flight holds the next one up. A
// backend's score is its expected latency for one more request:
// estimate * (weight + in flight * wait) / weight, weight standing for its
// capacity (divided further by the ramp's fraction of it during a slow
// start). A pick draws a first candidate at random in proportion to weight
// and compares it with the best-scoring backend (in a group of up to
// fairScan members; with a second weighted draw beyond): that one takes the
// pick when it has fewer requests in flight per unit of weight and a lower
// score, or a score lower by more than fairTie. So equal backends share by
// weight, idle or loaded, and a slower or busier one gets less. A backend
// not yet measured scores 0 while it has nothing in flight (so it is tried
// at once) and +Inf while its first requests are out (so a new backend is
// not flooded before its first answer).
//
// The latency estimate is a plain EWMA, not the peak EWMA of Finagle and
// Linkerd (where an answer above the estimate replaces it): with the peak,
// each estimate is the largest recent answer, and its noise cost mean
// latency in lbsim's scenarios (seed 1: slow 10.8 against 10.1 ms,
// flapping 10.7 against 10.3, mixed-cost 7.5 against 6.2); requests in
// flight show a slowdown at once instead.
//
// No eligible backend is starved, and none is fed by count: the probe rule
// looks at backend k mod n at pick k (k an atomic pick counter); if that
// backend has not been picked for DecayTime/4 (2.5 s by default), it gets
// the pick. So every eligible backend gets a request at least every
// DecayTime/4 plus n picks, its estimate never gets older than that, and a
// backend much slower than the others gets those probes and little else
// (in lbsim's "slow" scenario 0.1% of requests, where every 16th pick going
// round gave it 1.4%).
//
// The candidates are drawn from the group's weight table (see weightedLook)
// when it has one, from an alias table otherwise.
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
		now := clockEpoch + int64(b.now().Sub(clockBase)) // clockNano, inline
		if now == 0 {
			now = 1
		}
		k := g.cur.n.Add(1)
		m := g.members[k%uint64(len(g.members))]
		if now-m.state.lastPick.Load() < g.decay/fairProbeShare {
			i, j := lookPair(b, g.look)
			m = b.members[i]
			if len(g.members) <= fairScan {
				m = g.members[fairQuickScan(g, m.pos)]
			} else if mj := b.members[j]; fairBetter(mj, int64(mj.weight)*1000, m, int64(m.weight)*1000) {
				m = mj
			}
		}
		if m.state.lastPick.Load() != now { // taken, inline
			m.state.lastPick.Store(now)
		}
		return m.index
	}
	return pickKey(b, key)
}

// fairQuickScan is fairBest for the quick path, whose members are all
// eligible at their configured weights. The scores are fairCost's and the
// last comparison fairBetter's, inline: under the interpreter a call per
// member would double the pick's cost.
func fairQuickScan(g *group, first int) int {
	best, bs, bin, bm := first, fairInf, int64(0), int64(1)
	fs, fin, fm := 0.0, int64(0), int64(1)
	for c, h := range g.hot {
		in := h.state.inflight.Load()
		s := fairInf
		if e := math.Float64frombits(h.state.ewma.Load()); e != 0 {
			s = e * (float64(h.milli) + float64(in*1000)*math.Float64frombits(h.state.wait.Load())) / float64(h.milli)
		} else if in == 0 {
			s = 0 // unmeasured and idle
		}
		if c == first {
			fs, fin, fm = s, in, h.milli
		}
		if s < bs {
			best, bs, bin, bm = c, s, in, h.milli
		}
	}
	if bin*fm < fin*bm && bs < fs || bs*fairTie < fs {
		return best
	}
	return first
}

func (f *fair) pick(g *group, r request) int { return pickFair(f, g, &r) }

// pickFair is the pick as a plain function, which pickIn calls without going
// through the interface.
func pickFair(f *fair, g *group, r *request) int {
	n := uint64(len(g.members))
	now := r.now()
	k := g.cur.n.Add(1)
	first := -1
	if n > 1 {
		c := int(k % n)
		if m := g.members[c]; usable(r, m) && now-m.state.lastPick.Load() >= g.decay/fairProbeShare {
			return taken(m, c, now)
		}
		i, j, drawn := fairPair(f, g, r.b)
		mi, mj := g.members[i], g.members[j]
		oki, okj := drawn && usable(r, mi), drawn && usable(r, mj)
		switch {
		case oki && n <= fairScan:
			first = i
		case oki && okj:
			if fairBetter(mj, milliWeightNow(r, mj), mi, milliWeightNow(r, mi)) {
				return taken(mj, j, now)
			}
			return taken(mi, i, now)
		case oki:
			return taken(mi, i, now)
		case okj:
			return taken(mj, j, now)
		}
	}
	// A small group, or neither candidate is eligible (or n is 1): the
	// best of all.
	if best := fairBest(r, g, first); best >= 0 {
		return taken(g.members[best], best, now)
	}
	return -1
}

// fairBest returns the position of the eligible member of g with the
// lowest score (the first in order among equals), or -1 when none is
// eligible. first, when not -1, is the eligible member drawn first: it keeps
// the pick unless that member is better (see fairBetter).
func fairBest(r *request, g *group, first int) int {
	best, bw, bs := -1, int64(0), 0.0
	for c, m := range g.members {
		if usable(r, m) {
			w := milliWeightNow(r, m)
			if s := fairCost(m, w); best < 0 || s < bs {
				best, bw, bs = c, w, s
			}
		}
	}
	if first >= 0 && best != first && !fairBetter(g.members[best], bw, g.members[first], milliWeightNow(r, g.members[first])) {
		return first
	}
	return best
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

// fairBetter reports whether member c, at (slow-start) weight cw, takes the
// pick from member m, at weight mw (both in thousandths): when c has fewer
// requests in flight per unit of weight, by a lower score; otherwise by a
// score lower by more than fairTie, so that estimates' jitter does not
// override the weighted draw.
func fairBetter(c *member, cw int64, m *member, mw int64) bool {
	sc, sm := fairCost(c, cw), fairCost(m, mw)
	if c.state.inflight.Load()*int64(m.weight) < m.state.inflight.Load()*int64(c.weight) {
		return sc < sm
	}
	return sc*fairTie < sm
}

// fairScore is m's expected cost: latency estimate times (in flight +
// weight) / weight, divided by the fraction of its weight a slow start
// gives it now.
func fairScore(r *request, m *member) float64 {
	return fairCost(m, milliWeightNow(r, m))
}

// fairCost is fairScore at (slow-start) weight milli, in thousandths:
// estimate * (in flight + weight) / milli * 1000.
func fairCost(m *member, milli int64) float64 {
	e := math.Float64frombits(m.state.ewma.Load())
	in := m.state.inflight.Load()
	if e == 0 {
		if in > 0 {
			return fairInf
		}
		return 0
	}
	return e * (float64(int64(m.weight)*1000) + float64(in*1000)*math.Float64frombits(m.state.wait.Load())) / float64(milli)
}

// fairGroupMean returns the mean estimate of the measured members of m's
// group other than m and those with failures (whose penalty is not their
// latency), or 0 when there is none: the prior of m's first success (see
// observe).
func fairGroupMean(m *member) float64 {
	sum, n := 0.0, 0
	for _, o := range m.group.members {
		if e := math.Float64frombits(o.state.ewma.Load()); o != m && e != 0 && o.state.fails.Load() == 0 {
			sum += e
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// Bounds of fair's estimate (see observe).
const (
	// fairKeep is the most of the latency estimate an answer keeps: each
	// answer moves it at least 0.5% of the way to its own latency, however
	// soon it follows the previous one, so that at a high rate the estimate
	// is about the mean of the last two hundred answers, and at a low one
	// it follows DecayTime.
	fairKeep = 0.995
	// fairMaxPenalty caps the failure penalty: failures double it up to
	// 1024, so that a backend failing fast never looks fast (its score is
	// then a thousand times its latency), and yet its estimate stays finite
	// and comes back within ten successes.
	fairMaxPenalty = 1024
	// fairPrior is the weight, in answers, of the peers' estimate in a
	// backend's first success.
	fairPrior = 4
	// fairMaxWait caps the wait behind a request in flight, in latencies.
	fairMaxWait = 64
)

// observe feeds one answer into fair's estimate of a backend: lat is its
// latency (ns), now its clockNano, decay the decay time (ns), prior (when
// not 0, for a backend's first success) the estimate of its peers, which
// then counts as fairPrior answers already seen, so that the first few,
// noisy as they are, do not set the backend apart (one unlucky answer would
// otherwise keep it out of idle picks until probes undo it). The estimate
// is lat (an EWMA of latencies) times penalty (for failures), and wait:
//   - a success pulls lat (and the EWMA of squared latencies) towards its
//     latency with weight 1-w, where w = exp(-elapsed/decay) (elapsed:
//     since the previous answer), at most fairKeep, and at most 1-1/n at
//     the n-th success (the first answers count alike); it pulls the
//     penalty towards 1 with weight at least 1/2;
//   - wait is the mean residual latency of a request in flight, in units of
//     lat: 1 for exponential latencies, far more for mixed costs (95% 1 ms,
//     5% 100 ms: about 14), where a request queued behind a slow one waits;
//   - a failure doubles the penalty, up to fairMaxPenalty, and raises lat to
//     its latency if that is higher: a failure never makes a backend look
//     faster.
//
// The estimate stays finite and positive for any input (at most the largest
// latency seen times 1024), and after a long silence w is 0: the next
// success is the new latency estimate. A function, not a method: under the
// interpreter a method call costs several function calls.
func observe(s *backendState, lat int64, failed bool, now, decay int64, prior float64) {
	x := float64(lat)
	if x < 1 {
		x = 1 // a measured backend never scores as unmeasured
	}
	s.mu.Lock()
	el := now - s.stamp
	if el < 0 {
		el = 0
	}
	if s.n == 0 && prior > 0 && !failed {
		s.lat, s.sq, s.n, el = prior, 2*prior*prior, fairPrior, 0
	}
	w := fairKeep // e^(-el/decay) > fairKeep when el < decay/200 (e^-0.005 = 0.99501)
	if el >= decay/200 {
		w = math.Exp(-float64(el) / float64(decay))
		if w > fairKeep {
			w = fairKeep
		}
	}
	p := s.penalty
	if p < 1 {
		p = 1 // no failure yet
	}
	if failed {
		if x > s.lat {
			s.lat = x
		}
		p *= 2
		if p > fairMaxPenalty {
			p = fairMaxPenalty
		}
	} else {
		s.n++
		if a := 1 / float64(s.n); 1-w < a {
			w = 1 - a // the first answers count alike: lat is their mean
		}
		s.lat = s.lat*w + x*(1-w)
		s.sq = s.sq*w + x*x*(1-w)
		if w > 0.5 {
			w = 0.5
		}
		p = 1 + (p-1)*w
	}
	// A request ahead has, on average, sq/(2 lat) of its service left (lat
	// for exponential latencies, far more for mixed costs): in units of
	// lat, from 1 up to fairMaxWait.
	k := 1.0
	if s.n > 0 {
		k = s.sq / (2 * s.lat * s.lat)
		if k < 1 {
			k = 1
		} else if k > fairMaxWait {
			k = fairMaxWait
		}
	}
	if k != s.k { // mostly 1, unchanged: the store would cost the interpreter two calls
		s.k = k
		s.wait.Store(math.Float64bits(k))
	}
	s.penalty = p
	s.stamp = now
	s.ewma.Store(math.Float64bits(s.lat * p))
	s.mu.Unlock()
}
