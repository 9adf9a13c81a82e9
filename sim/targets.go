package sim

import (
	"fmt"
	"time"

	"github.com/lbpack/lbpack/core"
)

// FairName is the name of lbpack fair's row, whose targets Targets checks.
const FairName = "lbpack fair"

// Check is one of fair's targets in one scenario.
type Check struct {
	Target string // what is wanted, e.g. "p99 <= 1.05 x best peer"
	OK     bool
	Got    string // the figures compared
}

// Targets checks lbpack fair's row of res (one scenario's results) against
// the targets: p99 and mean within 5% of the best peer's (or
// better), throughput at least 98% of the best peer's, and the scenario's
// own goals. The best peer, for each figure, is the best of the peers that
// answer at most 5% of requests with errors (MaxPeerErrors): a peer that
// sends most requests to a failing backend has few, fast successes, and
// with closed-loop clients its fast errors even speed them up, but it is no
// model to match. (If no peer qualifies, every peer counts.) Targets
// returns nil if res has no fair row or no peer row.
func Targets(sc Scenario, res []Result) []Check {
	var fair *Result
	var bestP99, bestMean, bestTput *Result
	clean := false
	for _, r := range res {
		clean = clean || r.Kind == KindPeer && r.Requests > 0 && ErrorRate(r) <= MaxPeerErrors
	}
	for k := range res {
		r := &res[k]
		if r.Policy == FairName {
			fair = r
		}
		if r.Kind != KindPeer || r.Requests == 0 || clean && ErrorRate(*r) > MaxPeerErrors {
			continue
		}
		if bestP99 == nil || r.P99 < bestP99.P99 {
			bestP99 = r
		}
		if bestMean == nil || r.Mean < bestMean.Mean {
			bestMean = r
		}
		if bestTput == nil || r.Throughput > bestTput.Throughput {
			bestTput = r
		}
	}
	if fair == nil || bestP99 == nil {
		return nil
	}
	out := []Check{
		{"p99 <= 1.05 x best peer", float64(fair.P99) <= 1.05*float64(bestP99.P99),
			fmt.Sprintf("%s vs %s (%s)", msStr(fair.P99), msStr(bestP99.P99), bestP99.Policy)},
		{"mean <= 1.05 x best peer", float64(fair.Mean) <= 1.05*float64(bestMean.Mean),
			fmt.Sprintf("%s vs %s (%s)", msStr(fair.Mean), msStr(bestMean.Mean), bestMean.Policy)},
		{"throughput >= 0.98 x best peer", fair.Throughput >= 0.98*bestTput.Throughput,
			fmt.Sprintf("%.0f/s vs %.0f/s (%s)", fair.Throughput, bestTput.Throughput, bestTput.Policy)},
	}
	shares := WeightShares(sc)
	for _, g := range sc.Goals {
		switch g {
		case GoalShareFloor:
			low, at := 1.0, 0
			for i, b := range fair.Backends {
				if r := b.Share / shares[i]; r < low {
					low, at = r, i
				}
			}
			out = append(out, Check{"every backend >= 0.5 x its share", low >= 0.5,
				fmt.Sprintf("lowest %s: %.1f%% of %.1f%%", Letter(at), 100*fair.Backends[at].Share, 100*shares[at])})
		case GoalRecovery:
			decay := sc.Config.DecayTime
			if decay == 0 {
				decay = core.DefaultDecayTime
			}
			d, ok := Recovered(sc, *fair)
			got := "never"
			if ok {
				got = fmt.Sprintf("%v after recovering", d)
			}
			out = append(out, Check{fmt.Sprintf("%s back to 90%% of its share within %v", Letter(sc.Focus), 2*decay),
				ok && d <= 2*decay, got})
		case GoalFailing:
			s := fair.Backends[sc.Focus].Share
			out = append(out, Check{fmt.Sprintf("%s (failing) <= 5%% of requests", Letter(sc.Focus)), s <= 0.05,
				fmt.Sprintf("%.2f%%", 100*s)})
		case GoalWeights:
			worst, at := 0.0, 0
			for i, b := range fair.Backends {
				dev := b.Share/shares[i] - 1
				if dev < 0 {
					dev = -dev
				}
				if dev > worst {
					worst, at = dev, i
				}
			}
			out = append(out, Check{"shares within 5% of the weights", worst <= 0.05,
				fmt.Sprintf("worst %s: %.1f%% for %.1f%%", Letter(at), 100*fair.Backends[at].Share, 100*shares[at])})
		}
	}
	return out
}

// MaxPeerErrors is the largest error rate of a peer that Targets compares
// fair with.
const MaxPeerErrors = 0.05

// ErrorRate is the fraction of r's answers that were errors.
func ErrorRate(r Result) float64 {
	if n := r.Requests + r.Errors; n > 0 {
		return float64(r.Errors) / float64(n)
	}
	return 0
}

// WeightShares is each server's weight over the total.
func WeightShares(sc Scenario) []float64 {
	total := 0
	w := make([]int, len(sc.Servers))
	for i, s := range sc.Servers {
		w[i] = s.Backend.Weight
		if w[i] < 1 {
			w[i] = 1
		}
		total += w[i]
	}
	out := make([]float64, len(w))
	for i := range w {
		out[i] = float64(w[i]) / float64(total)
	}
	return out
}

// Recovered is Recovery for a GoalRecovery scenario: how long after
// sc.Change backend sc.Focus got 90% of its weighted share in one window.
func Recovered(sc Scenario, res Result) (time.Duration, bool) {
	return Recovery(res, sc.Focus, sc.Change, 0.9*WeightShares(sc)[sc.Focus])
}

// HasGoal reports whether sc has goal g.
func (sc Scenario) HasGoal(g Goal) bool {
	for _, x := range sc.Goals {
		if x == g {
			return true
		}
	}
	return false
}

// Recovery is how long after change backend i's share of the requests sent
// in one of res's timeline windows first reached share: the start of the
// first window, at or after change, in which it did. ok is false if it
// never did.
func Recovery(res Result, i int, change time.Duration, share float64) (d time.Duration, ok bool) {
	if res.Window <= 0 {
		return 0, false
	}
	first := int((change + res.Window - 1) / res.Window)
	for w := first; w < len(res.Timeline); w++ {
		total := 0
		for _, n := range res.Timeline[w] {
			total += n
		}
		if total > 0 && float64(res.Timeline[w][i])/float64(total) >= share {
			return time.Duration(w)*res.Window - change, true
		}
	}
	return 0, false
}

// Letter names backend i as the tables do: a, b, c...
func Letter(i int) string {
	if i < 26 {
		return string(rune('a' + i))
	}
	return fmt.Sprintf("b%d", i)
}

// msStr shows a latency in milliseconds with one decimal.
func msStr(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
