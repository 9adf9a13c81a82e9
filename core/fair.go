package core

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Fair names the fair strategy in Config.Strategy.
const Fair = "fair"

func init() {
	register(Fair, strategyInfo{counts: always, times: always, failStatus: "5xx", build: buildFair})
}

// DefaultDecayTime is fair's default Config.DecayTime.
const DefaultDecayTime = 10 * time.Second

// fairProbeShare: a backend not picked for DecayTime/fairProbeShare keeps
// the pick when drawn first (the probe rule), or for longer when its last
// answer put its probe off (see putOffProbe).
const fairProbeShare = 4

// fairScan is the largest group fair scores in whole: up to 8 backends
// every pick looks at them all (at that size the best of all is markedly
// better than the best of two: in lbsim's scenarios, seed 1, 10.1 against
// 11.6 ms mean latency in "slow", 6.2 against 10.3 in "mixed-cost"); above,
// the better of two.
const fairScan = 8

// fairInf is the score of a backend not yet measured with requests in
// flight: a variable, so that a pick does not call math.Inf.
var fairInf = math.Inf(1)

// fairTie is the least factor by which a score must be lower to take the
// pick from the weighted first candidate as loaded as it: scores within it
// count as equal. Each measured backend raises it to its own tie (see
// observe) by the spread of its answers (a difference within one standard
// deviation of a single answer is noise) and the uncertainty of its
// estimate, up to fairMaxTie; a comparison uses the larger of the two
// backends' ties. So backends of about equal latency share by weight
// however their estimates jitter, and one 10 times slower still loses.
const (
	fairTie    = 2
	fairMaxTie = 8
	// fairSure is how many relative standard errors of an estimate make
	// its near, and count in its tie on top of fairTie and the spread.
	fairSure = 3
	// fairUnit is the fixed point of ties and nears as stored (1/1024ths),
	// compared without a call to math.Float64frombits.
	fairUnit = 1024
)

// fairState is fair's estimate of one backend (see observe), part of the
// backend's runtime state under fair. est is what picks read, a *fairEst
// replaced whole. lat, sq (the EWMA of squared latencies), v (the sum of
// the squared weights of the answers in lat), n (successes seen), penalty
// and stamp (the clockNano of the last update) change under mu. lastPick
// is the clockNano of the last pick. batch and batchSq hold the successes
// Done has batched since the estimate's last update: their count (above
// fairCountShift) and sum of latencies in ns, and the sum of their squares
// in units of (2^fairSqShift ns)^2. folded is the clockNano of that update,
// 0 while the estimate is young (every answer then goes in at once).
type fairState struct {
	est      atomic.Value
	mu       sync.Mutex
	lat      float64
	sq       float64
	v        float64
	n        int64
	penalty  float64
	stamp    int64
	lastPick atomic.Int64
	batch    atomic.Uint64
	batchSq  atomic.Uint64
	folded   atomic.Int64
}

// newFairState returns the estimate of a backend with no answer yet.
func newFairState() *fairState {
	s := &fairState{}
	s.est.Store(unmeasured)
	return s
}

// fairEst is a backend's estimate as fair's picks read it (see observe),
// replaced whole on every update so that a pick reads it with one load: e is the
// latency estimate times the failure penalty in ns (0: unmeasured), lat the
// latency estimate alone, wait the cost of a request in flight ahead of a
// new one, in units of the latency (1 to fairMaxWait), tie and near the
// factor and the fraction by which scores must differ to count as
// different (in 1/fairUnit).
type fairEst struct {
	e, lat, wait float64
	tie, near    int64
}

// unmeasured is the estimate of a backend with no answer yet.
var unmeasured = &fairEst{}

// fold feeds an answer to member state s of group g into its estimate (see
// observe) and the new estimate to g's board, and puts off the member's
// next probe as its estimate says (see putOffProbe) after a success that
// observe did not make the probe due at once for. A failure puts nothing
// off: its time (a refused connection's, a retry's wait) is no latency of
// the backend's, and a backend that fails must be found again as soon as
// it is back.
func fold(g *group, s *fairState, lat int64, failed bool, now int64) {
	if !observe(s, lat, failed, now, g.decay) && !failed {
		putOffProbe(g, s, lat, now)
	}
	if g.board != nil {
		refreshBoard(g)
	}
}

