package lbsim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lbpack/lbpack/sim"
)

// runSimulate runs package sim: one strategy over backends with given
// latencies (--strategy), or a named scenario with every policy, lbpack's
// and the peers' models (--scenario). It prints the latency figures and
// each backend's share, and can draw the latency CDF (--svg).
func runSimulate(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c common
	var latency, keysFile, scenario, policies, svg, slowdown, errs string
	var beh behaviour
	var concurrency, workers int
	var rate float64
	fs := newFlagSet("simulate", "--strategy NAME --backends HOST:PORT=W[,...] --latency HOST:PORT=DIST[,...] [--workers W] [--concurrency C | --rate R] [-n N] [--seed S] [--svg FILE]\n"+
		"       lbsim simulate --scenario NAME [--policies NAME,...] [-n N] [--seed S] [--svg FILE]   (--scenario list names them)", stderr)
	c.register(fs, true, 10000)
	c.registerOptions(fs)
	fs.StringVar(&latency, "latency", "", "backend service times as `HOST:PORT=DIST[,...]`; DIST is 10ms, exp:10ms, uniform:5ms-15ms or slow:100ms@30%[:BASE]; an entry without HOST:PORT= applies to the backends not listed")
	fs.IntVar(&workers, "workers", 0, "requests each backend serves at once, the rest queueing; 0: no queue (every answer a fresh sample of its latency)")
	fs.IntVar(&concurrency, "concurrency", 10, "concurrent clients, each sending its next request when the last one ends")
	fs.Float64Var(&rate, "rate", 0, "open loop instead: requests per second arriving at random (Poisson)")
	fs.StringVar(&keysFile, "keys", "", "`file` of keys for ip_hash and url_hash, one per line, used in turn (default: random client IPs)")
	fs.StringVar(&slowdown, "slowdown", "", "backends that change speed, as `HOST:PORT=Fx@D1-D2[,...]` (F times slower from D1 to D2) or HOST:PORT=Fx@every:D (F times slower every other period D)")
	fs.StringVar(&errs, "errors", "", "backends that answer with errors, as `HOST:PORT=P%[:DIST][,...]`: a fraction P of their answers, taking DIST (default: their latency)")
	fs.StringVar(&beh.classes, "classes", "", "request cost classes, as `P%:COST[,...]` adding up to 100%: a share of the requests and their multiple of the service time (95%:1,5%:100)")
	fs.IntVar(&beh.balancers, "balancers", 1, "independent balancers, each seeing only its own clients' requests")
	fs.StringVar(&scenario, "scenario", "", "run the named scenario `NAME` with every policy (list: print the scenarios; all: run every one)")
	fs.StringVar(&policies, "policies", "", "with --scenario: only these policies, as `NAME[,NAME...]` (as the table names them)")
	fs.StringVar(&svg, "svg", "", "write an SVG chart of the latency distributions to `FILE`")
	if err := parseFlags(&c, fs, args); err != nil {
		return err
	}
	var set []string // the flags given, in lexical order
	fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
	given := func(name string) bool {
		for _, f := range set {
			if f == name {
				return true
			}
		}
		return false
	}
	if given("n") && c.n > maxSimRequests {
		return usagef("-n %d: the simulation keeps every request's latency: at most %d requests", c.n, maxSimRequests)
	}
	if scenario != "" {
		return runScenario(stdout, set, given("n"), c, scenario, policies, svg)
	}
	if policies != "" {
		return usagef("--policies %q: only with --scenario", policies)
	}
	cfg, entries, err := c.strategyConfig()
	if err != nil {
		return err
	}
	lat, def, err := parseLatency(latency, entries)
	if err != nil {
		return err
	}
	if slowdown != "" {
		if beh.slowdown, _, err = perBackend("slowdown", "slowdowns", slowdown, entries, false); err != nil {
			return err
		}
	}
	if errs != "" {
		if beh.errors, _, err = perBackend("errors", "error rates", errs, entries, false); err != nil {
			return err
		}
	}
	// The simulation knows the backends by address; the flags name them as
	// --backends does.
	lat = byAddress(lat, &c, cfg)
	beh.slowdown = byAddress(beh.slowdown, &c, cfg)
	beh.errors = byAddress(beh.errors, &c, cfg)
	switch {
	case rate < 0:
		return usagef("--rate %v: must be positive", rate)
	case rate > 0 && given("concurrency"):
		return usagef("--rate %v and --concurrency %d: give one, not both", rate, concurrency)
	case rate > 0:
		concurrency = 0
	case concurrency < 1:
		return usagef("--concurrency %d: must be at least 1", concurrency)
	}
	if workers < 0 {
		return usagef("--workers %d: must not be negative", workers)
	}
	opt := sim.Options{
		Config:      cfg,
		Latency:     lat,
		Default:     def,
		Workers:     workers,
		Concurrency: concurrency,
		Rate:        rate,
		Requests:    c.n,
		Seed:        c.seed,
	}
	if keysFile != "" {
		keys, err := keysFrom(keysFile)
		if err != nil {
			return err
		}
		opt.Key = func(i int, _ *rand.Rand) string { return keys[i%len(keys)] }
	}
	sc, err := opt.Scenario()
	if err != nil {
		return &usageError{err.Error()}
	}
	if err := beh.apply(&sc); err != nil {
		return err
	}
	if err := checkSpans(sc, c.names, latency, beh.classes); err != nil {
		return err
	}
	res, err := sim.Simulate(sc, sim.Lbpack(c.strategy, c.strategy), opt.Seed)
	if errors.Is(err, sim.ErrLimit) {
		// A run as long as that comes of several flags together: name them.
		var given []string
		for _, f := range set {
			if timeFlags[f] {
				dash := "--"
				if len(f) == 1 {
					dash = "-"
				}
				given = append(given, dash+f+" "+fs.Lookup(f).Value.String())
			}
		}
		return usagef("%s: %v", strings.Join(given, " "), err)
	}
	if err != nil {
		return &usageError{err.Error()}
	}
	if err := writeSimulation(stdout, c, opt, beh, res); err != nil {
		return err
	}
	if svg != "" {
		return writeSVG(svg, c.strategy, []sim.Result{res})
	}
	return nil
}

