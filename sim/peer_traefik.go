package sim

import (
	"math"
	"time"
)

// traefikLeastTime models Traefik v3.7's leasttime balancer, after
// pkg/server/service/loadbalancer/leasttime/leasttime.go (nextServer,
// selectWRR, updateResponseTime). Each server keeps the mean of its last 100
// time-to-first-byte samples in whole milliseconds (elapsed.Milliseconds(),
// so an answer under 1 ms counts as 0); its score is
// mean * (1 + in flight) / weight; the lowest score wins, and ties go to an
// earliest-deadline-first weighted round robin (deadline += 1/weight). With
// one server there is no choice. Error answers are timed like any other:
// leasttime does not know about status codes. A server whose mean is high is
// not picked while the others score lower, so nothing refreshes its mean.
type traefikLeastTime struct {
	weight   []float64
	inflight []int
	samples  [][100]float64
	next     []int
	count    []int
	sum      []float64
	deadline []float64
	cur      float64
	ties     []int
}

// TraefikLeastTime is the model of Traefik's leasttime.
func TraefikLeastTime() Contender {
	return Contender{Name: "Traefik leasttime", Kind: KindPeer,
		Note: "traefik/traefik pkg/server/service/loadbalancer/leasttime/leasttime.go: nextServer, selectWRR, updateResponseTime",
		New:  func(env Env) (Policy, error) { return newTraefikLeastTime(env.Weights()), nil }}
}

func newTraefikLeastTime(weights []int) *traefikLeastTime {
	n := len(weights)
	t := &traefikLeastTime{weight: make([]float64, n), inflight: make([]int, n), samples: make([][100]float64, n),
		next: make([]int, n), count: make([]int, n), sum: make([]float64, n), deadline: make([]float64, n)}
	// Add: each server's deadline is the last one's plus 1/weight.
	for i, w := range weights {
		t.weight[i] = float64(w)
		t.cur += 1 / t.weight[i]
		t.deadline[i] = t.cur
	}
	return t
}

func (t *traefikLeastTime) Pick(string) int {
	if len(t.weight) == 1 {
		return 0
	}
	minScore := math.MaxFloat64
	t.ties = t.ties[:0]
	for i := range t.weight {
		avg := 0.0
		if t.count[i] > 0 {
			avg = t.sum[i] / float64(t.count[i])
		}
		s := avg * (1 + float64(t.inflight[i])) / t.weight[i]
		if s < minScore {
			minScore, t.ties = s, append(t.ties[:0], i)
		} else if s == minScore {
			t.ties = append(t.ties, i)
		}
	}
	if len(t.ties) == 1 {
		return t.ties[0]
	}
	best := t.ties[0]
	for _, i := range t.ties {
		if t.deadline[i] < t.deadline[best] {
			best = i
		}
	}
	t.deadline[best] += 1 / t.weight[best]
	if t.deadline[best] > t.cur {
		t.cur = t.deadline[best]
	}
	return best
}

func (t *traefikLeastTime) Start(i int) { t.inflight[i]++ }

func (t *traefikLeastTime) Done(i int, latency time.Duration, _ bool) {
	t.inflight[i]--
	ms := float64(latency.Milliseconds())
	if t.count[i] < len(t.samples[i]) {
		t.count[i]++
	} else {
		t.sum[i] -= t.samples[i][t.next[i]]
	}
	t.samples[i][t.next[i]] = ms
	t.sum[i] += ms
	t.next[i] = (t.next[i] + 1) % len(t.samples[i])
}