// putOffProbe sets the next probe (see fair) of the member of g whose
// state is s, answered lat ns ago at now, by how much slower it is than
// the fastest: when its latency estimate per unit of weight is r times the
// lowest estimate (failure penalty included) of the group's measured
// members and r is above fairTie, the probe rule next gives it the pick
// DecayTime/4 * r/fairTie after this answer, at most DecayTime after it.
// So probes cost the backends' clients about as much latency a second
// whatever the backend's slowness (each costs about r times the best
// latency), the estimate of a backend that gets nothing but probes is at
// most DecayTime old, and one barely slower than the best, which the best's
// load hands picks anyway, is probed as before. Its own failure penalty
// does not count: a probe of a backend that fails fast costs no latency,
// and one back from failures (restarted) must be found as soon as before,
// its penalty relaxed by the successes of its probes. A member picked since
// this request was sent, or an answer of -1 (a full batch: the member is
// busy), needs nothing put off.
func putOffProbe(g *group, s *fairState, lat, now int64) {
	if lat < 0 || s.lastPick.Load() > now-lat {
		return
	}
	var w int
	best := fairInf
	for _, m := range g.members {
		f := m.state.fair
		if f == s {
			w = m.weight
		}
		if e := f.est.Load().(*fairEst).e; e != 0 && e/float64(m.weight) < best {
			best = e / float64(m.weight)
		}
	}
	if w == 0 || best == fairInf {
		return
	}
	r := s.est.Load().(*fairEst).lat / float64(w) / best
	if r <= fairTie {
		return
	}
	gap := float64(g.probe) * r / fairTie
	if gap > float64(g.decay) {
		gap = float64(g.decay)
	}
	if at := now + int64(gap) - g.probe; at > s.lastPick.Load() {
		s.lastPick.Store(at) // a pick time to come: due at now + gap
	}
}

// fair is latency-aware balancing. Each backend has an estimate of its
// latency (see observe): an EWMA of its answers' latencies times a failure
// penalty, and of how long a request in flight holds the next one up. A
// backend's score is its expected latency for one more request:
// estimate * (weight + in flight * wait) / weight, weight standing for its
// capacity (divided further by the ramp's fraction of it during a slow
// start). A pick draws a first candidate at random in proportion to weight
// and compares it with the best-scoring backend, and with the best of those
// with fewer requests in flight per unit of weight (in a group of up to
// fairScan members; with a second weighted draw beyond). Scores count as
// equal within their noise (see fairBetter): a challenger as loaded as the
// first must score lower by the larger of the two backends' ties (fairTie,
// 2, plus the spread of its answers and the uncertainty of its estimate, up
// to fairMaxTie, 8); a less loaded one takes the pick unless it scores
// higher by more than the smaller near (the uncertainty alone), a more
// loaded one only when it scores lower by more than that. So backends of
// equal latency up to real noise (sub-millisecond answers jittering by more
// than 2x, a first answer that paid a dial, GC pauses) share by weight, idle
// or loaded, and one 10 times slower, or busier, gets less. A backend not
// yet measured scores 0 while it has nothing in flight (so it is tried at
// once) and +Inf while its first requests are out (so a new backend is not
// flooded before its first answer); until it has fairFew answers' worth the
// probe is due at once (see observe): drawn first, it keeps the pick.
//
// The latency estimate is a plain EWMA, not the peak EWMA of Finagle and
// Linkerd (where an answer above the estimate replaces it): with the peak,
// each estimate is the largest recent answer, and its noise cost mean
// latency in lbsim's scenarios (seed 1: slow 10.8 against 10.1 ms,
// flapping 10.7 against 10.3, mixed-cost 7.5 against 6.2); requests in
// flight show a slowdown at once instead.
//
// No eligible backend is starved, and none is fed by count: the probe rule
// gives the pick to the first candidate, whatever the scores, if it has not
// been picked for DecayTime/4 (2.5 s by default), or, when its last answer
// left it more than fairTie times slower than the fastest (per unit of
// weight), for DecayTime/4 times that ratio over fairTie after that answer,
// at most DecayTime (see putOffProbe). So every eligible backend gets a
// request at least every DecayTime plus the picks it takes to draw it (W/w
// on average, W the sum of the weights), its estimate never gets much
// older than that, and a backend much slower than the others gets those
// probes and little else, fewer the slower it is (a probe every DecayTime/4
// whatever its slowness sent such a backend more requests than nginx's
// least_time does: see docs/e2e.md). The probe goes by
// weight, as the draw does: after a silence, when every backend is due, or
// at a rate so low that one is due whenever drawn, the picks still follow
// the weights (a probe rule looking at backend k mod n at pick k took them
// round in turn there, whatever the weights).
//
// The candidates are drawn from the group's weight table (see weightedLook)
// when it has one, from an alias table otherwise.
//
// Picks take no lock; with an injected Config.Now and Config.Rand they are
// deterministic.
type fair struct {
	pairs pairDraw
}