// maxSimRequests bounds simulate's -n: the run keeps every latency (8
// bytes each) to take its percentiles.
const maxSimRequests = 1 << 24

// timeFlags are simulate's flags that make a run last: a run past the
// simulation's limit names those given.
var timeFlags = map[string]bool{"latency": true, "classes": true, "slowdown": true, "errors": true,
	"rate": true, "concurrency": true, "workers": true, "n": true, "balancers": true}

// checkSpans refuses a service time, or a cost class's multiple of one,
// that alone passes the simulation's limit, naming the flag that gives it.
func checkSpans(sc sim.Scenario, names []string, latency, classes string) error {
	limit := sc.Limit()
	costly := 1.0
	for _, cl := range sc.Classes {
		costly = max(costly, cl.Cost)
	}
	for i, s := range sc.Servers {
		m := s.Service.Mean()
		if m > limit {
			return usagef("--latency %q: %s's mean service time %v is past the simulation's limit of %v", latency, names[i], m, limit)
		}
		if float64(m)*costly > float64(limit) {
			return usagef("--classes %q: a cost of %g times %s's mean service time %v is past the simulation's limit of %v", classes, costly, names[i], m, limit)
		}
	}
	return nil
}

// scenarioFlags are the flags that make sense with --scenario: the rest
// describe backends and load, which the scenario fixes.
var scenarioFlags = map[string]bool{"scenario": true, "policies": true, "seed": true, "n": true, "svg": true}

// runScenario runs a named scenario with every policy (or those of
// --policies) and prints the table and fair's targets.
func runScenario(w io.Writer, set []string, nSet bool, c common, name, policies, svg string) error {
	if name == "list" {
		for _, sc := range sim.Scenarios() {
			fmt.Fprintf(w, "%-14s %s\n", sc.Name, sc.Title)
		}
		return nil
	}
	var scs []sim.Scenario
	if name == "all" {
		if svg != "" {
			return usagef("--scenario all and --svg %q: one chart is of one scenario; name it", svg)
		}
		scs = sim.Scenarios()
	} else {
		sc, err := sim.FindScenario(name)
		if err != nil {
			return usagef("--scenario: %v", err)
		}
		scs = []sim.Scenario{sc}
	}
	for _, f := range set {
		if !scenarioFlags[f] {
			return usagef("--scenario %s and --%s: the scenario sets the backends and the load; give --%s without --scenario", name, f, f)
		}
	}
	cs, err := contenders(policies)
	if err != nil {
		return err
	}
	for k, sc := range scs {
		if nSet {
			sc.Requests, sc.Duration = c.n, 0
			sc.Note += fmt.Sprintf(" This run: -n %d requests.", c.n)
		}
		res, err := sim.Compare(sc, cs, c.seed)
		if errors.Is(err, sim.ErrLimit) {
			return usagef("--scenario %s -n %d: %v", sc.Name, c.n, err)
		}
		if err != nil {
			return err
		}
		if k > 0 {
			fmt.Fprintln(w)
		}
		if err := writeScenario(w, sc, c.seed, res); err != nil {
			return err
		}
		if svg != "" {
			return writeSVG(svg, sc.Title, res)
		}
	}
	return nil
}

