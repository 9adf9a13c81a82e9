package caddyplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/lbpack/lbpack/internal/lbsim"
)

func init() {
	lbsim.AdaptCaddyfile = adaptCaddyfile
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "lbpack",
		Usage: "trace --strategy smooth_wrr|gcd_wrr --backends a=5,b=3,c=2 [-n N] | pick | compare | simulate | convert [--to caddyfile|json|traefik] NGINX.CONF ...",
		Short: "Runs lbpack's lbsim tools, such as the step table of smooth_wrr",
		Long: `
Runs the lbsim command line built into this Caddy: the same subcommands,
flags and output as lbsim. For example

	caddy lbpack trace --strategy smooth_wrr --backends a=5,b=3,c=2 -n 10

prints nginx's smooth weighted round robin step by step, and

	caddy lbpack convert /etc/nginx/nginx.conf > Caddyfile

converts an nginx configuration (warnings on standard error).`,
		CobraFunc: func(cmd *cobra.Command) {
			// lbsim parses its own flags.
			cmd.DisableFlagParsing = true
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				if code := lbsim.Run(args, os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
					os.Exit(code) // lbsim has reported the problem
				}
				return nil
			}
		},
	})
}

// adaptCaddyfile is Caddy's own caddyfile adapter, for convert --to json.
func adaptCaddyfile(body []byte, filename string) ([]byte, []string, error) {
	a := caddyconfig.GetAdapter("caddyfile")
	if a == nil {
		return nil, nil, errors.New("this Caddy has no caddyfile adapter")
	}
	js, warns, err := a.Adapt(body, map[string]any{"filename": filename})
	if err != nil {
		return nil, nil, err
	}
	var out []string
	for _, w := range warns {
		out = append(out, w.String())
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, js, "", "\t"); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), out, nil
}
