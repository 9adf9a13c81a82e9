package sim

import (
	"math/rand/v2"
	"time"
)

// envoyLeastRequest models Envoy's LEAST_REQUEST with its defaults
// (choice_count 2, active_request_bias 1.0), after
// source/common/upstream/load_balancer_impl.cc (LeastRequestLoadBalancer;
// since moved to source/extensions/load_balancing_policies/least_request/
// least_request_lb.cc: unweightedHostPickNChoices, hostWeight). With equal
// weights: two hosts drawn at random with replacement, the one with fewer
// active requests wins, the first drawn on a tie. With unequal weights: an
// earliest-deadline-first schedule (EdfScheduler) in which a picked host is
// re-added with weight / (active requests + 1), its active count read before
// the new request starts. No outlier detection: it is off unless configured.
type envoyLeastRequest struct {
	r        *rand.Rand
	weight   []float64
	active   []int
	weighted bool
	deadline []float64
	order    []uint64 // insertion order, the EDF's tie-break
	clock    uint64
	now      float64 // the EDF's current time
}

// EnvoyLeastRequest is the model of Envoy's LEAST_REQUEST.
func EnvoyLeastRequest() Contender {
	return Contender{Name: "Envoy LEAST_REQUEST", Kind: KindPeer,
		Note: "envoyproxy/envoy source/common/upstream/load_balancer_impl.cc: LeastRequestLoadBalancer::unweightedHostPick, hostWeight (EDF when weights differ)",
		New: func(env Env) (Policy, error) {
			w := env.Weights()
			e := &envoyLeastRequest{r: env.Rand, weight: make([]float64, len(w)), active: make([]int, len(w)),
				deadline: make([]float64, len(w)), order: make([]uint64, len(w))}
			for i := range w {
				e.weight[i] = float64(w[i])
				e.weighted = e.weighted || w[i] != w[0]
				e.add(i, e.weight[i])
			}
			return e, nil
		}}
}

func (e *envoyLeastRequest) add(i int, w float64) {
	e.deadline[i] = e.now + 1/w
	e.clock++
	e.order[i] = e.clock
}

func (e *envoyLeastRequest) Pick(string) int {
	n := len(e.active)
	if !e.weighted {
		best := -1
		for c := 0; c < 2; c++ {
			i := int(e.r.Uint64() % uint64(n))
			if best < 0 || e.active[i] < e.active[best] {
				best = i
			}
		}
		return best
	}
	best := 0
	for i := 1; i < n; i++ {
		if e.deadline[i] < e.deadline[best] || (e.deadline[i] == e.deadline[best] && e.order[i] < e.order[best]) {
			best = i
		}
	}
	e.now = e.deadline[best]
	e.add(best, e.weight[best]/float64(e.active[best]+1))
	return best
}

func (e *envoyLeastRequest) Start(i int)                         { e.active[i]++ }
func (e *envoyLeastRequest) Done(i int, _ time.Duration, _ bool) { e.active[i]-- }
