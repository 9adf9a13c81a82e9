package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// finaglePeakEWMA models Finagle's p2c peak EWMA balancer (Linkerd's proxy
// balances on the same load metric), after finagle-core
// .../loadbalancer/PeakEwma.scala (Metric: observe, get) and
// .../loadbalancer/p2c/P2CPick.scala (pick). Two distinct nodes are drawn
// uniformly (weights are not read); a node that is marked dead loses to one
// that is not, otherwise the lower load wins (the second drawn on a tie).
// load = cost * (pending + 1), or a penalty while a node with no history has
// requests pending; cost is a peak-sensitive EWMA of round trips: a sample
// above it replaces it, one below is blended with weight exp(-elapsed/decay),
// and every read first observes a zero sample, so cost decays while a node
// goes unpicked. Decay time: Finagle's default, 10 s. Failed requests are
// timed too; Finagle's default failure accrual
// (FailureAccrualFactory: 5 consecutive failures) marks a node dead for a
// backoff starting at 5 s, after which one probe decides.
type finaglePeakEWMA struct {
	r    *rand.Rand
	now  func() time.Duration
	tau  float64
	node []finagleNode
}

type finagleNode struct {
	stamp   float64 // ns
	pending int
	cost    float64
	// failure accrual
	fails    int
	deadTill float64 // ns; dead while now < deadTill
	backoff  float64
}

const (
	finaglePenalty     = float64(math.MaxInt64 >> 16)
	finagleAccrualRun  = 5
	finagleBackoffBase = float64(5 * time.Second)
	finagleBackoffMax  = float64(300 * time.Second)
)

// FinaglePeakEWMA is the model of Finagle's p2c peak EWMA.
func FinaglePeakEWMA() Contender {
	return Contender{Name: "Finagle p2c peak EWMA", Kind: KindPeer,
		Note: "twitter/finagle finagle-core loadbalancer/PeakEwma.scala (Metric.observe, get), loadbalancer/p2c/P2CPick.scala (pick), liveness/FailureAccrualFactory",
		New: func(env Env) (Policy, error) {
			return &finaglePeakEWMA{r: env.Rand, now: env.Now, tau: float64(10 * time.Second), node: make([]finagleNode, len(env.Servers))}, nil
		}}
}

func (f *finaglePeakEWMA) observe(n *finagleNode, rtt float64) {
	t := float64(f.now())
	td := math.Max(t-n.stamp, 0)
	w := math.Exp(-td / f.tau)
	if rtt > n.cost {
		n.cost = rtt
	} else {
		n.cost = n.cost*w + rtt*(1-w)
	}
	n.stamp = t
}

func (f *finaglePeakEWMA) load(i int) float64 {
	n := &f.node[i]
	f.observe(n, 0)
	if n.cost == 0 && n.pending != 0 {
		return finaglePenalty + float64(n.pending)
	}
	return n.cost * float64(n.pending+1)
}

func (f *finaglePeakEWMA) dead(i int) bool { return float64(f.now()) < f.node[i].deadTill }

func (f *finaglePeakEWMA) Pick(string) int {
	n := len(f.node)
	if n == 1 {
		return 0
	}
	a := f.r.IntN(n)
	b := f.r.IntN(n - 1)
	if b >= a {
		b++
	}
	if da, db := f.dead(a), f.dead(b); da != db {
		if da {
			return b
		}
		return a
	}
	if f.load(a) < f.load(b) {
		return a
	}
	return b
}

func (f *finaglePeakEWMA) Start(i int) { f.node[i].pending++ }

func (f *finaglePeakEWMA) Done(i int, latency time.Duration, failed bool) {
	n := &f.node[i]
	n.pending--
	f.observe(n, float64(latency))
	if !failed {
		n.fails, n.backoff = 0, 0
		return
	}
	n.fails++
	if n.fails >= finagleAccrualRun && !f.dead(i) {
		if n.backoff == 0 {
			n.backoff = finagleBackoffBase
		} else {
			n.backoff = math.Min(2*n.backoff, finagleBackoffMax)
		}
		n.deadTill = float64(f.now()) + n.backoff
	}
}