// contenders returns the policies --policies names, in its order, or every
// one if it is empty.
func contenders(policies string) ([]sim.Contender, error) {
	if policies == "" {
		return sim.Contenders(), nil
	}
	var cs []sim.Contender
	for _, p := range strings.Split(policies, ",") {
		ct, ok := sim.FindContender(strings.TrimSpace(p))
		if !ok {
			var names []string
			for _, k := range sim.Contenders() {
				names = append(names, k.Name)
			}
			return nil, usagef("--policies %q: no policy %q (want names from: %s)", policies, strings.TrimSpace(p), strings.Join(names, ", "))
		}
		cs = append(cs, ct)
	}
	return cs, nil
}

// writeScenario prints a scenario's table: one row per policy with its
// latency figures, throughput, errors and each backend's share; then one
// line per target of fair's.
func writeScenario(w io.Writer, sc sim.Scenario, seed uint64, res []sim.Result) error {
	fmt.Fprintf(w, "scenario %s: %s (seed %d)\n%s\n", sc.Name, sc.Title, seed, sc.Note)
	head := []string{"policy", "p50", "p99", "mean", "req/s", "errors"}
	recovery := sc.HasGoal(sim.GoalRecovery)
	if recovery {
		head = append(head, sim.Letter(sc.Focus)+" at 90% after")
	}
	for i := range sc.Servers {
		head = append(head, sim.Letter(i))
	}
	rows := [][]string{head}
	for _, r := range res {
		row := []string{r.Policy, ms(r.P50), ms(r.P99), ms(r.Mean), strconv.FormatFloat(r.Throughput, 'f', 0, 64), percent(sim.ErrorRate(r))}
		if recovery {
			cell := "never"
			if d, ok := sim.Recovered(sc, r); ok {
				cell = d.String()
			}
			row = append(row, cell)
		}
		for _, b := range r.Backends {
			row = append(row, strconv.FormatFloat(100*b.Share, 'f', 1, 64)+"%")
		}
		rows = append(rows, row)
	}
	if err := writeTable(w, rows); err != nil {
		return err
	}
	checks := sim.Targets(sc, res)
	if len(checks) == 0 {
		_, err := fmt.Fprintln(w, "targets: none checked (they need the lbpack fair row and a peer's)")
		return err
	}
	for _, t := range checks {
		verdict := "met"
		if !t.OK {
			verdict = "MISSED"
		}
		if _, err := fmt.Fprintf(w, "targets: fair %s: %s (%s)\n", t.Target, verdict, t.Got); err != nil {
			return err
		}
	}
	return nil
}

// ms shows a latency in milliseconds, one decimal.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

// writeSVG writes the latency CDF chart of res to file.
func writeSVG(file, title string, res []sim.Result) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("--svg %q: %v", file, err)
	}
	if err := sim.WriteCDF(f, title, res); err != nil {
		f.Close()
		return fmt.Errorf("--svg %q: %v", file, err)
	}
	return f.Close()
}

// perBackend parses a per-backend flag: "HOST:PORT=VALUE" entries, each
// backend at most once and every one in --backends, and (if bareOK) at most
// one bare "VALUE" for the backends not listed; what names the values.
func perBackend(name, what, s string, entries []entry, bareOK bool) (map[string]string, string, error) {
	vals := map[string]string{}
	bare := ""
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		addr, v, listed := strings.Cut(item, "=")
		switch {
		case !listed && !bareOK:
			return nil, "", usagef("--%s %q: %q: want HOST:PORT=VALUE", name, s, item)
		case !listed && bare != "":
			return nil, "", usagef("--%s %q: two %s for the backends not listed", name, s, what)
		case !listed:
			bare = item
		case vals[addr] != "":
			return nil, "", usagef("--%s %q: %q appears twice", name, s, addr)
		default:
			if _, err := parseLabels(name, addr, entries); err != nil {
				return nil, "", usagef("--%s %q: %q is not in --backends", name, s, addr)
			}
			vals[addr] = v
		}
	}
	return vals, bare, nil
}

