package lbsim

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

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
	steps, period, err := traceSteps(cfg, c.n)
	if err != nil {
		return err
	}
	return writeTrace(stdout, c.strategy, entries, steps, period, c.n)
}

// traceCells bounds the trace kept in memory, in steps times backends: a
// longer trace is printed from one period of its schedule.
var traceCells = 1 << 20

// traceSteps returns the steps the trace prints: the first step and one
// period of the schedule after it, which the table repeats, or, for a trace
// shorter than that, all n steps (period 0). smooth_wrr's and
// gcd_wrr's schedules repeat every W picks, W the total weight of the
// backends picked from (gcd_wrr's from its second pick: its first starts
// from cw 0); the steps show it (the second period is checked to be the
// first), it is not assumed.
func traceSteps(cfg core.Config, n int) (steps []core.TraceStep, period int, err error) {
	most := max(traceCells/len(cfg.Backends), 1)
	p := tracePeriod(cfg)
	if p < 1 || n <= 2*p+1 || 2*p+1 > most {
		if n > most && p >= 1 {
			return nil, 0, usagef("-n %d: the schedule over these weights repeats every %d picks, too long to keep with a trace of more than %d picks: give -n at most %d", n, p, most, most)
		}
		// With nothing to pick from (p < 1), core says so.
		if steps, err = core.Trace(cfg, min(n, most)); err != nil {
			return nil, 0, &usageError{err.Error()}
		}
		return steps, 0, nil
	}
	if steps, err = core.Trace(cfg, 2*p+1); err != nil {
		return nil, 0, &usageError{err.Error()}
	}
	for j := 1; j <= p; j++ {
		if !sameStep(steps[j], steps[j+p]) {
			return nil, 0, usagef("-n %d: the schedule does not repeat every %d picks, and a trace of more than %d picks is not kept: give -n at most %d", n, p, most, most)
		}
	}
	return steps[:p+1], p, nil
}

// tracePeriod is the total weight of the backends a trace picks from: the
// primaries that are not down, or the backups if none is left.
func tracePeriod(cfg core.Config) int {
	primary, backup := 0, 0
	for _, b := range cfg.Backends {
		switch {
		case b.Down:
		case b.Backup:
			backup += b.Weight
		default:
			primary += b.Weight
		}
	}
	if primary == 0 {
		return backup
	}
	return primary
}

func sameStep(a, b core.TraceStep) bool {
	if a.Chosen != b.Chosen || len(a.Before) != len(b.Before) || len(a.After) != len(b.After) {
		return false
	}
	for i := range a.Before {
		if a.Before[i] != b.Before[i] {
			return false
		}
	}
	for i := range a.After {
		if a.After[i] != b.After[i] {
			return false
		}
	}
	return true
}

// writeTrace prints n steps as an aligned table, then the sequence of
// choices; past the steps given, the last period of them repeats (see
// traceSteps). It streams the rows, aligned as writeTable aligns them: the
// columns as wide as their widest cell, two spaces apart.
func writeTrace(out io.Writer, strategy string, entries []entry, steps []core.TraceStep, period, n int) error {
	w := bufio.NewWriter(out)
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
	// The cells of one period, and the columns' widths over them.
	cells := make([][3]string, len(steps))
	cols := [3]int{max(len("request"), len(strconv.Itoa(n))), utf8.RuneCountInString(before), len("chosen")}
	for i, s := range steps {
		cells[i] = [3]string{list(s.Before), name(s.Chosen), list(s.After)}
		cols[1] = max(cols[1], utf8.RuneCountInString(cells[i][0]))
		cols[2] = max(cols[2], utf8.RuneCountInString(cells[i][1]))
	}
	row := func(request, before, chosen, after string) {
		for k, cell := range []string{request, before, chosen} {
			w.WriteString(cell)
			w.WriteString(strings.Repeat(" ", cols[k]-utf8.RuneCountInString(cell)+2))
		}
		w.WriteString(after)
		w.WriteByte('\n')
	}
	at := func(i int) *[3]string {
		if i >= len(cells) {
			i = len(cells) - period + (i-len(cells))%period
		}
		return &cells[i]
	}
	row("request", before, "chosen", after)
	for i := 0; i < n; i++ {
		c := at(i)
		row(strconv.Itoa(i+1), c[0], c[1], c[2])
	}
	w.WriteString("sequence:")
	for i := 0; i < n; i++ {
		w.WriteByte(' ')
		w.WriteString(at(i)[1])
	}
	w.WriteByte('\n')
	return w.Flush()
}
