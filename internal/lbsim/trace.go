package lbsim

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lbpack/lbpack/core"
)

// runTrace prints the step table of smooth_wrr or gcd_wrr.
func runTrace(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("trace", "--strategy smooth_wrr|gcd_wrr --backends a=5,b=3,c=2 [--down NAME[,...]] [-n N]", stderr)
	c.register(fs, true, 10)
	if err := parseFlags(&c, fs, args); err != nil {
		return err
	}
	if err := required("strategy", c.strategy); err != nil {
		return err
	}
	if c.strategy != core.SmoothWRR && c.strategy != core.GCDWRR {
		return usagef("--strategy %q: trace shows %s or %s", c.strategy, core.SmoothWRR, core.GCDWRR)
	}
	entries, err := parseEntries("backends", c.backends)
	if err != nil {
		return err
	}
	// The names are only labels: core wants addresses, so every backend gets
	// a synthetic one, which the table never shows.
	addrs := make([]string, len(entries))
	for i := range entries {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(10001+i)
	}
	cfg, err := c.config(c.strategy, entries, addrs)
	if err != nil {
		return err
	}
	steps, err := core.Trace(cfg, c.n)
	if err != nil {
		return &usageError{err.Error()}
	}
	return writeTrace(stdout, c.strategy, entries, steps)
}

// writeTrace prints steps as an aligned table, then the sequence of choices.
func writeTrace(w io.Writer, strategy string, entries []entry, steps []core.TraceStep) error {
	names := make([]string, len(entries))
	weights := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.label
		weights[i] = e.label + "=" + strconv.Itoa(e.weight)
	}
	name := func(i int) string {
		if i < 0 || i >= len(names) {
			return "-"
		}
		return names[i]
	}

	// Each backend's numbers get one width over the whole table, so that the
	// bracketed lists line up column under column.
	var widths []int
	for _, s := range steps {
		for _, list := range [][]int{s.Before, s.After} {
			for j, v := range list {
				if j >= len(widths) {
					widths = append(widths, 0)
				}
				widths[j] = max(widths[j], len(strconv.Itoa(v)))
			}
		}
	}
	list := func(vs []int) string {
		if strategy == core.GCDWRR && len(vs) == 1 {
			return strconv.Itoa(vs[0])
		}
		parts := make([]string, len(vs))
		for j, v := range vs {
			parts[j] = fmt.Sprintf("%*d", widths[j], v)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}

	before, after := "before", "after"
	if strategy == core.SmoothWRR {
		fmt.Fprintf(w, "%s, weights %s: current weights of [%s]\n", strategy, strings.Join(weights, " "), strings.Join(names, " "))
	} else {
		fmt.Fprintf(w, "%s, weights %s: the scheduler's current weight cw\n", strategy, strings.Join(weights, " "))
		before, after = "cw before", "cw after"
	}
	rows := [][]string{{"request", before, "chosen", after}}
	seq := make([]string, len(steps))
	for i, s := range steps {
		seq[i] = name(s.Chosen)
		rows = append(rows, []string{strconv.Itoa(i + 1), list(s.Before), seq[i], list(s.After)})
	}
	if err := writeTable(w, rows); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "sequence: %s\n", strings.Join(seq, " "))
	return err
}
