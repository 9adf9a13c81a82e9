package bench

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/lbpack/lbpack/core"
)

// The simulation: a closed loop of Clients clients, each sending its next
// request as soon as the previous one is answered (as wrk does), to backends
// that serve Workers requests at a time and queue the rest in arrival order.
// A request's latency is its queueing time plus its service time, drawn from
// the backend's distribution at the moment service starts. The balancer sees
// what a proxy sees: a request starts when it is sent and is done when it is
// answered, with its latency.

// SimBackend is one simulated backend.
type SimBackend struct {
	Weight  int
	Workers int
	// Service returns a service time; now is the simulated time, so that a
	// backend can change speed (flap) over time.
	Service func(r *rand.Rand, now time.Duration) time.Duration
}

// Scenario is one simulated situation.
type Scenario struct {
	Name     string
	Note     string
	Backends []SimBackend
	Clients  int
	Requests int
}

// exp returns an exponential service time with the given mean.
func expService(mean time.Duration) func(*rand.Rand, time.Duration) time.Duration {
	return func(r *rand.Rand, _ time.Duration) time.Duration {
		return time.Duration(r.ExpFloat64() * float64(mean))
	}
}

// Scenarios are the simulation's situations.
var Scenarios = []Scenario{
	{
		Name: "one slow backend",
		Note: "5 backends of 4 workers, exp 10 ms service; backend e is 10x slower (exp 100 ms); 16 clients.",
		Backends: []SimBackend{
			{1, 4, expService(10 * time.Millisecond)}, {1, 4, expService(10 * time.Millisecond)},
			{1, 4, expService(10 * time.Millisecond)}, {1, 4, expService(10 * time.Millisecond)},
			{1, 4, expService(100 * time.Millisecond)},
		},
		Clients: 16, Requests: 30000,
	},
	{
		Name: "one flapping backend",
		Note: "5 backends of 4 workers, exp 10 ms service; backend e alternates every second between exp 10 ms and exp 200 ms; 16 clients.",
		Backends: []SimBackend{
			{1, 4, expService(10 * time.Millisecond)}, {1, 4, expService(10 * time.Millisecond)},
			{1, 4, expService(10 * time.Millisecond)}, {1, 4, expService(10 * time.Millisecond)},
			{1, 4, func(r *rand.Rand, now time.Duration) time.Duration {
				mean := 10 * time.Millisecond
				if (now/time.Second)%2 == 1 {
					mean = 200 * time.Millisecond
				}
				return time.Duration(r.ExpFloat64() * float64(mean))
			}},
		},
		Clients: 16, Requests: 30000,
	},
	{
		Name: "heterogeneous weights",
		Note: "4 backends with 8, 4, 2, 2 workers and weights 4, 2, 1, 1 to match, exp 10 ms service; 12 clients.",
		Backends: []SimBackend{
			{4, 8, expService(10 * time.Millisecond)}, {2, 4, expService(10 * time.Millisecond)},
			{1, 2, expService(10 * time.Millisecond)}, {1, 2, expService(10 * time.Millisecond)},
		},
		Clients: 12, Requests: 30000,
	},
}

// SimPolicy is a balancer under simulation.
type SimPolicy interface {
	Pick() int
	Start(i int)
	Done(i int, latency time.Duration)
}

// SimModel is a named way to build a policy for a scenario.
type SimModel struct {
	Name string
	// Build gets the weights, a seeded random source and the simulated clock.
	Build func(weights []int, r *rand.Rand, now func() time.Duration) (SimPolicy, error)
}

// lbpackSim drives a core.Balancer on the simulated clock.
type lbpackSim struct{ b *core.Balancer }

func (p lbpackSim) Pick() int {
	i, err := p.b.Pick("")
	if err != nil {
		return -1
	}
	return i
}
func (p lbpackSim) Start(i int)                   { p.b.Start(i) }
func (p lbpackSim) Done(i int, lat time.Duration) { p.b.Done(i, lat, false) }

