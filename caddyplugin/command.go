package caddyplugin

import (
	"os"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/lbpack/lbpack/internal/lbsim"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "lbpack",
		Usage: "trace --strategy smooth_wrr|gcd_wrr --backends a=5,b=3,c=2 [-n N] | pick | compare | simulate ...",
		Short: "Runs lbpack's lbsim tools, such as the step table of smooth_wrr",
		Long: `
Runs the lbsim command line built into this Caddy: the same subcommands,
flags and output as lbsim. For example

	caddy lbpack trace --strategy smooth_wrr --backends a=5,b=3,c=2 -n 10

prints nginx's smooth weighted round robin step by step.`,
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
