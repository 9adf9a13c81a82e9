package lbsim

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lbpack/lbpack/core"
)

// exitUsage is the exit status for bad command lines and bad configurations;
// exitFail is the status for failures while running (no backend available,
// unreadable input).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// usageError is bad input: the command reports it and exits with exitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// exitCode maps an error to the process's exit status.
func exitCode(err error) int {
	var u *usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitFail
}

// entry is one item of a --backends list: a label and its weight. The label
// is what the user wrote and what the output shows: a backend's address
// (HOST:PORT) or a bare name (a, web-1), and for trace any name.
type entry struct {
	label  string
	weight int
}

// bareNamePort is the port a bare backend name stands for: the backend "a"
// is the address "a:80", which is what the hash strategies hash (nginx's
// choice for "server a:80").
const bareNamePort = "80"

// addressOf returns the address of a --backends label: the label itself
// when it is HOST:PORT, NAME:80 for a bare name.
func addressOf(label string) (string, error) {
	if strings.Contains(label, ":") {
		return label, core.CheckAddress(label)
	}
	for _, r := range label {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return "", fmt.Errorf("want HOST:PORT or a bare name (letters, digits, '-', '_', '.')")
		}
	}
	return label + ":" + bareNamePort, nil
}

// parseEntries parses "LABEL=W[,LABEL=W...]"; "=W" may be omitted (weight 1).
// flagName is used in errors so that they name the flag and the value.
func parseEntries(flagName, s string) ([]entry, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usagef("--%s is required", flagName)
	}
	var out []entry
	seen := map[string]int{}
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, usagef("--%s %q: entry %d is empty", flagName, s, i+1)
		}
		label, w, hasWeight := strings.Cut(item, "=")
		e := entry{label: strings.TrimSpace(label), weight: 1}
		if e.label == "" {
			return nil, usagef("--%s %q: entry %q has no name before '='", flagName, s, item)
		}
		if hasWeight {
			n, err := strconv.Atoi(strings.TrimSpace(w))
			if err != nil {
				return nil, usagef("--%s %q: weight %q of %q is not an integer", flagName, s, w, e.label)
			}
			if n < 1 {
				return nil, usagef("--%s %q: weight %d of %q must be at least 1", flagName, s, n, e.label)
			}
			e.weight = n
		}
		if j, dup := seen[e.label]; dup {
			return nil, usagef("--%s %q: %q appears twice (entries %d and %d)", flagName, s, e.label, j+1, i+1)
		}
		seen[e.label] = i
		out = append(out, e)
	}
	return out, nil
}

// parseLabels parses a comma-separated list of labels that must each name an
// entry; it returns their positions.
func parseLabels(flagName, s string, entries []entry) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, label := range strings.Split(s, ",") {
		label = strings.TrimSpace(label)
		found := -1
		for i, e := range entries {
			if e.label == label {
				found = i
				break
			}
		}
		if found < 0 {
			return nil, usagef("--%s %q: %q is not in --backends", flagName, s, label)
		}
		out = append(out, found)
	}
	return out, nil
}

// caddyNames are the names of lbpack's Caddy policies that differ from
// core's strategy names (Caddy owns least_conn and ip_hash). Both programs
// accept both names; the Caddy host shows these.
var caddyNames = map[string]string{
	core.LeastConn: "weighted_least_conn",
	core.IPHash:    "nginx_ip_hash",
}

// canonical returns core's name of a strategy given by either name.
func canonical(strategy string) string {
	for coreName, caddyName := range caddyNames {
		if strategy == caddyName {
			return coreName
		}
	}
	return strategy
}

// shown returns a strategy's name as the running host says it.
func shown(strategy string) string {
	if n, ok := caddyNames[strategy]; ok && running.CaddyNames {
		return n
	}
	return strategy
}

