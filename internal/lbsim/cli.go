// Package lbsim is the lbsim command line (see cmd/lbsim): cmd/lbsim runs it,
// and Caddy's "caddy lbpack" subcommand runs the same code.
package lbsim

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
)

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
	{"convert", "convert an nginx configuration to a Caddyfile, Caddy JSON or Traefik YAML", runConvert},
}

// Host is a program that runs these commands: it decides the name their
// usage and messages start with and the names of the strategies they show.
type Host struct {
	// Name is how a user runs the commands, e.g. "lbsim".
	Name string
	// CaddyNames shows the strategies by the names of lbpack's Caddy
	// policies where they differ (weighted_least_conn, nginx_ip_hash for
	// least_conn, ip_hash). Both names are accepted either way.
	CaddyNames bool
}

// Lbsim is the lbsim program; Caddy is Caddy's "caddy lbpack" subcommand.
var (
	Lbsim = Host{Name: "lbsim"}
	Caddy = Host{Name: "caddy lbpack", CaddyNames: true}
)

// running is the host of the Run in progress, which the subcommands' flag
// sets and messages read; runMu makes Runs take turns, so that each sees
// its own (a command line runs one at a time anyway).
var (
	runMu   sync.Mutex
	running = Lbsim
)

// Run is lbsim with its arguments (without the program name) and streams; it
// returns the exit status. Tests call it directly.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return Lbsim.Run(args, stdin, stdout, stderr)
}

// Run runs the command line args (without the program name) in host h and
// returns the exit status.
func (h Host) Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	runMu.Lock()
	defer runMu.Unlock()
	running = h
	defer func() { running = Lbsim }()
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
		fmt.Fprintf(stderr, "%s %s: %v\n", running.Name, name, err)
		return exitCode(err)
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n", running.Name, name)
	usage(stderr)
	return exitUsage
}

// CommandInfo names one subcommand and says what it does.
type CommandInfo struct {
	Name, Summary string
}

// Commands lists the subcommands, in the order usage shows them.
func Commands() []CommandInfo {
	out := make([]CommandInfo, len(commands))
	for i, c := range commands {
		out[i] = CommandInfo{c.name, c.summary}
	}
	return out
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s COMMAND [flags]   (%s COMMAND -h for its flags)\n", running.Name, running.Name)
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
	prog := running.Name
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s %s %s\n", prog, name, synopsis)
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
