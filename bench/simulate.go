package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lbpack/lbpack/sim"
)

// The simulation page: every scenario of package sim (the one simulator,
// behind `lbsim simulate --scenario`) with every contender, its table, fair's
// targets and a latency CDF drawn by sim.WriteCDF.

// SimSeed is the fixed seed of the published figures.
const SimSeed = 1

// SimRun is one scenario's outcome: a result per contender, in order.
type SimRun struct {
	Scenario sim.Scenario
	Results  []sim.Result
}

// RunSimulation runs every contender through every scenario with SimSeed.
func RunSimulation() ([]SimRun, error) {
	var out []SimRun
	for _, sc := range sim.Scenarios() {
		res, err := sim.Compare(sc, sim.Contenders(), SimSeed)
		if err != nil {
			return nil, err
		}
		out = append(out, SimRun{sc, res})
	}
	return out, nil
}

// simChart is the file name of a scenario's CDF chart in docs/.
func simChart(sc sim.Scenario) string { return "sim-" + sc.Name + ".svg" }

// ChartSimulation writes each scenario's latency CDF into dir.
func ChartSimulation(dir string, runs []SimRun) error {
	for _, r := range runs {
		f, err := os.Create(filepath.Join(dir, simChart(r.Scenario)))
		if err != nil {
			return err
		}
		if err := sim.WriteCDF(f, r.Scenario.Title, r.Results); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// WriteSimulation writes docs/simulation.md.
func WriteSimulation(w io.Writer, runs []SimRun, cmd string) {
	fmt.Fprintf(w, "# Latency-aware balancing, simulated\n\n")
	fmt.Fprintf(w, "Regenerate with `%s -only simulation` (seed %d; deterministic). ", cmd, SimSeed)
	fmt.Fprintf(w, "Each scenario runs on its own with `go run ./cmd/lbsim simulate --scenario NAME --seed %d` (add `--svg FILE` for its chart), which prints the same table.\n\n", SimSeed)
	fmt.Fprintf(w, "One discrete-event simulator (package `sim`, also behind `lbsim simulate`). Each backend serves a number of requests at a time (its workers) ")
	fmt.Fprintf(w, "and queues the rest first come, first served; a request's latency is its wait in the queue plus its service time, drawn when its service starts. ")
	fmt.Fprintf(w, "Service times can change over time (a backend that slows down or flaps), depend on the request's cost class, and a backend can answer with an error. ")
	fmt.Fprintf(w, "Load is a closed loop of clients (each sends its next request when the last is answered, as wrk does) or Poisson arrivals at a fixed rate. ")
	fmt.Fprintf(w, "A balancer sees what a proxy sees: a request starts when sent and ends when answered, with its latency and whether it failed. ")
	fmt.Fprintf(w, "There are no retries: a failed answer is a failed request.\n\n")
	fmt.Fprintf(w, "lbpack's strategies run unchanged through core (`core.New` with the simulated clock and a seeded random source, `core.Pick`, `core.Done`). ")
	fmt.Fprintf(w, "The peers are models written for this comparison from their sources, and the oracle is a reference no balancer can reach:\n\n")
	for _, c := range sim.Contenders() {
		if c.Kind != sim.KindPeer {
			continue
		}
		fmt.Fprintf(w, "- **%s**: %s\n", c.Name, c.Note)
	}
	fmt.Fprintf(w, "\nThe oracle knows every queue, the work in progress and each backend's current speed, and joins the shortest expected delay. ")
	fmt.Fprintf(w, "It is a strong reference, not a proven optimum (it does not know the cost of the request it places), so a balancer can beat it on a figure.\n\n")

	fmt.Fprintf(w, "## fair against its targets\n\n")
	fmt.Fprintf(w, "The targets for `fair`, in every scenario: p99 and mean within 5%% of the best peer's (or better), throughput at least 98%% of the best peer's; ")
	fmt.Fprintf(w, "and each scenario's own goal. \"Best peer\" is the best figure of any peer model, each figure on its own, among the peers that answer at most %.0f%% of requests with errors ", 100*sim.MaxPeerErrors)
	fmt.Fprintf(w, "(in the failing scenario, a peer that sends most requests to the failing backend has few, fast successes, and its fast errors even speed up its clients: it is no model to match). ")
	fmt.Fprintf(w, "These are what the current `fair` does; a miss is a target not yet met.\n\n")
	fmt.Fprintf(w, "| scenario | p99 fair / best peer | mean fair / best peer | req/s fair / best peer | own goal |\n|---|---|---|---|---|\n")
	for _, r := range runs {
		checks := sim.Targets(r.Scenario, r.Results)
		if len(checks) < 3 {
			continue
		}
		cell := func(c sim.Check) string {
			if c.OK {
				return "met: " + c.Got
			}
			return "**missed**: " + c.Got
		}
		own := "–"
		if len(checks) > 3 {
			var parts []string
			for _, c := range checks[3:] {
				parts = append(parts, c.Target+": "+cell(c))
			}
			own = strings.Join(parts, "; ")
		}
		fmt.Fprintf(w, "| [%s](#%s) | %s | %s | %s | %s |\n", r.Scenario.Name, anchor(r.Scenario), cell(checks[0]), cell(checks[1]), cell(checks[2]), own)
	}
	fmt.Fprintln(w)

	for _, r := range runs {
		writeScenario(w, r)
	}
	writeOwnRuns(w)
}

// anchor is the GitHub anchor of a scenario's section heading.
func anchor(sc sim.Scenario) string {
	var b strings.Builder
	for _, c := range strings.ToLower(sc.Name + ": " + sc.Title) {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_':
			b.WriteRune(c)
		case c == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func writeScenario(w io.Writer, r SimRun) {
	sc := r.Scenario
	fmt.Fprintf(w, "## %s: %s\n\n%s\n\n    go run ./cmd/lbsim simulate --scenario %s --seed %d\n\n", sc.Name, sc.Title, sc.Note, sc.Name, SimSeed)
	recovery := sc.HasGoal(sim.GoalRecovery)
	cols := []string{"policy", "p50 ms", "p99 ms", "mean ms", "req/s", "errors"}
	if recovery {
		cols = append(cols, sim.Letter(sc.Focus)+" at 90% after")
	}
	fmt.Fprintf(w, "| %s |", strings.Join(cols, " | "))
	for i := range sc.Servers {
		fmt.Fprintf(w, " %s share |", sim.Letter(i))
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(cols)-1+len(sc.Servers)))
	for _, res := range r.Results {
		name := res.Policy
		if res.Kind == sim.KindLbpack {
			name = "**" + name + "**"
		} else if res.Kind == sim.KindOracle {
			name = "*" + name + "*"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.0f | %.1f%% |", name, ms(res.P50), ms(res.P99), ms(res.Mean), res.Throughput, 100*sim.ErrorRate(res))
		if recovery {
			if d, ok := sim.Recovered(sc, res); ok {
				fmt.Fprintf(w, " %v |", d)
			} else {
				fmt.Fprintf(w, " never |")
			}
		}
		for _, b := range res.Backends {
			fmt.Fprintf(w, " %.1f%% |", 100*b.Share)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, c := range sim.Targets(sc, r.Results) {
		verdict := "met"
		if !c.OK {
			verdict = "**missed**"
		}
		fmt.Fprintf(w, "- fair, %s: %s (%s)\n", c.Target, verdict, c.Got)
	}
	fmt.Fprintf(w, "\n![latency CDF, %s](%s)\n\n", sc.Title, simChart(sc))
}

// writeOwnRuns says how to simulate one's own backends with lbsim.
func writeOwnRuns(w io.Writer) {
	fmt.Fprintf(w, "## Your own backends\n\n")
	fmt.Fprintf(w, "`lbsim simulate` runs one lbpack strategy over backends you describe, on the same engine:\n\n")
	fmt.Fprintf(w, "    go run ./cmd/lbsim simulate --strategy fair --backends a:80,b:80,c:80,d:80,e:80 \\\n")
	fmt.Fprintf(w, "        --latency exp:10ms --workers 4 --concurrency 16 -n 20000 \\\n")
	fmt.Fprintf(w, "        --slowdown d:80=10x@0s-5s --errors e:80=100%%:1ms --svg fair.svg\n\n")
	fmt.Fprintf(w, "- `--latency HOST:PORT=DIST,...`: service times (`10ms`, `exp:10ms`, `uniform:5ms-15ms`, `slow:100ms@30%%[:BASE]`); a bare DIST covers the backends not listed.\n")
	fmt.Fprintf(w, "- `--workers W`: requests each backend serves at once, the rest queueing; 0 (the default) means no queue, every answer a fresh sample whatever the load.\n")
	fmt.Fprintf(w, "- `--slowdown HOST:PORT=Fx@D1-D2` (F times slower from D1 to D2) or `Fx@every:D` (F times slower every other period D).\n")
	fmt.Fprintf(w, "- `--errors HOST:PORT=P%%[:DIST]`: a fraction of the answers are errors, taking DIST; lbpack is told of them as failures.\n")
	fmt.Fprintf(w, "- `--classes P%%:COST,...`: request cost classes, multiples of the service time (`95%%:1,5%%:100`).\n")
	fmt.Fprintf(w, "- `--concurrency C` (closed loop) or `--rate R` (Poisson arrivals per second); `--balancers N` independent balancers; `-n`, `--seed`; `--svg FILE` for the CDF chart.\n")
	fmt.Fprintf(w, "- `--scenario NAME` runs a preset above with every policy (`--scenario list` names them; `--policies` picks rows; `-n` shortens it).\n")
}
