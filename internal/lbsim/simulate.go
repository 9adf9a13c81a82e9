package lbsim

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/lbpack/lbpack/sim"
)

// runSimulate runs the discrete-event simulation of package sim and prints
// the latency percentiles and each backend's share.
func runSimulate(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c common
	var latency, keysFile string
	var concurrency int
	var rate float64
	fs := newFlagSet("simulate", "--strategy NAME --backends HOST:PORT=W[,...] --latency HOST:PORT=DIST[,...] [--concurrency C] [-n N] [--seed S]", stderr)
	c.register(fs, true, 10000)
	c.registerOptions(fs)
	fs.StringVar(&latency, "latency", "", "backend latencies as `HOST:PORT=DIST[,...]`; DIST is 10ms, exp:10ms, uniform:5ms-15ms or slow:100ms@30%[:BASE]; an entry without HOST:PORT= applies to the backends not listed")
	fs.IntVar(&concurrency, "concurrency", 10, "concurrent clients, each sending its next request when the last one ends")
	fs.Float64Var(&rate, "rate", 0, "open loop instead: requests per second arriving at random (Poisson)")
	fs.StringVar(&keysFile, "keys", "", "`file` of keys for ip_hash and url_hash, one per line, used in turn (default: random client IPs)")
	if err := parseFlags(&c, fs, args); err != nil {
		return err
	}
	cfg, entries, err := c.strategyConfig()
	if err != nil {
		return err
	}
	lat, def, err := parseLatency(latency, entries)
	if err != nil {
		return err
	}
	lat = byAddress(lat, &c, cfg)
	concurrencySet := false
	fs.Visit(func(f *flag.Flag) { concurrencySet = concurrencySet || f.Name == "concurrency" })
	switch {
	case rate < 0:
		return usagef("--rate %v: must be positive", rate)
	case rate > 0 && concurrencySet:
		return usagef("--rate %v and --concurrency %d: give one, not both", rate, concurrency)
	case rate > 0:
		concurrency = 0
	case concurrency < 1:
		return usagef("--concurrency %d: must be at least 1", concurrency)
	}
	opt := sim.Options{
		Config:      cfg,
		Latency:     lat,
		Default:     def,
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
	res, err := sim.Run(opt)
	if err != nil {
		return &usageError{err.Error()}
	}
	return writeSimulation(stdout, c, opt, res)
}

// parseLatency parses --latency: "HOST:PORT=DIST" entries, and at most one
// bare "DIST" for every backend not listed. Every backend must get one: a
// latency nobody chose would make the figures meaningless.
func parseLatency(s string, entries []entry) (map[string]sim.Dist, sim.Dist, error) {
	if err := required("latency", s); err != nil {
		return nil, nil, err
	}
	lat := map[string]sim.Dist{}
	var def sim.Dist
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		addr, dist, perBackend := strings.Cut(item, "=")
		if !perBackend {
			addr, dist = "", item
		}
		d, err := sim.ParseDist(dist)
		if err != nil {
			return nil, nil, usagef("--latency %q: %v", s, err)
		}
		switch {
		case !perBackend && def != nil:
			return nil, nil, usagef("--latency %q: two distributions for the backends not listed", s)
		case !perBackend:
			def = d
		case lat[addr] != nil:
			return nil, nil, usagef("--latency %q: %q appears twice", s, addr)
		default:
			if _, err := parseLabels("latency", addr, entries); err != nil {
				return nil, nil, usagef("--latency %q: %q is not in --backends", s, addr)
			}
			lat[addr] = d
		}
	}
	if def == nil {
		for _, e := range entries {
			if lat[e.label] == nil {
				return nil, nil, usagef("--latency %q: no distribution for %q (add %s=DIST, or a bare DIST for every backend not listed)", s, e.label, e.label)
			}
		}
	}
	return lat, def, nil
}

// writeSimulation prints the run's settings, the latency figures one per
// line ("p99 12.5ms", easy to pick out in a script), and a table of the
// backends.
func writeSimulation(w io.Writer, c common, opt sim.Options, res sim.Result) error {
	load := fmt.Sprintf("%d concurrent clients", opt.Concurrency)
	if opt.Rate > 0 {
		load = fmt.Sprintf("%v requests/s arriving at random", opt.Rate)
	}
	fmt.Fprintf(w, "%s: %d requests, %s, seed %d, %v simulated\n", c.strategy, opt.Requests, load, opt.Seed, res.Elapsed.Round(time.Millisecond))
	if res.Rejected > 0 {
		fmt.Fprintf(w, "rejected %d (no backend available)\n", res.Rejected)
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
		dist := d.String()
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
