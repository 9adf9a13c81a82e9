package caddyplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/lbpack/lbpack/internal/lbsim"
)

func init() {
	lbsim.AdaptCaddyfile = adaptCaddyfile
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "lbpack",
		Usage: "<command> [flags]   (caddy lbpack <command> -h for its flags)",
		Short: "Shows what lbpack's policies pick, and converts nginx configurations (" + commandNames() + ")",
		Long:  commandHelp(),
		CobraFunc: func(cmd *cobra.Command) {
			// The subcommands parse their own flags.
			cmd.DisableFlagParsing = true
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				if code := lbsim.Caddy.Run(args, os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
					os.Exit(code) // the subcommand has reported the problem
				}
				return nil
			}
		},
	})
}

// commandNames lists the subcommands: "pick, trace, ...".
func commandNames() string {
	var names []string
	for _, c := range lbsim.Commands() {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// commandHelp is the long help: the subcommands and an example.
func commandHelp() string {
	var b strings.Builder
	b.WriteString(`
Runs lbpack's strategies outside any server: the backends a policy picks,
the step table of a weighted round robin, every strategy side by side, a
simulation with given latencies; and converts an nginx configuration to a
Caddyfile, Caddy JSON or Traefik's configuration. --strategy takes the lbpack policy names of
the Caddyfile (smooth_wrr, gcd_wrr, url_hash, fair, weighted_least_conn,
nginx_ip_hash) and also core's least_conn and ip_hash; --backends takes
addresses (10.0.0.1:80=5) or bare names (a=5, which stands for a:80).

Commands:
`)
	for _, c := range lbsim.Commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", c.Name, c.Summary)
	}
	b.WriteString(`
For example

	caddy lbpack trace --strategy smooth_wrr --backends a=5,b=3,c=2 -n 10

prints nginx's smooth weighted round robin step by step,

	echo 192.0.2.7 | caddy lbpack pick --strategy nginx_ip_hash --backends 10.0.0.1:80,10.0.0.2:80

prints the upstream lb_policy nginx_ip_hash sends that client to, and

	caddy lbpack convert /etc/nginx/nginx.conf > Caddyfile

converts an nginx configuration (warnings on standard error).`)
	return b.String()
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
