package lbsim

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"time"

	"github.com/lbpack/lbpack/core"
)

// maxShareColumns is the number of backends up to which compare shows each
// backend's share in its own column; beyond it only the worst error is shown.
const maxShareColumns = 8

// variant is one row of the comparison: a strategy with its options.
type variant struct {
	label string
	cfg   core.Config
}

// variants lists every strategy, url_hash once per hash mode and least_conn
// also with two choices.
func variants() []variant {
	var out []variant
	for _, s := range core.Strategies() {
		switch s {
		case core.URLHash:
			for _, m := range []string{core.HashKetama, core.HashModulo, core.HashMaglev, core.HashBounded} {
				out = append(out, variant{s + " " + m, core.Config{Strategy: s, HashMode: m}})
			}
		case core.LeastConn:
			out = append(out, variant{shown(s), core.Config{Strategy: s}})
			out = append(out, variant{shown(s) + " two_choices", core.Config{Strategy: s, TwoChoices: true}})
		default:
			out = append(out, variant{shown(s), core.Config{Strategy: s}})
		}
	}
	return out
}

// result is what compare measures for one variant.
type result struct {
	counts  []int
	maxDev  float64
	longest int
	nsPick  float64
	err     error
}

// runCompare prints a table comparing every strategy over the same backends.
func runCompare(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c common
	var keysFile string
	fs := newFlagSet("compare", "--backends HOST:PORT=W[,...] [--down HOST:PORT[,...]] [-n N] [--keys FILE] [--seed S]", stderr)
	c.register(fs, false, 100000)
	fs.StringVar(&keysFile, "keys", "", "`file` of keys for ip_hash and url_hash, one per line (default: generated)")
	if err := parseFlags(&c, fs, args); err != nil {
		return err
	}
	entries, addrs, err := addresses(c.backends)
	if err != nil {
		return err
	}
	base, err := c.config("", entries, addrs)
	if err != nil {
		return err
	}

	var keys, ips []string
	keySource := fmt.Sprintf("%d generated keys and client IPs", c.n)
	if keysFile != "" {
		if keys, err = keysFrom(keysFile); err != nil {
			return err
		}
		ips = keys
		keySource = fmt.Sprintf("%d keys from %s", len(keys), keysFile)
	} else {
		keys, ips = generateKeys(c.n, c.seed)
	}

	// The ideal shares follow the weights of the backends that may be picked.
	ideal := make([]float64, len(entries))
	total := 0
	for i, b := range base.Backends {
		if !b.Down {
			total += b.Weight
			ideal[i] = float64(b.Weight)
		}
	}
	if total == 0 {
		return usagef("--down %q: every backend is down", c.down)
	}
	for i := range ideal {
		ideal[i] /= float64(total)
	}
	window := min(total, c.n)

	var out bytes.Buffer
	fmt.Fprintf(&out, "%d picks per strategy, seed %d; hash keys: %s\n", c.n, c.seed, keySource)
	if window == total {
		fmt.Fprintf(&out, "max dev: largest |count - k*ideal share| of a backend in any k <= %d consecutive picks (%d = the sum of the weights)\n", window, total)
	} else {
		fmt.Fprintf(&out, "max dev: largest |count - k*ideal share| of a backend in any k <= %d consecutive picks (all of them: fewer than the sum of the weights, %d)\n", window, total)
	}
	out.WriteString("least_conn and fair get no request reports here: they show their choices among idle backends\n")

	perBackend := len(entries) <= maxShareColumns
	header := []string{"strategy"}
	if perBackend {
		header = append(header, labels(entries)...)
	}
	header = append(header, "worst share err", "max dev", "longest run", "ns/pick")
	rows := [][]string{header}
	if perBackend {
		row := []string{"ideal"}
		for _, p := range ideal {
			row = append(row, percent(p))
		}
		rows = append(rows, row)
	}
	var failures []string
	for _, v := range variants() {
		cfg := base
		cfg.Strategy, cfg.HashMode, cfg.TwoChoices = v.cfg.Strategy, v.cfg.HashMode, v.cfg.TwoChoices
		k := keys
		if v.cfg.Strategy == core.IPHash {
			k = ips
		} else if !keyed(v.cfg.Strategy) {
			k = nil
		}
		r := measure(cfg, c.rand(true), k, c.n, window, ideal)
		row := []string{v.label}
		if r.err != nil {
			// The message goes below the table, where its length does not
			// widen a column.
			row = append(row, "error (below)")
			failures = append(failures, v.label+": "+r.err.Error())
			rows = append(rows, row)
			continue
		}
		worst := 0.0
		for i, n := range r.counts {
			share := float64(n) / float64(c.n)
			worst = max(worst, math.Abs(share-ideal[i]))
			if perBackend {
				row = append(row, percent(share))
			}
		}
		row = append(row,
			strconv.FormatFloat(100*worst, 'f', 2, 64)+" pt",
			strconv.FormatFloat(r.maxDev, 'f', 2, 64),
			strconv.Itoa(r.longest),
			strconv.FormatFloat(r.nsPick, 'f', 1, 64))
		rows = append(rows, row)
	}
	writeTable(&out, rows)
	for _, f := range failures {
		fmt.Fprintln(&out, f)
	}
	_, err = stdout.Write(out.Bytes())
	return err
}

