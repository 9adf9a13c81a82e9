package lbsim

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/lbpack/lbpack/internal/nginxconf"
)

// AdaptCaddyfile turns a Caddyfile into Caddy's JSON configuration, with
// Caddy's own warnings; convert --to json needs it. The Caddy plugin sets it
// (Caddy's caddyfile adapter needs lbpack's policies registered, which this
// package cannot import).
var AdaptCaddyfile func(caddyfile []byte, filename string) (json []byte, warnings []string, err error)

// runConvert converts an nginx configuration: the result on stdout, the
// warnings on stderr.
func runConvert(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("convert", "[--to caddyfile|json|traefik] FILE", stderr)
	to := fs.String("to", "caddyfile", "what to print: `caddyfile`, json (Caddy's JSON) or traefik (Traefik dynamic YAML)")
	// Flags may come after the file name, as scripts tend to write them.
	var files []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return flagError{err}
		}
		args = fs.Args()
		if len(args) > 0 {
			files = append(files, args[0])
			args = args[1:]
		}
	}
	if len(files) != 1 {
		return usagef("want one nginx configuration file, have %d", len(files))
	}
	switch *to {
	case "caddyfile", "json", "traefik":
	default:
		return usagef("--to %q: want caddyfile, json or traefik", *to)
	}
	cfg, err := nginxconf.LoadFile(files[0])
	if err != nil {
		return usagef("%v", err)
	}
	var out []byte
	var warnings []nginxconf.Warning
	if *to == "traefik" {
		out, warnings = cfg.Traefik()
	} else {
		out, warnings = cfg.Caddyfile()
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if *to == "json" {
		if AdaptCaddyfile == nil {
			return errors.New("--to json: this build has no Caddyfile adapter (build lbsim with the Caddy plugin)")
		}
		js, cw, err := AdaptCaddyfile(out, "Caddyfile")
		if err != nil {
			// The nginx configuration holds what Caddy refuses: bad input,
			// as a refusal of the converter's own would be.
			return usagef("adapting the converted Caddyfile: %v\n%s", err, out)
		}
		for _, w := range cw {
			fmt.Fprintf(stderr, "warning: Caddy: %s\n", w)
		}
		out = append(js, '\n')
	}
	_, err = stdout.Write(out)
	return err
}
