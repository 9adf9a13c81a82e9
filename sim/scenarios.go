package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/lbpack/lbpack/core"
)

// servers returns n servers named a, b, c... (10.0.0.1:80 and on) of weight
// 1 with the given workers and service time.
func servers(n, workers int, service Dist) []Server {
	s := make([]Server, n)
	for i := range s {
		s[i] = Server{Backend: core.Backend{Address: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: 1}, Workers: workers, Service: service}
	}
	return s
}

// flap is a slowdown of factor during every other period, starting with
// the second.
func flap(period time.Duration, factor float64) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		if (t/period)%2 == 1 {
			return factor
		}
		return 1
	}
}

// slowWindow is a slowdown of factor from from until to, none outside.
func slowWindow(from, to time.Duration, factor float64) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		if t >= from && t < to {
			return factor
		}
		return 1
	}
}

const ms = time.Millisecond

// Scenarios are the named presets: `lbsim simulate --scenario NAME` runs
// one, docs/simulation.md shows them all. Every call returns fresh values.
func Scenarios() []Scenario {
	slow := func() []Server {
		s := servers(5, 4, expDist(10*ms))
		s[4].Service = expDist(100 * ms)
		return s
	}
	var out []Scenario

	out = append(out, Scenario{Name: "slow", Title: "One backend 10x slower",
		Note:    "5 backends of 4 workers, exponential service of mean 10 ms; backend e's mean is 100 ms. 16 clients in a closed loop, 40,000 requests.",
		Servers: slow(), Clients: 16, Requests: 40000})

	fl := servers(5, 4, expDist(10*ms))
	fl[4].Slowdown = flap(time.Second, 20)
	out = append(out, Scenario{Name: "flapping", Title: "One backend flapping between fast and 20x slower every second",
		Note:    "5 backends of 4 workers, exponential service of mean 10 ms; backend e's service is 20x slower during every other second. 16 clients, 30 s.",
		Servers: fl, Clients: 16, Duration: 30 * time.Second})

	wc := servers(5, 0, expDist(10*ms))
	for i, k := range []int{4, 2, 2, 1, 1} {
		wc[i].Workers, wc[i].Backend.Weight = 2*k, k
	}
	out = append(out, Scenario{Name: "capacity", Title: "Unequal capacity, weights to match",
		Note:    "5 backends with 8, 4, 4, 2, 2 workers and weights 4, 2, 2, 1, 1; exponential service of mean 10 ms. 16 clients, 40,000 requests.",
		Servers: wc, Clients: 16, Requests: 40000})

	out = append(out, Scenario{Name: "mixed-cost", Title: "Identical backends, mixed request costs",
		Note: "5 identical backends that serve one request at a time; 95% of requests take 1 ms, 5% take 100 ms (exponential, means 1 ms and 100 ms), so a cheap request queued behind an expensive one waits. " +
			"The situation in which Traefik's leasttime was reported to starve a server (5 of 1,500 requests). 4 clients, 20,000 requests. " +
			"Target: no backend below half its fair share.",
		Servers: servers(5, 1, expDist(1*ms)), Classes: []Class{{Share: 0.95, Cost: 1}, {Share: 0.05, Cost: 100}},
		Clients: 4, Requests: 20000, Goals: []Goal{GoalShareFloor}})

	rec := servers(5, 4, expDist(10*ms))
	rec[4].Slowdown = slowWindow(0, 20*time.Second, 10)
	out = append(out, Scenario{Name: "recovery", Title: "A backend slow for 20 s, then fast",
		Note: "5 backends of 4 workers, exponential service of mean 10 ms; backend e is 10x slower for the first 20 s, then as fast as the others. " +
			"16 clients, 60 s. Target: e back to 90% of its share (18% of requests per second) within 2 x decay_time of recovering.",
		Servers: rec, Clients: 16, Duration: 60 * time.Second, Goals: []Goal{GoalRecovery}, Focus: 4, Change: 20 * time.Second})

	ff := servers(5, 4, expDist(10*ms))
	ff[4].FailRate, ff[4].FailTime = 1, constDist(1*ms)
	out = append(out, Scenario{Name: "failing", Title: "A backend that fails fast",
		Note: "5 backends of 4 workers, exponential service of mean 10 ms; backend e answers every request with a 5xx in 1 ms. " +
			"16 clients, 40,000 requests. Latency figures are of successful answers; throughput counts successes only. " +
			"lbpack is told of each error (Done with failed), as a plugin that counts 5xx answers as failures does; each peer sees what it sees by default. " +
			"Target: e gets at most 5% of requests.",
		Servers: ff, Clients: 16, Requests: 40000, Goals: []Goal{GoalFailing}, Focus: 4})

	out = append(out, Scenario{Name: "open-loop", Title: "Open-loop load at 90% of capacity",
		Note:    "5 backends of 4 workers, exponential service of mean 10 ms (capacity 2,000 requests/s); Poisson arrivals at 1,800 requests/s for 30 s.",
		Servers: servers(5, 4, expDist(10*ms)), Rate: 1800, Duration: 30 * time.Second})

	out = append(out, Scenario{Name: "fleet", Title: "Eight independent balancers, one slow backend",
		Note: "The backends of \"slow\" (one 10x slower) behind 8 balancers that each see only their own requests; " +
			"32 clients, 4 per balancer, 40,000 requests.",
		Servers: slow(), Clients: 32, Requests: 40000, Balancers: 8})

	weighted := func() []Server {
		s := servers(3, 0, expDist(5*ms))
		for i, w := range []int{5, 3, 2} {
			s[i].Backend.Weight = w
		}
		return s
	}
	out = append(out, Scenario{Name: "weights", Title: "Equal latencies, weights 5, 3, 2",
		Note: "3 backends of weights 5, 3, 2 that never queue (their latency does not depend on load), exponential service of mean 5 ms. " +
			"10 clients, 30,000 requests. Target: shares within 5% of 50/30/20.",
		Servers: weighted(), Clients: 10, Requests: 30000, Goals: []Goal{GoalWeights}})
	out = append(out, Scenario{Name: "weights-serial", Title: "Equal latencies, weights 5, 3, 2, one request at a time",
		Note: "The backends of \"weights\" with one client sending one request after another, 30,000 requests. " +
			"Target: shares within 5% of 50/30/20.",
		Servers: weighted(), Clients: 1, Requests: 30000, Goals: []Goal{GoalWeights}})
	return out
}

// FindScenario returns the preset of that name.
func FindScenario(name string) (Scenario, error) {
	var names []string
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc, nil
		}
		names = append(names, sc.Name)
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (want one of %s)", name, strings.Join(names, ", "))
}

// ScenarioNames lists the presets' names in order.
func ScenarioNames() []string {
	var names []string
	for _, sc := range Scenarios() {
		names = append(names, sc.Name)
	}
	return names
}

// Compare runs every contender through sc with one seed, in order.
func Compare(sc Scenario, cs []Contender, seed uint64) ([]Result, error) {
	out := make([]Result, 0, len(cs))
	for _, c := range cs {
		r, err := Simulate(sc, c, seed)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