// measure runs n picks of a fresh balancer for the statistics, then times n
// picks of another fresh one, so that recording does not count in the cost.
// keys, when not nil, are hashed in turn.
func measure(cfg core.Config, rnd func() uint64, keys []string, n, window int, ideal []float64) result {
	cfg.Rand = rnd
	b, err := core.New(cfg)
	if err != nil {
		return result{err: err}
	}
	seq := make([]int, n)
	for i := range seq {
		if seq[i] = pickNow(b, key(keys, i)); seq[i] < 0 {
			return result{err: core.ErrNoBackend}
		}
	}
	r := sequenceStats(seq, len(ideal), window, ideal)

	if b, err = core.New(cfg); err != nil {
		return result{err: err}
	}
	start := time.Now()
	for i := range n {
		pickNow(b, key(keys, i))
	}
	r.nsPick = float64(time.Since(start).Nanoseconds()) / float64(n)
	return r
}

// pickNow picks for key as one request answered at once: its ticket, if
// it needs one, goes straight to Done.
func pickNow(b *core.Balancer, key string) int {
	i, t := core.Pick(b, key, core.Filter{})
	if t != 0 {
		core.Done(b, i, t, 0, false)
	}
	return i
}

func key(keys []string, i int) string {
	if keys == nil {
		return ""
	}
	return keys[i%len(keys)]
}

// sequenceStats counts the picks of each backend and measures the longest
// run of one backend and the largest window deviation in seq: over every
// window of k <= window consecutive picks and every backend i, the largest
// |count_i - k*ideal_i|. Windows of every length up to the sum of the
// weights are what tells a smooth schedule (a b c a a b a c b a) from a
// bursty one (a a a a a b b b c c): over windows of exactly that length both
// are exact.
func sequenceStats(seq []int, backends, window int, ideal []float64) result {
	r := result{counts: make([]int, backends)}
	run := 0
	for t, i := range seq {
		r.counts[i]++
		if t > 0 && seq[t-1] == i {
			run++
		} else {
			run = 1
		}
		r.longest = max(r.longest, run)
	}
	for i := range backends {
		r.maxDev = max(r.maxDev, windowDeviation(seq, i, window, ideal[i]))
	}
	return r
}

// windowDeviation returns the largest |count - k*share| of backend i over
// the windows of k <= window consecutive picks of seq. With
// g(t) = (picks of i among the first t) - t*share, a window (s, t] deviates
// by g(t) - g(s), so a sliding minimum and maximum of g over the last window
// points give every window's extreme in O(len(seq)).
func windowDeviation(seq []int, i, window int, share float64) float64 {
	g := make([]float64, len(seq)+1)
	var minQ, maxQ []int // indices into g, values increasing / decreasing
	dev := 0.0
	for t := range g {
		if t > 0 {
			g[t] = g[t-1] - share
			if seq[t-1] == i {
				g[t]++
			}
		}
		for len(minQ) > 0 && minQ[0] < t-window {
			minQ = minQ[1:]
		}
		for len(maxQ) > 0 && maxQ[0] < t-window {
			maxQ = maxQ[1:]
		}
		if len(minQ) > 0 {
			dev = max(dev, g[t]-g[minQ[0]], g[maxQ[0]]-g[t])
		}
		for len(minQ) > 0 && g[minQ[len(minQ)-1]] >= g[t] {
			minQ = minQ[:len(minQ)-1]
		}
		minQ = append(minQ, t)
		for len(maxQ) > 0 && g[maxQ[len(maxQ)-1]] <= g[t] {
			maxQ = maxQ[:len(maxQ)-1]
		}
		maxQ = append(maxQ, t)
	}
	return dev
}

// generateKeys returns n deterministic url_hash keys and n client IPs
// (IPv4, spread over the first three octets, which ip_hash hashes).
func generateKeys(n int, seed uint64) (keys, ips []string) {
	rnd := rand.New(rand.NewPCG(seed, 0x6b657973))
	keys = make([]string, n)
	ips = make([]string, n)
	for i := range n {
		keys[i] = "/item/" + strconv.FormatUint(rnd.Uint64()>>16, 36)
		v := rnd.Uint32()
		ips[i] = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
	}
	return keys, ips
}

func percent(p float64) string { return strconv.FormatFloat(100*p, 'f', 2, 64) + "%" }