// simEpoch is the wall-clock time at simulated time 0.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func lbpackModel(name, strategy string) SimModel {
	return SimModel{Name: "lbpack " + name, Build: func(weights []int, r *rand.Rand, now func() time.Duration) (SimPolicy, error) {
		addrs := Addrs(len(weights))
		be := make([]core.Backend, len(weights))
		for i := range be {
			be[i] = core.Backend{Address: addrs[i], Weight: weights[i]}
		}
		b, err := core.New(core.Config{Strategy: strategy, Backends: be,
			Now: func() time.Time { return simEpoch.Add(now()) }, Rand: r.Uint64})
		if err != nil {
			return nil, err
		}
		return lbpackSim{b}, nil
	}}
}

// caddyLeastConn models Caddy 2.11.9's least_conn Select: the fewest
// requests in flight, weights ignored, ties broken uniformly at random
// (reservoir sampling over the pool).
type caddyLeastConn struct {
	inflight []int
	r        *rand.Rand
}

func (c *caddyLeastConn) Pick() int {
	best, count := -1, 0
	for i, n := range c.inflight {
		if best < 0 || n < c.inflight[best] {
			best, count = i, 1
		} else if n == c.inflight[best] {
			count++
			if c.r.IntN(count) == 0 {
				best = i
			}
		}
	}
	return best
}
func (c *caddyLeastConn) Start(i int)                 { c.inflight[i]++ }
func (c *caddyLeastConn) Done(i int, _ time.Duration) { c.inflight[i]-- }

// traefikLeastTime models Traefik v3's leasttime balancer: each server keeps
// the mean of its last 100 time-to-first-byte samples, in whole milliseconds
// (so a sub-millisecond answer counts as 0); the score is
// mean * (1 + in flight) / weight; the lowest score wins, and ties go to an
// earliest-deadline-first weighted round robin (deadline += 1/weight). A
// server whose mean is high is not picked while others score lower, so its
// mean is not refreshed: the starvation reported for it.
type traefikLeastTime struct {
	weight   []float64
	inflight []int
	samples  [][100]float64
	next     []int
	count    []int
	sum      []float64
	deadline []float64
	cur      float64
}

func newTraefikLeastTime(weights []int) *traefikLeastTime {
	n := len(weights)
	t := &traefikLeastTime{weight: make([]float64, n), inflight: make([]int, n), samples: make([][100]float64, n),
		next: make([]int, n), count: make([]int, n), sum: make([]float64, n), deadline: make([]float64, n)}
	for i, w := range weights {
		t.weight[i] = float64(w)
		t.cur += 1 / t.weight[i]
		t.deadline[i] = t.cur
	}
	return t
}

