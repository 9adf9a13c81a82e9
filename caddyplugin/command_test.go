package caddyplugin

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/lbpack/lbpack/internal/lbsim"
)

// runCaddyLbpack runs `caddy lbpack args...` through Caddy's command
// registry and returns what it printed. A failing command would exit the
// test binary, as it exits Caddy: the error paths are lbsim's tests.
func runCaddyLbpack(t *testing.T, args ...string) (string, string) {
	t.Helper()
	c, ok := caddycmd.Commands()["lbpack"]
	if !ok {
		t.Fatal("no caddy lbpack command")
	}
	cmd := &cobra.Command{Use: c.Name}
	c.CobraFunc(cmd)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.RunE(cmd, args); err != nil {
		t.Fatalf("caddy lbpack %v: %v", args, err)
	}
	return out.String(), errOut.String()
}

// `caddy lbpack trace` prints exactly what `lbsim trace` prints.
func TestCaddyLbpackTrace(t *testing.T) {
	for _, args := range [][]string{
		{"trace", "--strategy", "smooth_wrr", "--backends", "a=5,b=3,c=2", "-n", "10"},
		{"trace", "--strategy", "gcd_wrr", "--backends", "a=5,b=3,c=2"},
	} {
		got, _ := runCaddyLbpack(t, args...)
		var want bytes.Buffer
		if code := lbsim.Run(args, nil, &want, io.Discard); code != 0 {
			t.Fatalf("lbsim %v: exit %d", args, code)
		}
		if got != want.String() {
			t.Errorf("caddy lbpack %v printed\n%s\nlbsim printed\n%s", args, got, want.String())
		}
		if args[2] == "smooth_wrr" && !strings.HasSuffix(got, "sequence: a b c a a b a c b a\n") {
			t.Errorf("caddy lbpack %v printed\n%s", args, got)
		}
	}
}

// `caddy lbpack` speaks Caddy's policy names and its own name, and takes
// bare backend names in pick.
func TestCaddyLbpackNames(t *testing.T) {
	out, _ := runCaddyLbpack(t, "pick", "--strategy", "weighted_least_conn", "--backends", "a=5,b=3,c=2")
	if got := strings.Join(strings.Fields(out), " "); got != "a b c a a b a c b a" {
		t.Errorf("pick weighted_least_conn a=5,b=3,c=2 (idle: smooth weighted): %s", got)
	}
	out, _ = runCaddyLbpack(t, "help")
	if !strings.HasPrefix(out, "usage: caddy lbpack COMMAND") || strings.Contains(out, "lbsim") {
		t.Errorf("caddy lbpack help:\n%s", out)
	}
	_, errOut := runCaddyLbpack(t, "pick", "-h")
	for _, want := range []string{"usage: caddy lbpack pick", "weighted_least_conn (or least_conn)", "nginx_ip_hash (or ip_hash)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("caddy lbpack pick -h lacks %q:\n%s", want, errOut)
		}
	}
	c := caddycmd.Commands()["lbpack"]
	for _, text := range []string{c.Usage, c.Short, c.Long} {
		if strings.Contains(text, "lbsim") {
			t.Errorf("caddy lbpack's help says lbsim: %q", text)
		}
	}
	for _, sub := range lbsim.Commands() {
		if !strings.Contains(c.Long, "  "+sub.Name+" ") || !strings.Contains(c.Short, sub.Name) {
			t.Errorf("caddy lbpack's help does not list %s:\n%s\n%s", sub.Name, c.Short, c.Long)
		}
	}
}

// `caddy lbpack convert` writes proxy_next_upstream's statuses as the
// policy's fail_status, and the result loads in Caddy.
func TestCaddyLbpackConvertFailStatus(t *testing.T) {
	dir := t.TempDir()
	conf := "http {\nupstream u { server 10.0.0.1:80; server 10.0.0.2:80 max_fails=3; }\n" +
		"upstream v { least_time header; server 10.0.0.3:80; server 10.0.0.4:80; }\n" +
		"server { listen 8080; location / { proxy_next_upstream error http_502 http_503 http_429; proxy_pass http://u; }\n" +
		"location /v/ { proxy_next_upstream error http_500 http_429; proxy_pass http://v; } }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := runCaddyLbpack(t, "convert", filepath.Join(dir, "nginx.conf"))
	for _, want := range []string{"fail_status 502 503 429\n", "fail_status 5xx 429\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("converted Caddyfile lacks %q:\n%s", want, out)
		}
	}
	cfg, err := adapt(t, out)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, out)
	}
	if err := validate(cfg); err != nil {
		t.Errorf("the converted Caddyfile does not load: %v\n%s", err, out)
	}
}
