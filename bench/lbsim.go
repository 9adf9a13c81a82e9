package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sim"
)

// LbsimCase is one run of package sim (what `lbsim simulate` runs): backends
// whose latency does not depend on their load.
type LbsimCase struct {
	Name    string
	Weights []int
	Latency []string // per backend, sim.ParseDist syntax
}

// LbsimCases mirror the queueing scenarios as far as package sim can express
// them (it has no queues and no time-varying latency).
var LbsimCases = []LbsimCase{
	{"one slow backend", []int{1, 1, 1, 1, 1}, []string{"exp:10ms", "exp:10ms", "exp:10ms", "exp:10ms", "exp:100ms"}},
	{"one erratic backend (half its answers take 200 ms)", []int{1, 1, 1, 1, 1}, []string{"exp:10ms", "exp:10ms", "exp:10ms", "exp:10ms", "slow:200ms@50%:exp:10ms"}},
	{"heterogeneous weights, equal latency", []int{4, 2, 1, 1}, []string{"exp:10ms", "exp:10ms", "exp:10ms", "exp:10ms"}},
}

// LbsimStrategies are the strategies run through package sim.
var LbsimStrategies = []string{core.RoundRobin, core.SmoothWRR, core.LeastConn, core.Fair}

const (
	lbsimClients  = 16
	lbsimRequests = 30000
)

// lbsimAddrs are the backends' addresses in the lbsim runs.
func lbsimAddrs(n int) []string {
	a := make([]string, n)
	for i := range a {
		a[i] = fmt.Sprintf("10.0.0.%d:80", i+1)
	}
	return a
}

// LbsimCommand is the `lbsim simulate` command line of one run.
func LbsimCommand(c LbsimCase, strategy string) string {
	addrs := lbsimAddrs(len(c.Weights))
	var be, lat []string
	for i, a := range addrs {
		be = append(be, fmt.Sprintf("%s=%d", a, c.Weights[i]))
		lat = append(lat, a+"="+c.Latency[i])
	}
	return fmt.Sprintf("go run ./cmd/lbsim simulate --strategy %s --backends %s --latency %s --concurrency %d -n %d --seed %d",
		strategy, strings.Join(be, ","), strings.Join(lat, ","), lbsimClients, lbsimRequests, SimSeed)
}

// RunLbsim runs every strategy through every case with package sim.
func RunLbsim() ([][]sim.Result, error) {
	out := make([][]sim.Result, len(LbsimCases))
	for ci, c := range LbsimCases {
		addrs := lbsimAddrs(len(c.Weights))
		be := make([]core.Backend, len(addrs))
		lat := map[string]sim.Dist{}
		for i, a := range addrs {
			be[i] = core.Backend{Address: a, Weight: c.Weights[i]}
			d, err := sim.ParseDist(c.Latency[i])
			if err != nil {
				return nil, err
			}
			lat[a] = d
		}
		for _, s := range LbsimStrategies {
			res, err := sim.Run(sim.Options{Config: core.Config{Strategy: s, Backends: be}, Latency: lat,
				Concurrency: lbsimClients, Requests: lbsimRequests, Seed: SimSeed})
			if err != nil {
				return nil, fmt.Errorf("sim %s %s: %v", c.Name, s, err)
			}
			out[ci] = append(out[ci], res)
		}
	}
	return out, nil
}

// WriteLbsim writes the package-sim section of simulation.md.
func WriteLbsim(w io.Writer, res [][]sim.Result) {
	fmt.Fprintf(w, "## The same situations in `lbsim simulate`\n\n")
	fmt.Fprintf(w, "lbpack's own simulator (package sim, behind `lbsim simulate`) has no queues: every answer takes a fresh sample of its backend's latency, whatever the load. ")
	fmt.Fprintf(w, "It shows how well a strategy steers requests away from slow answers; the queueing model above adds what overload does. ")
	fmt.Fprintf(w, "%d clients, %d requests, seed %d. Each row is reproduced by the command under the table.\n\n", lbsimClients, lbsimRequests, SimSeed)
	for ci, c := range LbsimCases {
		fmt.Fprintf(w, "### %s\n\n", c.Name)
		shareHeader(w, []string{"strategy", "p50 ms", "p90 ms", "p99 ms"}, len(c.Weights))
		for si, r := range res[ci] {
			fmt.Fprintf(w, "| **lbpack %s** | %s | %s | %s |", LbsimStrategies[si], ms(r.P50), ms(r.P90), ms(r.P99))
			for _, b := range r.Backends {
				fmt.Fprintf(w, " %.1f%% |", 100*b.Share)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "\n    %s\n\n", LbsimCommand(c, "fair"))
	}
}
