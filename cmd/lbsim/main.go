// Command lbsim runs lbpack's load-balancing strategies from the command
// line: it prints the backends a balancer picks, the step table of the
// weighted round robin algorithms, a side-by-side comparison of every
// strategy, and a simulation of requests against backends with given
// latencies. Scripts depend on its interface, which is fixed.
//
// Usage:
//
//	lbsim pick --strategy NAME --backends HOST:PORT=W[,HOST:PORT=W...] [--down HOST:PORT[,...]] [--hash-mode MODE] [-n N]
//	lbsim trace --strategy smooth_wrr|gcd_wrr --backends a=5,b=3,c=2 [-n N]
//	lbsim compare --backends HOST:PORT=W[,...] [--down HOST:PORT[,...]] [-n N] [--keys FILE] [--seed S]
//	lbsim simulate --strategy NAME --backends HOST:PORT=W[,...] --latency HOST:PORT=DIST[,...] [--concurrency C | --rate R] [-n N] [--seed S]
//
// In every --backends list "=W" may be omitted (weight 1).
//
// pick prints one chosen backend address per line. For ip_hash and url_hash
// it reads keys from standard input, one per line (a client IP for ip_hash,
// the exact key string for url_hash; a line ends at "\n" or "\r\n"), and
// prints one address per key; -n does not apply. For the other strategies it
// prints N picks (default 10) of a fresh balancer. Further flags pass through
// to the balancer's configuration: --backup HOST:PORT[,...], --stagger,
// --two-choices, --load-factor C, --decay-time D, and --seed S for a
// reproducible random source.
//
// trace prints, for each of N requests (default 10), the current weights
// before the pick, the chosen backend and the current weights after it: nginx's
// smooth weighted round robin keeps one current weight per backend, the LVS
// scheduler of gcd_wrr keeps one current weight cw for the whole set.
// Backends may be named by bare names (a, b, c); --down names some of them.
//
// compare runs N picks (default 100000) of every strategy, of every hash
// mode of url_hash, and of least_conn with two choices, over the same
// backends, and prints a table: each backend's share of the picks against its
// ideal share (its weight over the sum W of the weights of the backends not
// down), the worst share error, the largest window deviation, the longest run
// of one backend, and the cost per pick. The window deviation is the largest
// |count_i - k*w_i/W| over every window of k <= W consecutive picks (k <= N
// when N < W) and every backend i: small for a smooth schedule
// (a b c a a b a c b a), larger for a bursty one (a a a a a b b b c c).
// Windows of exactly W picks would not tell these apart, since both are exact
// over any W consecutive picks. ip_hash and url_hash hash the keys of
// --keys FILE (one per line, used in turn; ip_hash needs client IPs) or,
// without it, N generated keys. --seed S seeds the random strategies. The
// cost per pick is measured by timing N picks of a fresh balancer in this
// process; it is a report, not a benchmark. least_conn and fair get no
// request reports from compare, so they show their choices on idle backends.
//
// simulate runs a discrete-event simulation (package sim): N requests
// (default 10000) from C concurrent clients (default 10), or arriving at
// random at --rate R per second, each backend answering after a latency drawn
// from its distribution, and prints the p50, p90 and p99 latency (one per
// line, as "p99 12.5ms") and each backend's share. A distribution is a fixed
// time (10ms), exponential with a mean (exp:10ms), uniform (uniform:5ms-15ms),
// or a fraction of slow answers (slow:100ms@30% answers 30% of requests in
// 100ms and the rest as the bare entry says, or in 10ms). An entry without
// "HOST:PORT=" gives every backend not listed its distribution; every backend
// needs one. ip_hash and url_hash hash random client IPs, or the keys of
// --keys FILE. The simulation is deterministic for a given --seed (default 1).
//
// Bad input gets a message on standard error naming the flag and the value,
// and exit status 2; a failure while running (no backend available) gets
// exit status 1.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// command is one subcommand: it parses its own flags from args.
type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

var commands = []command{
	{"pick", "print the backends a balancer picks", runPick},
	{"trace", "print the step table of smooth_wrr or gcd_wrr", runTrace},
	{"compare", "compare every strategy over the same backends", runCompare},
	{"simulate", "simulate requests against backends with given latencies", runSimulate},
}

// run is lbsim with its arguments (without the program name) and streams; it
// returns the exit status. Tests call it directly.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		err := c.run(args[1:], stdin, stdout, stderr)
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case isFlagError(err):
			// The flag package has printed the message and the usage.
			return exitUsage
		}
		fmt.Fprintf(stderr, "lbsim %s: %v\n", name, err)
		return exitCode(err)
	}
	fmt.Fprintf(stderr, "lbsim: unknown command %q\n", name)
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: lbsim COMMAND [flags]   (lbsim COMMAND -h for its flags)")
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
}

// flagError is an error the flag package has already reported.
type flagError struct{ err error }

func (e flagError) Error() string { return e.err.Error() }

func isFlagError(err error) bool {
	var f flagError
	return errors.As(err, &f)
}

// newFlagSet returns a flag set that reports to stderr and returns errors.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lbsim "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: lbsim %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args with fs and wraps what the flag package reported.
func parseFlags(c *common, fs *flag.FlagSet, args []string) error {
	err := c.parse(fs, args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	var u *usageError
	if errors.As(err, &u) {
		return err
	}
	return flagError{err}
}

// required returns an error naming a missing flag.
func required(name, value string) error {
	if strings.TrimSpace(value) == "" {
		return usagef("--%s is required", name)
	}
	return nil
}

// writeTable writes rows as aligned columns, two spaces apart, with no
// trailing spaces. Short rows are padded with empty cells so that every
// column lines up over the whole table.
func writeTable(w io.Writer, rows [][]string) error {
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		for i := range cols {
			if i < len(r) {
				tw.Write([]byte(r[i]))
			}
			if i < cols-1 {
				tw.Write([]byte{'\t'})
			}
		}
		tw.Write([]byte{'\n'})
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		trimmed := strings.TrimRight(line, " \n")
		if line == "" {
			continue
		}
		if _, err := io.WriteString(w, trimmed+"\n"); err != nil {
			return err
		}
	}
	return nil
}
