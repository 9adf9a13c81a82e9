package sim_test

import (
	"fmt"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sim"
)

// A scenario of one's own: three backends serving two requests at a time,
// the third ten times slower, eight clients; lbpack's least_conn against
// the model of Traefik's leasttime and the oracle.
func ExampleCompare() {
	exp10ms, _ := sim.ParseDist("exp:10ms")
	exp100ms, _ := sim.ParseDist("exp:100ms")
	sc := sim.Scenario{Clients: 8, Requests: 5000}
	for i, d := range []sim.Dist{exp10ms, exp10ms, exp100ms} {
		sc.Servers = append(sc.Servers, sim.Server{
			Backend: core.Backend{Address: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: 1},
			Workers: 2, Service: d,
		})
	}
	res, err := sim.Compare(sc, []sim.Contender{sim.Lbpack("lbpack least_conn", core.LeastConn), sim.TraefikLeastTime(), sim.Oracle()}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res {
		fmt.Printf("%-17s p99 %-6v slow backend %4.1f%%\n", r.Policy, r.P99.Round(time.Millisecond), 100*r.Backends[2].Share)
	}
	// Output:
	// lbpack least_conn p99 227ms  slow backend  4.5%
	// Traefik leasttime p99 60ms   slow backend  0.2%
	// oracle            p99 58ms   slow backend  0.0%
}

// A preset by name, run for one policy.
func ExampleFindScenario() {
	sc, err := sim.FindScenario("failing")
	if err != nil {
		fmt.Println(err)
		return
	}
	sc.Requests = 4000
	r, err := sim.Simulate(sc, sim.CaddyLeastConn(), 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %.0f%% of answers are errors\n", r.Policy, 100*sim.ErrorRate(r))
	// Output:
	// Caddy least_conn: 70% of answers are errors
}