func buildFair(g *group, c *Config) (strategy, error) {
	d := c.DecayTime
	if d == 0 {
		d = DefaultDecayTime
	}
	g.decay = int64(d)
	g.picks = make([]*atomic.Int64, len(g.members))
	for i, m := range g.members {
		g.picks[i] = &m.state.fair.lastPick
	}
	g.fold = g.decay / fairFoldShare
	g.probe = g.decay / fairProbeShare
	g.fairAll = len(g.members) <= fairScan
	if g.fairAll {
		g.board = &fairBoard{}
		refreshBoard(g)
	}
	if up := upPositions(g); g.allUp && len(up) > 1 {
		g.setTable(tableFair, weightedLook(g, up))
	}
	f := &fair{}
	if g.look == nil {
		f.pairs = newPairDraw(g) // fairPair draws from look when there is one
	}
	return f, nil
}

func (f *fair) pick(g *group, req request) int {
	r := &req
	n := uint64(len(g.members))
	now := r.now()
	first := -1
	if n > 1 {
		x := r.b.rand()
		i, j, drawn := fairPair(f, g, r.b, x)
		mi := g.members[i]
		oki := drawn && usable(r, mi)
		if oki && now-mi.state.fair.lastPick.Load() >= g.probe {
			return taken(mi, i, now) // the probe
		}
		if oki && n <= fairScan {
			first = i
		} else {
			if drawn && g.look != nil {
				j = r.b.members[lookSecond(r.b, g.look, x, mi.index)].pos // the second draw, as pickFairSteady's
			}
			mj := g.members[j]
			okj := drawn && usable(r, mj)
			switch {
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
// the pick unless the best takes it (see fairBetter), or else the best of
// those with fewer requests in flight per unit of weight does. Looking past
// the best for a less loaded one keeps noise in the scores (in the wait
// behind requests in flight, above all) from handing a backend's freed slot
// to a busier one.
func fairBest(r *request, g *group, first int) int {
	best, bs := -1, 0.0
	lb, ls := -1, math.Inf(1)
	var fin, fw int64 // first's in flight and weight
	if first >= 0 {
		// Two statements: a tuple assignment here leaves fw 0 under
		// Traefik's plugin loader (see interp.go).
		fin = g.members[first].state.inflight.Load()
		fw = int64(g.members[first].weight)
	}
	for c, m := range g.members {
		if usable(r, m) {
			s := fairCost(m, milliWeightNow(r, m))
			if best < 0 || s < bs {
				best, bs = c, s
			}
			if s < ls && m.state.inflight.Load()*fw < fin*int64(m.weight) {
				lb, ls = c, s
			}
		}
	}
	if first < 0 {
		return best
	}
	f := g.members[first]
	fmw := milliWeightNow(r, f)
	if best != first && best != lb {
		if c := g.members[best]; fairBetter(c, milliWeightNow(r, c), f, fmw) {
			return best
		}
	}
	if lb >= 0 {
		if c := g.members[lb]; fairBetter(c, milliWeightNow(r, c), f, fmw) {
			return lb
		}
	}
	return first
}

// fairPair draws fair's two candidates (member positions) from the
// random value x: from the group's weight table when it has one, as
// pickFairSteady does, so that both make the same choices (the second
// may then repeat the first: lookSecond draws it again, where it is
// needed); from the alias table otherwise.
func fairPair(f *fair, g *group, b *Balancer, x uint64) (i, j int, ok bool) {
	if g.look == nil {
		return drawPair(&f.pairs, x, len(g.members))
	}
	n := uint64(len(g.look))
	return b.members[g.look[(x&0xffffffff)%n]].pos, b.members[g.look[(x>>32)%n]].pos, true
}

// lookSecond is the second of two draws from look by the random value x
// whose first drew backend i: drawn again while it repeats i (see redraw).
func lookSecond(b *Balancer, look []int32, x uint64, i int) int {
	j := look[(x>>32)%uint64(len(look))]
	if int(j) == i {
		j = redraw(b, look, j)
	}
	return int(j)
}

// taken records that member m (at position pos) was picked at now.
func taken(m *member, pos int, now int64) int {
	m.state.fair.lastPick.Store(now)
	return pos
}

// fairBetter reports whether member c, at (slow-start) weight cw, takes the
// pick from member m, at weight mw (both in thousandths). Scores count as
// equal within noise: when c has fewer requests in flight per unit of
// weight, its score may be higher by the smaller of the two backends' nears
// (see observe: smaller, so that a backend whose estimate is uncertain, as
// one probed now and then, most often a slow one, is not favoured by it);
// when it has more, it must be lower by that fraction; when both are as
// loaded, it must be lower by the larger of their ties (a measured
// backend's is at least fairTie), so that latencies equal up to their noise
// leave the pick to the weighted draw. No helper calls: see interp.go.
func fairBetter(c *member, cw int64, m *member, mw int64) bool {
	sc, sm := fairCost(c, cw), fairCost(m, mw)
	lc := c.state.inflight.Load() * int64(m.weight)
	lm := m.state.inflight.Load() * int64(c.weight)
	// Half the cases need no tolerance (and no more loads).
	if sc < sm {
		if lc < lm {
			return true
		}
	} else if lc >= lm {
		return false
	}
	ce, me := c.state.fair.est.Load().(*fairEst), m.state.fair.est.Load().(*fairEst)
	if lc == lm {
		t := ce.tie
		if me.tie > t {
			t = me.tie
		}
		return sc*float64(t) < sm*fairUnit
	}
	t := ce.near
	if me.near < t {
		t = me.near
	}
	if lc < lm {
		return sc*fairUnit < sm*float64(fairUnit+t)
	}
	return sc*float64(fairUnit+t) < sm*fairUnit
}

// fairCost is m's score, its expected latency for one more request, at
// (slow-start) weight milli, in thousandths: estimate * (weight + in flight
// * wait) / weight, divided by the fraction of its weight milli is. An
// unmeasured member scores 0 while idle and +Inf while its first requests
// are out.
func fairCost(m *member, milli int64) float64 {
	x := m.state.fair.est.Load().(*fairEst)
	in := m.state.inflight.Load()
	if x.e == 0 {
		if in > 0 {
			return fairInf
		}
		return 0
	}
	return x.e * (float64(int64(m.weight)*1000) + float64(in*1000)*x.wait) / float64(milli)
}

// fair's batches of answers (see Report).
const (
	// fairFoldShare: answers within DecayTime/fairFoldShare (9.8 ms by
	// default) of the estimate's last update are batched.
	fairFoldShare = 1024
	// fairBatchCount answers fill a batch; fairBatchMax is the longest
	// answer (ns) a batch takes: so the sums never overflow.
	fairBatchCount = 128
	fairBatchMax   = 1 << 32
	fairCountShift = 48
	fairSumMask    = 1<<fairCountShift - 1
	fairSqShift    = 4
)

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
	// fairMaxWait caps the wait behind a request in flight, in latencies.
	fairMaxWait = 64
	// fairFew: a backend whose estimate rests on fewer than fairFew
	// answers' worth (v > 1/fairFew: its first answers, or the first after
	// a silence of about DecayTime) is due for the probe at once after an
	// answer that does not confirm its estimate, so that an estimate from
	// one unlucky answer is not kept for DecayTime/4 or longer.
	fairFew = 4
	// fairProbedV is v for a backend that answers one probe every
	// DecayTime/4 and nothing else ((1-w)^2/(1-w^2) for w = e^(-1/4)): once
	// a backend has answered more than fairFew times, its tie counts no more
	// uncertainty than that, so that a backend whose probes are put off
	// because it is slower (see putOffProbe), and whose estimate then rests
	// on fewer answers' worth, does not win by a wider tie the picks it is
	// drawn first for.
	fairProbedV = 0.1244
)

// observe feeds one answer into fair's estimate of a backend, after the
// answers batched since its last update (see Report), which count as that
// many answers of their mean latency (and mean square) arriving one after
// the other within the fold time of that update (when they came): lat
// is the answer's latency (ns; -1 for none: the batch alone), now its
// clockNano, decay the decay time (ns). The estimate is lat (an EWMA of
// latencies) times penalty (for failures), wait, and tie:
//   - a success pulls lat (and the EWMA of squared latencies) towards its
//     latency with weight 1-w, where w = exp(-elapsed/decay) (elapsed:
//     since the previous answer), at most fairKeep, at most 1-1/n at the
//     n-th success (the first answers count alike), and at most 1/(1+v)
//     (v below: each answer counts at least as one more of the 1/v
//     answers' worth lat rests on, so the first answers after a silence
//     count alike too, and the estimate is young for about as few of them
//     as a new backend's, not for the many that fairKeep alone would take
//     to bring v down); it pulls the penalty towards 1 with weight at least
//     1/2;
//   - wait is the mean residual latency of a request in flight, in units of
//     lat: 1 for exponential latencies, far more for mixed costs (95% 1 ms,
//     5% 100 ms: about 14), where a request queued behind a slow one waits;
//   - tie is how much lower another backend's score must be to take a pick
//     from this one, or this one's from another (see fairBetter): fairTie,
//     plus the answers' coefficient of variation (their spread: latencies
//     nearer than one standard deviation of a single answer are noise),
//     plus fairSure relative standard errors of lat (the sum of the squared
//     weights of the answers in it, v, is 1/n after n answers, 1/200 at
//     a high rate; noise at least exponential's), up to fairMaxTie. So a
//     first answer that paid a dial, a GC pause, a few outliers in a
//     sub-millisecond backend do not set it apart (a relative tie alone,
//     and the peers' mean as a first answer's prior, let one unlucky
//     estimate keep a backend out), while one 10 times slower loses even
//     on its first answer;
//   - while v is above 1/fairFew, each success that does not confirm the
//     estimate before it (a first answer, or one further from it than its
//     tie) makes the probe rule due for the backend (its lastPick is set
//     back; observe then returns true), and each answer goes in at once (no
//     batch), so its first answers, or its first after a silence, come one
//     after the other until they agree, and the estimate an unlucky answer
//     left does not stand for DecayTime/4; an answer that confirms it (a
//     slow backend's, slow again after a silence) leaves the probe rule as
//     it was;
//   - a failure doubles the penalty, up to fairMaxPenalty, and raises lat to
//     its latency if that is higher: a failure never makes a backend look
//     faster.
//
// The estimate stays finite and positive for any input (at most the largest
// latency seen times 1024), and after a long silence w is 0: the next
// success is the new latency estimate. A function, not a method, as the
// pick path's helpers are.
func observe(s *fairState, lat int64, failed bool, now, decay int64) bool {
	x := float64(lat)
	if x < 1 {
		x = 1 // a measured backend never scores as unmeasured
	}
	s.mu.Lock()
	bs, bq := s.batch.Swap(0), s.batchSq.Swap(0)
	el := now - s.stamp
	if el < 0 {
		el = 0
	}
	p := s.penalty
	if p < 1 {
		p = 1 // no failure yet
	}
	if c := int64(bs >> fairCountShift); c > 0 {
		// The batch's answers came within the fold time of the last
		// update (Report batches none later): they count as arriving
		// then, one after the other, each of the batch's mean latency and
		// mean square; the time since is this answer's.
		eb := decay / fairFoldShare
		if el < eb {
			eb = el
		}
		el -= eb
		mx, mq := float64(bs&fairSumMask)/float64(c), float64(bq)*(1<<(2*fairSqShift))/float64(c)
		p = fairSuccesses(s, c, mx, mq, fairDecayWeight(eb, decay), p)
	}
	// Whether this answer confirms the estimate before it: within its
	// tie, as scores count as equal.
	known := false
	if s.n > 0 && !failed && lat >= 0 {
		t := float64(s.est.Load().(*fairEst).tie) / fairUnit
		known = x*t >= s.lat && x <= s.lat*t
	}
	if !failed && lat >= 0 {
		p = fairSuccesses(s, 1, x, x*x, fairDecayWeight(el, decay), p)
	}
	if failed {
		if x > s.lat {
			s.lat = x
		}
		p *= 2
		if p > fairMaxPenalty {
			p = fairMaxPenalty
		}
	}
	// A request ahead has, on average, sq/(2 lat) of its service left (lat
	// for exponential latencies, far more for mixed costs): in units of
	// lat, from 1 up to fairMaxWait.
	k, t, q := 1.0, float64(fairTie), 0.0
	if s.n > 0 {
		r := s.sq/(s.lat*s.lat) - 1 // the answers' squared coefficient of variation
		if r < 0 {
			r = 0
		}
		k = (r + 1) / 2
		if k < 1 {
			k = 1
		} else if k > fairMaxWait {
			k = fairMaxWait
		}
		e := r
		if e < 1 {
			e = 1
		}
		v := s.v
		if s.n > fairFew && v > fairProbedV {
			v = fairProbedV
		}
		q = fairSure * math.Sqrt(e*v)
		t += math.Sqrt(r) + q
		if t > fairMaxTie {
			t = fairMaxTie
		}
	}
	young := s.v*fairFew > 1
	due := young && !failed && !known
	if due {
		s.lastPick.Store(now - decay/fairProbeShare) // the probe is due
	}
	if young {
		s.folded.Store(0) // the next answer goes in at once
	} else {
		s.folded.Store(now)
	}
	s.penalty = p
	s.stamp = now
	s.est.Store(&fairEst{e: s.lat * p, lat: s.lat, wait: k, tie: int64(t*fairUnit + 0.5), near: int64(q*fairUnit + 0.5)})
	s.mu.Unlock()
	return due
}

// fairDecayWeight is the share of the estimate an answer el ns after the
// previous one leaves as it was: e^(-el/decay), at most fairKeep.
func fairDecayWeight(el, decay int64) float64 {
	if el < decay/200 {
		return fairKeep // e^(-el/decay) > fairKeep when el < decay/200 (e^-0.005 = 0.99501)
	}
	w := math.Exp(-float64(el) / float64(decay))
	if w > fairKeep {
		w = fairKeep
	}
	return w
}

// fairSuccesses feeds c successes of latency x (ns) and square xx into s's
// estimate, one after the other, the first with decay weight w and the
// others as arriving at once (see observe), and returns the penalty p as
// they relax it. Called with s.mu held.
func fairSuccesses(s *fairState, c int64, x, xx, w, p float64) float64 {
	if x < 1 {
		x, xx = 1, 1 // a measured backend never scores as unmeasured
	}
	for ; c > 0; c-- {
		s.n++
		a := 1 / float64(s.n) // the first answers count alike: lat is their mean
		if u := s.v / (1 + s.v); u > a {
			a = u // so do the first after a silence (see observe)
		}
		if 1-w < a {
			w = 1 - a
		}
		s.lat = s.lat*w + x*(1-w)
		s.sq = s.sq*w + xx*(1-w)
		s.v = s.v*w*w + (1-w)*(1-w)
		if w > 0.5 {
			w = 0.5
		}
		p = 1 + (p-1)*w
		w = fairKeep
	}
	return p
}