func (t *traefikLeastTime) Pick() int {
	minScore := math.MaxFloat64
	var ties []int
	for i := range t.weight {
		avg := 0.0
		if t.count[i] > 0 {
			avg = t.sum[i] / float64(t.count[i])
		}
		s := avg * (1 + float64(t.inflight[i])) / t.weight[i]
		if s < minScore {
			minScore, ties = s, append(ties[:0], i)
		} else if s == minScore {
			ties = append(ties, i)
		}
	}
	if len(ties) == 1 {
		return ties[0]
	}
	best := ties[0]
	for _, i := range ties {
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
func (t *traefikLeastTime) Done(i int, lat time.Duration) {
	t.inflight[i]--
	ms := float64(lat.Milliseconds())
	if t.count[i] < len(t.samples[i]) {
		t.count[i]++
	} else {
		t.sum[i] -= t.samples[i][t.next[i]]
	}
	t.samples[i][t.next[i]] = ms
	t.sum[i] += ms
	t.next[i] = (t.next[i] + 1) % len(t.samples[i])
}

// SimModels are the policies compared in the simulation.
func SimModels() []SimModel {
	var m []SimModel
	for _, s := range []struct{ name, strategy string }{
		{"round_robin", core.RoundRobin}, {"smooth_wrr", core.SmoothWRR},
		{"least_conn", core.LeastConn}, {"fair", core.Fair},
	} {
		if registered(s.strategy) {
			m = append(m, lbpackModel(s.name, s.strategy))
		}
	}
	m = append(m,
		SimModel{Name: "Caddy least_conn (model)", Build: func(w []int, r *rand.Rand, _ func() time.Duration) (SimPolicy, error) {
			return &caddyLeastConn{inflight: make([]int, len(w)), r: r}, nil
		}},
		SimModel{Name: "Traefik leasttime (model)", Build: func(w []int, _ *rand.Rand, _ func() time.Duration) (SimPolicy, error) {
			return newTraefikLeastTime(w), nil
		}},
	)
	return m
}

// SimResult is one model's outcome in one scenario.
type SimResult struct {
	Model     string
	Latencies []time.Duration // sorted
	Shares    []float64       // per backend
	P50, P99  time.Duration
	Mean      time.Duration
	Duration  time.Duration // simulated time taken
}

type simEvent struct {
	at      time.Duration
	backend int
	sent    time.Duration
}

type eventQueue []simEvent

func (q eventQueue) Len() int           { return len(q) }
func (q eventQueue) Less(a, b int) bool { return q[a].at < q[b].at }
func (q eventQueue) Swap(a, b int)      { q[a], q[b] = q[b], q[a] }
func (q *eventQueue) Push(x any)        { *q = append(*q, x.(simEvent)) }
func (q *eventQueue) Pop() any          { old := *q; x := old[len(old)-1]; *q = old[:len(old)-1]; return x }
func (q *eventQueue) add(e simEvent)    { heap.Push(q, e) }
func (q *eventQueue) take() simEvent    { return heap.Pop(q).(simEvent) }

// Simulate runs one model through one scenario with a fixed seed.
func Simulate(sc Scenario, m SimModel, seed uint64) (SimResult, error) {
	var now time.Duration
	weights := make([]int, len(sc.Backends))
	for i, b := range sc.Backends {
		weights[i] = b.Weight
	}
	pol, err := m.Build(weights, rand.New(rand.NewPCG(seed, 1)), func() time.Duration { return now })
	if err != nil {
		return SimResult{}, fmt.Errorf("%s: %v", m.Name, err)
	}
	service := rand.New(rand.NewPCG(seed, 2))
	busy := make([]int, len(sc.Backends))
	queue := make([][]time.Duration, len(sc.Backends)) // send times of queued requests
	picks := make([]int, len(sc.Backends))
	var events eventQueue
	sent := 0
	send := func() error {
		i := pol.Pick()
		if i < 0 || i >= len(sc.Backends) {
			return fmt.Errorf("%s: no backend at request %d", m.Name, sent)
		}
		pol.Start(i)
		picks[i]++
		sent++
		if busy[i] < sc.Backends[i].Workers {
			busy[i]++
			events.add(simEvent{at: now + sc.Backends[i].Service(service, now), backend: i, sent: now})
		} else {
			queue[i] = append(queue[i], now)
		}
		return nil
	}
	for c := 0; c < sc.Clients; c++ {
		if err := send(); err != nil {
			return SimResult{}, err
		}
	}
	lat := make([]time.Duration, 0, sc.Requests)
	for len(lat) < sc.Requests && len(events) > 0 {
		e := events.take()
		now = e.at
		i := e.backend
		l := now - e.sent
		lat = append(lat, l)
		pol.Done(i, l)
		if len(queue[i]) > 0 {
			s := queue[i][0]
			queue[i] = queue[i][1:]
			events.add(simEvent{at: now + sc.Backends[i].Service(service, now), backend: i, sent: s})
		} else {
			busy[i]--
		}
		if sent < sc.Requests {
			if err := send(); err != nil {
				return SimResult{}, err
			}
		}
	}
	res := SimResult{Model: m.Name, Latencies: lat, Duration: now, Shares: make([]float64, len(picks))}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	res.Mean = sum / time.Duration(len(lat))
	res.P50 = quantile(lat, 0.50)
	res.P99 = quantile(lat, 0.99)
	for i, p := range picks {
		res.Shares[i] = float64(p) / float64(sent)
	}
	return res, nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

// SimSeed is the fixed seed of the published figures.
const SimSeed = 1

// RunSimulation runs every model through every scenario.
func RunSimulation() ([][]SimResult, error) {
	out := make([][]SimResult, len(Scenarios))
	for s, sc := range Scenarios {
		for _, m := range SimModels() {
			r, err := Simulate(sc, m, SimSeed)
			if err != nil {
				return nil, err
			}
			out[s] = append(out[s], r)
		}
	}
	return out, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// WriteSimulation writes docs/simulation.md.
func WriteSimulation(w io.Writer, res [][]SimResult, cmd string) {
	fmt.Fprintf(w, "# Latency-aware balancing, simulated\n\nRegenerate with `%s` (fixed seed %d; deterministic).\n\n", cmd, SimSeed)
	fmt.Fprintf(w, "A discrete-event simulation: a closed loop of clients, each sending its next request as soon as the previous one is answered (as wrk does), ")
	fmt.Fprintf(w, "to backends that serve a fixed number of requests at a time and queue the rest in arrival order. ")
	fmt.Fprintf(w, "Latency is queueing plus service time. The balancer sees what a proxy sees: a request starts when sent and ends when answered, with its latency. ")
	fmt.Fprintf(w, "lbpack's strategies run unchanged (core.Balancer with the simulated clock and a seeded random source).\n\n")
	fmt.Fprintf(w, "Two models of peers, written for this comparison from their sources' behaviour:\n\n")
	fmt.Fprintf(w, "- **Caddy least_conn (model)**: Caddy 2.11.9's `least_conn` Select: the fewest requests in flight, weights ignored, ties broken uniformly at random.\n")
	fmt.Fprintf(w, "- **Traefik leasttime (model)**: Traefik v3's `leasttime`: per server the mean of its last 100 time-to-first-byte samples in whole milliseconds, ")
	fmt.Fprintf(w, "score = mean × (1 + in flight) / weight, lowest wins, ties by earliest-deadline-first weighted round robin. Here time to first byte is the whole latency. ")
	fmt.Fprintf(w, "Its means are refreshed only by the server's own answers, so a server that once looked slow can go unpicked for a long time.\n\n")
	for s, sc := range Scenarios {
		fmt.Fprintf(w, "## %s\n\n%s %d requests.\n\n", sc.Name, sc.Note, sc.Requests)
		shareHeader(w, []string{"policy", "p50 ms", "p99 ms", "mean ms", "req/s"}, len(sc.Backends))
		for _, r := range res[s] {
			name := r.Model
			if len(name) > 7 && name[:7] == "lbpack " {
				name = "**" + name + "**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %.0f |", name, ms(r.P50), ms(r.P99), ms(r.Mean), float64(len(r.Latencies))/r.Duration.Seconds())
			for _, sh := range r.Shares {
				fmt.Fprintf(w, " %.1f%% |", 100*sh)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "\n![latency CDF, %s](sim-%s.svg)\n\n", sc.Name, slug(sc.Name))
	}
}

func slug(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// shareHeader writes a Markdown table header: the columns, then one share
// column per backend (a, b, ...); every column but the first is right-aligned.
func shareHeader(w io.Writer, columns []string, backends int) {
	fmt.Fprintf(w, "| %s |", strings.Join(columns, " | "))
	for i := 0; i < backends; i++ {
		fmt.Fprintf(w, " %s share |", letter(i))
	}
	fmt.Fprintf(w, "\n|---|%s", strings.Repeat("---:|", len(columns)-1+backends))
	fmt.Fprintln(w)
}
