package lbsim

import (
	"bufio"
	"fmt"
	"io"

	"github.com/lbpack/lbpack/core"
)

// runPick prints the backends a fresh balancer picks: N picks, or one per key
// read from stdin for the hash strategies.
func runPick(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("pick", "--strategy NAME --backends HOST:PORT=W|NAME=W[,...] [--down HOST:PORT|NAME[,...]] [--hash-mode MODE] [-n N]", stderr)
	c.register(fs, true, 10)
	c.registerOptions(fs)
	if err := parseFlags(&c, fs, args); err != nil {
		return err
	}
	cfg, entries, err := c.strategyConfig()
	if err != nil {
		return err
	}
	cfg.Rand = c.rand(false)
	b, err := newBalancer(cfg)
	if err != nil {
		return err
	}

	names := labels(entries)
	out := bufio.NewWriter(stdout)
	if !keyed(c.strategy) {
		for range c.n {
			if err := pickOne(b, names, "", out); err != nil {
				out.Flush()
				return err
			}
		}
		return out.Flush()
	}
	keys := newLineReader(stdin)
	for {
		// Answer what has been asked before waiting for more input, so that
		// a script may talk to lbsim one key at a time.
		if !keys.buffered() {
			if err := out.Flush(); err != nil {
				return err
			}
		}
		key, err := keys.next()
		if err == io.EOF {
			return out.Flush()
		}
		if err != nil {
			out.Flush()
			return fmt.Errorf("reading keys: %v", err)
		}
		if err := pickOne(b, names, key, out); err != nil {
			out.Flush()
			return err
		}
	}
}

// pickOne picks once for key and prints the chosen backend as --backends
// names it (names, by backend index).
func pickOne(b *core.Balancer, names []string, key string, out *bufio.Writer) error {
	i := pickNow(b, key)
	if i < 0 {
		return core.ErrNoBackend
	}
	out.WriteString(names[i])
	return out.WriteByte('\n')
}