// strategyList lists the strategies by the running host's names, sorted,
// each other name in parentheses.
func strategyList() string {
	var out []string
	for _, s := range core.Strategies() {
		name := shown(s)
		if n, ok := caddyNames[s]; ok {
			other := n
			if name == n {
				other = s
			}
			name += " (or " + other + ")"
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// checkStrategy refuses a --strategy that no name of a strategy matches.
func checkStrategy(strategy string) error {
	for _, s := range core.Strategies() {
		if canonical(strategy) == s {
			return nil
		}
	}
	return usagef("--strategy %q: unknown (want one of %s)", strategy, strategyList())
}

// common holds the flags every subcommand shares: the backend set and the
// options passed through to core.Config.
type common struct {
	strategy   string
	backends   string
	down       string
	backup     string
	hashMode   string
	loadFactor float64
	stagger    bool
	twoChoices bool
	decayTime  time.Duration
	seed       uint64
	seedSet    bool
	n          int

	// names are the --backends labels by backend index, once
	// strategyConfig has parsed them: what the output calls the backends.
	names []string
}

// register adds the flags of common to fs. withStrategy is false for compare,
// which runs every strategy.
func (c *common) register(fs *flag.FlagSet, withStrategy bool, defaultN int) {
	if withStrategy {
		fs.StringVar(&c.strategy, "strategy", "", "strategy `name` (one of "+strategyList()+")")
	}
	fs.StringVar(&c.backends, "backends", "", "backends as `HOST:PORT=W[,NAME=W...]`: addresses or bare names (a stands for a:80); =W may be omitted (weight 1)")
	fs.StringVar(&c.down, "down", "", "backends marked down, as `HOST:PORT|NAME[,...]` as --backends names them")
	fs.IntVar(&c.n, "n", defaultN, "number of picks")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the random source (random strategies, stagger, two choices, fair); pick is unseeded unless it is given")
}

// registerOptions adds the per-strategy options of core.Config to fs.
func (c *common) registerOptions(fs *flag.FlagSet) {
	fs.StringVar(&c.backup, "backup", "", "backup backends, as `HOST:PORT|NAME[,...]` as --backends names them")
	fs.StringVar(&c.hashMode, "hash-mode", "", "url_hash `mode`: ketama (default), modulo, maglev or bounded")
	fs.Float64Var(&c.loadFactor, "load-factor", 0, "bounded mode's load `factor` c (default 1.25)")
	fs.BoolVar(&c.stagger, "stagger", false, "start smooth_wrr or gcd_wrr at a random point of the period")
	fs.BoolVar(&c.twoChoices, "two-choices", false, "least_conn: better of two random backends")
	fs.DurationVar(&c.decayTime, "decay-time", 0, "fair's latency decay `time` (default 10s)")
}

// parse runs fs over args and checks what every subcommand needs. It marks
// whether --seed was given, so that an unseeded run can stay truly random.
func (c *common) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "seed" {
			c.seedSet = true
		}
	})
	if c.n < 1 {
		return usagef("-n %d: must be at least 1", c.n)
	}
	return nil
}

// rand returns a seeded random source for core.Config.Rand, or nil (core's
// own source) when no seed was given and seeded is false.
func (c *common) rand(seeded bool) func() uint64 {
	if !c.seedSet && !seeded {
		return nil
	}
	return rand.New(rand.NewPCG(c.seed, 0x6c627061636b)).Uint64
}

// config builds the core.Config for strategy over entries, whose labels are
// the addresses. --down and --backup are applied by label.
func (c *common) config(strategy string, entries []entry, addrs []string) (core.Config, error) {
	backends := make([]core.Backend, len(entries))
	for i, e := range entries {
		backends[i] = core.Backend{Address: addrs[i], Weight: e.weight}
	}
	down, err := parseLabels("down", c.down, entries)
	if err != nil {
		return core.Config{}, err
	}
	for _, i := range down {
		backends[i].Down = true
	}
	backup, err := parseLabels("backup", c.backup, entries)
	if err != nil {
		return core.Config{}, err
	}
	for _, i := range backup {
		backends[i].Backup = true
	}
	return core.Config{
		Strategy:   canonical(strategy),
		Backends:   backends,
		HashMode:   c.hashMode,
		LoadFactor: c.loadFactor,
		Stagger:    c.stagger,
		TwoChoices: c.twoChoices,
		DecayTime:  c.decayTime,
	}, nil
}

