package caddyplugin

import (
	"bytes"
	"io"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/lbpack/lbpack/internal/lbsim"
)

// `caddy lbpack trace` prints exactly what `lbsim trace` prints.
func TestCaddyLbpackTrace(t *testing.T) {
	c, ok := caddycmd.Commands()["lbpack"]
	if !ok {
		t.Fatal("no caddy lbpack command")
	}
	cmd := &cobra.Command{Use: c.Name}
	c.CobraFunc(cmd)
	for _, args := range [][]string{
		{"trace", "--strategy", "smooth_wrr", "--backends", "a=5,b=3,c=2", "-n", "10"},
		{"trace", "--strategy", "gcd_wrr", "--backends", "a=5,b=3,c=2"},
	} {
		var got, want bytes.Buffer
		cmd.SetOut(&got)
		if err := cmd.RunE(cmd, args); err != nil {
			t.Fatalf("caddy lbpack %v: %v", args, err)
		}
		if code := lbsim.Run(args, nil, &want, io.Discard); code != 0 {
			t.Fatalf("lbsim %v: exit %d", args, code)
		}
		if got.String() != want.String() {
			t.Errorf("caddy lbpack %v printed\n%s\nlbsim printed\n%s", args, got.String(), want.String())
		}
		if args[2] == "smooth_wrr" && !strings.HasSuffix(got.String(), "sequence: a b c a a b a c b a\n") {
			t.Errorf("caddy lbpack %v printed\n%s", args, got.String())
		}
	}
}
