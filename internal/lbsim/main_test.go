package lbsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lbsim runs the command in-process and returns its exit status and output.
func lbsim(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	code = Run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// Every kind of bad input exits non-zero, prints nothing on stdout, and says
// on stderr which flag or value is wrong.
func TestBadInput(t *testing.T) {
	const three = "127.0.0.1:8081=5,127.0.0.1:8082=3,127.0.0.1:8083=2"
	missingKeys := filepath.Join(t.TempDir(), "missing")
	emptyKeys := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyKeys, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want []string // every one must appear in stderr
	}{
		{"no command", nil, 2, []string{"usage: lbsim"}},
		{"unknown command", []string{"pik"}, 2, []string{`unknown command "pik"`}},
		{"unknown strategy", []string{"pick", "--strategy", "nope", "--backends", three}, 2, []string{`strategy "nope"`, "unknown"}},
		{"missing strategy", []string{"pick", "--backends", three}, 2, []string{"--strategy is required"}},
		{"weight 0", []string{"pick", "--strategy", "round_robin", "--backends", "127.0.0.1:8081=0"}, 2, []string{"--backends", `"127.0.0.1:8081=0"`, "weight 0"}},
		{"negative weight", []string{"pick", "--strategy", "round_robin", "--backends", "127.0.0.1:8081=-3"}, 2, []string{"--backends", "weight -3"}},
		{"weight not a number", []string{"pick", "--strategy", "round_robin", "--backends", "127.0.0.1:8081=five"}, 2, []string{"--backends", `weight "five"`}},
		{"malformed backend", []string{"pick", "--strategy", "round_robin", "--backends", "localhost:=2"}, 2, []string{"--backends", `address "localhost:"`, "port"}},
		{"malformed bare name", []string{"pick", "--strategy", "round_robin", "--backends", "a,b/c"}, 2, []string{"--backends", `address "b/c"`, "HOST:PORT or a bare name"}},
		{"name and its address", []string{"pick", "--strategy", "round_robin", "--backends", "a=2,a:80"}, 2, []string{"--backends", `"a" and "a:80" are the same backend a:80`}},
		{"unknown strategy lists both names", []string{"pick", "--strategy", "nginx_least_conn", "--backends", "a,b"}, 2, []string{`--strategy "nginx_least_conn": unknown`, "least_conn (or weighted_least_conn)", "ip_hash (or nginx_ip_hash)"}},
		{"down not a bare name", []string{"pick", "--strategy", "smooth_wrr", "--backends", "a,b", "--down", "a:80"}, 2, []string{"--down", `"a:80" is not in --backends`}},
		{"bad port", []string{"pick", "--strategy", "round_robin", "--backends", "127.0.0.1:99999"}, 2, []string{"--backends", `"127.0.0.1:99999"`, "port"}},
		{"empty entry", []string{"pick", "--strategy", "round_robin", "--backends", "127.0.0.1:8081,,127.0.0.1:8082"}, 2, []string{"--backends", "entry 2 is empty"}},
		{"duplicate backend", []string{"pick", "--strategy", "round_robin", "--backends", "127.0.0.1:8081,127.0.0.1:8081=2"}, 2, []string{"--backends", `"127.0.0.1:8081" appears twice`}},
		{"missing backends", []string{"pick", "--strategy", "round_robin"}, 2, []string{"--backends is required"}},
		{"down not a backend", []string{"pick", "--strategy", "round_robin", "--backends", three, "--down", "127.0.0.1:9999"}, 2, []string{"--down", `"127.0.0.1:9999" is not in --backends`}},
		{"unknown flag", []string{"pick", "--strategy", "round_robin", "--backends", three, "--frobnicate"}, 2, []string{"frobnicate"}},
		{"non-numeric n", []string{"pick", "--strategy", "round_robin", "--backends", three, "-n", "ten"}, 2, []string{`"ten"`, "-n"}},
		{"n zero", []string{"pick", "--strategy", "round_robin", "--backends", three, "-n", "0"}, 2, []string{"-n 0"}},
		{"stray argument", []string{"pick", "--strategy", "round_robin", "--backends", three, "extra"}, 2, []string{`unexpected argument "extra"`}},
		{"hash mode on smooth", []string{"pick", "--strategy", "smooth_wrr", "--backends", three, "--hash-mode", "maglev"}, 2, []string{`hash_mode "maglev"`}},
		{"unknown hash mode", []string{"pick", "--strategy", "url_hash", "--backends", three, "--hash-mode", "rendezvous"}, 2, []string{`"rendezvous"`}},
		{"backup with ip_hash", []string{"pick", "--strategy", "ip_hash", "--backends", three, "--backup", "127.0.0.1:8083"}, 2, []string{"backup", "ip_hash"}},
		{"two choices on smooth_wrr", []string{"pick", "--strategy", "smooth_wrr", "--backends", three, "--two-choices"}, 2, []string{"two_choices", `"smooth_wrr"`}},
		{"load factor on ketama", []string{"pick", "--strategy", "url_hash", "--backends", three, "--load-factor", "1.5"}, 2, []string{"load_factor 1.5"}},
		{"stagger on random", []string{"pick", "--strategy", "random", "--backends", three, "--stagger"}, 2, []string{"stagger", `"random"`}},
		{"trace of a hash strategy", []string{"trace", "--strategy", "ip_hash", "--backends", "a=1,b=2"}, 2, []string{`--strategy "ip_hash"`}},
		{"trace weight 0", []string{"trace", "--strategy", "smooth_wrr", "--backends", "a=5,b=0"}, 2, []string{"--backends", "weight 0", `"b"`}},
		{"trace missing backends", []string{"trace", "--strategy", "smooth_wrr"}, 2, []string{"--backends is required"}},
		{"compare missing backends", []string{"compare"}, 2, []string{"--backends is required"}},
		{"compare missing keys file", []string{"compare", "--backends", three, "--keys", missingKeys}, 2, []string{"--keys", missingKeys}},
		{"compare empty keys file", []string{"compare", "--backends", three, "--keys", emptyKeys}, 2, []string{"--keys", "no keys"}},
		{"compare all down", []string{"compare", "--backends", "127.0.0.1:1,127.0.0.1:2", "--down", "127.0.0.1:1,127.0.0.1:2"}, 2, []string{"--down", "every backend is down"}},
		{"no backend available", []string{"pick", "--strategy", "smooth_wrr", "--backends", "127.0.0.1:1", "--down", "127.0.0.1:1"}, 1, []string{"no backend available"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := lbsim(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d (stderr: %s)", code, tt.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not contain %q", stderr, w)
				}
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := lbsim(t, "", "help")
	if code != 0 {
		t.Fatalf("exit status %d", code)
	}
	for _, c := range commands {
		if !strings.Contains(stdout, c.name) {
			t.Errorf("usage does not list %q:\n%s", c.name, stdout)
		}
	}
	code, _, stderr := lbsim(t, "", "pick", "-h")
	if code != 0 || !strings.Contains(stderr, "-backends") {
		t.Errorf("pick -h: exit status %d, stderr %q", code, stderr)
	}
}

// The Caddy host speaks as "caddy lbpack" and lists Caddy's policy names;
// lbsim keeps its own name and core's.
func TestHostNames(t *testing.T) {
	run := func(h Host, args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := h.Run(args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	tests := []struct {
		host   Host
		args   []string
		code   int
		stream int // 1 stdout, 2 stderr
		want   []string
	}{
		{Caddy, []string{"help"}, 0, 1, []string{"usage: caddy lbpack COMMAND [flags]   (caddy lbpack COMMAND -h for its flags)"}},
		{Caddy, nil, 2, 2, []string{"usage: caddy lbpack COMMAND"}},
		{Caddy, []string{"pik"}, 2, 2, []string{`caddy lbpack: unknown command "pik"`}},
		{Caddy, []string{"pick", "--strategy", "smooth_wrr"}, 2, 2, []string{"caddy lbpack pick: --backends is required"}},
		{Caddy, []string{"pick", "-h"}, 0, 2, []string{"usage: caddy lbpack pick --strategy NAME", "weighted_least_conn (or least_conn)", "nginx_ip_hash (or ip_hash)"}},
		{Caddy, []string{"pick", "--strategy", "nope", "--backends", "a"}, 2, 2, []string{`caddy lbpack pick: --strategy "nope": unknown (want one of fair, gcd_wrr, nginx_ip_hash (or ip_hash), random, round_robin, smooth_wrr, url_hash, weighted_least_conn (or least_conn), weighted_random)`}},
		{Caddy, []string{"trace", "--strategy", "nginx_ip_hash", "--backends", "a"}, 2, 2, []string{`caddy lbpack trace: --strategy "nginx_ip_hash": trace shows smooth_wrr or gcd_wrr`}},
		{Lbsim, []string{"pick", "-h"}, 0, 2, []string{"usage: lbsim pick --strategy NAME", "least_conn (or weighted_least_conn)", "ip_hash (or nginx_ip_hash)"}},
		{Lbsim, []string{"pick", "--strategy", "smooth_wrr"}, 2, 2, []string{"lbsim pick: --backends is required"}},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(tt.host, tt.args...)
		got := stdout
		if tt.stream == 2 {
			got = stderr
		}
		if code != tt.code {
			t.Errorf("%s %v: exit status %d, want %d (stderr %q)", tt.host.Name, tt.args, code, tt.code, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s %v: output %q lacks %q", tt.host.Name, tt.args, got, w)
			}
		}
		if tt.host.Name == "caddy lbpack" && strings.Contains(stdout+stderr, "lbsim") {
			t.Errorf("%s %v: says lbsim: %q", tt.host.Name, tt.args, stdout+stderr)
		}
	}
}