// strategyConfig checks that --strategy was given and builds the core
// configuration of --backends for it: the start of pick and simulate.
func (c *common) strategyConfig() (core.Config, []entry, error) {
	if err := required("strategy", c.strategy); err != nil {
		return core.Config{}, nil, err
	}
	if err := checkStrategy(c.strategy); err != nil {
		return core.Config{}, nil, err
	}
	entries, addrs, err := addresses(c.backends)
	if err != nil {
		return core.Config{}, nil, err
	}
	c.names = labels(entries)
	cfg, err := c.config(c.strategy, entries, addrs)
	return cfg, entries, err
}

// byAddress re-keys m from --backends labels (c.names) to the addresses of
// cfg's backends, which core and the simulation know them by.
func byAddress[V any](m map[string]V, c *common, cfg core.Config) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for i, name := range c.names {
		if v, ok := m[name]; ok {
			out[cfg.Backends[i].Address] = v
		}
	}
	return out
}

// addresses parses --backends whose labels are addresses or bare names and
// returns the entries with the address of each (see addressOf).
func addresses(s string) ([]entry, []string, error) {
	entries, err := parseEntries("backends", s)
	if err != nil {
		return nil, nil, err
	}
	addrs := make([]string, len(entries))
	seen := map[string]string{}
	for i, e := range entries {
		a, err := addressOf(e.label)
		if err != nil {
			return nil, nil, usagef("--backends %q: address %q: %v", s, e.label, err)
		}
		if other, dup := seen[a]; dup {
			return nil, nil, usagef("--backends %q: %q and %q are the same backend %s (a bare name stands for NAME:%s)", s, other, e.label, a, bareNamePort)
		}
		seen[a] = e.label
		addrs[i] = a
	}
	return entries, addrs, nil
}

// labels returns the entries' labels, in order: the names output shows.
func labels(entries []entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.label
	}
	return out
}

// newBalancer builds a balancer; core's own validation errors are bad input.
func newBalancer(cfg core.Config) (*core.Balancer, error) {
	b, err := core.New(cfg)
	if err != nil {
		return nil, &usageError{err.Error()}
	}
	return b, nil
}

// keyed reports whether a strategy (by either name) picks by key, read
// from standard input.
func keyed(strategy string) bool {
	strategy = canonical(strategy)
	return strategy == core.IPHash || strategy == core.URLHash
}

// lineReader reads keys one per line. A line ends at "\n" or "\r\n"; the
// rest, spaces included, is the key. A last line without a newline counts.
type lineReader struct {
	r *bufio.Reader
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// buffered reports whether a next line may be read without blocking on the
// underlying reader.
func (l *lineReader) buffered() bool { return l.r.Buffered() > 0 }

// next returns the next line, or io.EOF after the last one.
func (l *lineReader) next() (string, error) {
	line, err := l.r.ReadString('\n')
	if err == io.EOF && line == "" {
		return "", io.EOF
	}
	if err != nil && err != io.EOF {
		return "", err
	}
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	return line, nil
}

// keysFrom reads a --keys file: one key per line, at least one.
func keysFrom(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, usagef("--keys %q: %v", file, err)
	}
	defer f.Close()
	keys, err := readKeys(f)
	if err != nil {
		return nil, usagef("--keys %q: %v", file, err)
	}
	if len(keys) == 0 {
		return nil, usagef("--keys %q: no keys in the file", file)
	}
	return keys, nil
}

// readKeys reads every line of r.
func readKeys(r io.Reader) ([]string, error) {
	l := newLineReader(r)
	var keys []string
	for {
		k, err := l.next()
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
}