// parseLatency parses --latency: "HOST:PORT=DIST" entries, and at most one
// bare "DIST" for every backend not listed. Every backend must get one: a
// latency nobody chose would make the figures meaningless.
func parseLatency(s string, entries []entry) (map[string]sim.Dist, sim.Dist, error) {
	if err := required("latency", s); err != nil {
		return nil, nil, err
	}
	vals, bare, err := perBackend("latency", "distributions", s, entries, true)
	if err != nil {
		return nil, nil, err
	}
	var def sim.Dist
	if bare != "" {
		if def, err = sim.ParseDist(bare); err != nil {
			return nil, nil, usagef("--latency %q: %v", s, err)
		}
	}
	lat := map[string]sim.Dist{}
	for _, e := range entries {
		v, ok := vals[e.label]
		switch {
		case ok:
			d, err := sim.ParseDist(v)
			if err != nil {
				return nil, nil, usagef("--latency %q: %v", s, err)
			}
			lat[e.label] = d
		case def == nil:
			return nil, nil, usagef("--latency %q: no distribution for %q (add %s=DIST, or a bare DIST for every backend not listed)", s, e.label, e.label)
		}
	}
	return lat, def, nil
}

// behaviour is what --slowdown, --errors, --classes and --balancers add to
// a run, kept as given for the report.
type behaviour struct {
	slowdown, errors map[string]string
	classes          string
	balancers        int
}

// apply sets b on the scenario's servers and load.
func (b behaviour) apply(sc *sim.Scenario) error {
	for i := range sc.Servers {
		addr := sc.Servers[i].Backend.Address
		if v, ok := b.slowdown[addr]; ok {
			f, err := sim.ParseSlowdown(v)
			if err != nil {
				return usagef("--slowdown: %v", err)
			}
			sc.Servers[i].Slowdown = f
		}
		if v, ok := b.errors[addr]; ok {
			p, d, err := sim.ParseErrors(v)
			if err != nil {
				return usagef("--errors: %v", err)
			}
			sc.Servers[i].FailRate, sc.Servers[i].FailTime = p, d
		}
	}
	if b.classes != "" {
		cl, err := sim.ParseClasses(b.classes)
		if err != nil {
			return usagef("--classes: %v", err)
		}
		sc.Classes = cl
	}
	if b.balancers < 1 {
		return usagef("--balancers %d: must be at least 1", b.balancers)
	}
	sc.Balancers = b.balancers
	return nil
}

// describe is backend addr's latency as the table shows it: its
// distribution, then any slowdown and errors given.
func (b behaviour) describe(addr string, d sim.Dist) string {
	s := d.String()
	if v, ok := b.slowdown[addr]; ok {
		s += " slow " + v
	}
	if v, ok := b.errors[addr]; ok {
		s += " errors " + v
	}
	return s
}

// writeSimulation prints the run's settings, the latency figures one per
// line ("p99 12.5ms", easy to pick out in a script), and a table of the
// backends.
func writeSimulation(w io.Writer, c common, opt sim.Options, beh behaviour, res sim.Result) error {
	load := fmt.Sprintf("%d concurrent clients", opt.Concurrency)
	if opt.Rate > 0 {
		load = fmt.Sprintf("%v requests/s arriving at random", opt.Rate)
	}
	fmt.Fprintf(w, "%s: %d requests, %s, seed %d, %v simulated\n", c.strategy, opt.Requests, load, opt.Seed, res.Elapsed.Round(time.Millisecond))
	if res.Rejected > 0 {
		fmt.Fprintf(w, "rejected %d (no backend available)\n", res.Rejected)
	}
	if res.Errors > 0 {
		fmt.Fprintf(w, "errors %d (%s of the answers; the figures below are of the %d successes)\n", res.Errors, percent(sim.ErrorRate(res)), res.Requests)
	}
	rows := [][]string{
		{"p50", round(res.P50)},
		{"p90", round(res.P90)},
		{"p99", round(res.P99)},
		{"mean", round(res.Mean)},
		{"max", round(res.Max)},
	}
	if err := writeTable(w, rows); err != nil {
		return err
	}
	rows = [][]string{{"backend", "weight", "latency", "requests", "share"}}
	for i, b := range res.Backends {
		d := opt.Latency[b.Address]
		if d == nil {
			d = opt.Default
		}
		dist := beh.describe(b.Address, d)
		if opt.Config.Backends[i].Down {
			dist += " (down)"
		}
		rows = append(rows, []string{c.names[i], strconv.Itoa(opt.Config.Backends[i].Weight), dist, strconv.Itoa(b.Requests), percent(b.Share)})
	}
	return writeTable(w, rows)
}

// round shows a duration to the microsecond: simulated latencies are
// nanosecond samples, but nobody reads the nanoseconds.
func round(d time.Duration) string { return d.Round(time.Microsecond).String() }
