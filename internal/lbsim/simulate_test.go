package lbsim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/sim"
)

const fiveBackends = "127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083,127.0.0.1:8084,127.0.0.1:8085"

// Round robin over five backends with fixed latencies, one of them 10x
// slower: each gets exactly a fifth of 1000 requests, so 800 answers take
// 10ms and 200 take 100ms: p50 10ms, p90 (the 900th) 100ms, mean 28ms.
func TestSimulateRoundRobin(t *testing.T) {
	code, stdout, stderr := lbsim(t, "", "simulate", "--strategy", "round_robin", "--backends", fiveBackends,
		"--latency", "10ms,127.0.0.1:8085=100ms", "-n", "1000")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	head, body, _ := strings.Cut(stdout, "\n")
	if want := "round_robin: 1000 requests, 10 concurrent clients, seed 1, "; !strings.HasPrefix(head, want) {
		t.Errorf("first line %q, want prefix %q", head, want)
	}
	want := `p50   10ms
p90   100ms
p99   100ms
mean  28ms
max   100ms
backend         weight  latency  requests  share
127.0.0.1:8081  1       10ms     200       20.00%
127.0.0.1:8082  1       10ms     200       20.00%
127.0.0.1:8083  1       10ms     200       20.00%
127.0.0.1:8084  1       10ms     200       20.00%
127.0.0.1:8085  1       100ms    200       20.00%
`
	if body != want {
		t.Errorf("got\n%s\nwant\n%s", body, want)
	}
}

// simFigure runs simulate and returns one latency figure and the printed
// share of one backend.
func simFigure(t *testing.T, figure, backend string, args ...string) (time.Duration, string) {
	t.Helper()
	code, stdout, stderr := lbsim(t, "", append([]string{"simulate"}, args...)...)
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	var d time.Duration
	share := ""
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == figure {
			var err error
			if d, err = time.ParseDuration(f[1]); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		}
		if len(f) == 5 && f[0] == backend {
			share = f[4]
		}
	}
	if d == 0 || share == "" {
		t.Fatalf("no %s or no share of %s in\n%s", figure, backend, stdout)
	}
	return d, share
}

// The target, end to end on a fixed seed: one of five backends 10x
// slower; fair's p99 is at most half of round robin's and no more than
// least_conn's, and the slow backend is not starved (it gets requests).
func TestSimulateSlowBackend(t *testing.T) {
	args := func(strategy string) []string {
		return []string{"--strategy", strategy, "--backends", fiveBackends,
			"--latency", "exp:10ms,127.0.0.1:8085=exp:100ms", "-n", "20000", "--seed", "1"}
	}
	rr, _ := simFigure(t, "p99", "127.0.0.1:8085", args("round_robin")...)
	lc, _ := simFigure(t, "p99", "127.0.0.1:8085", args("least_conn")...)
	fair, share := simFigure(t, "p99", "127.0.0.1:8085", args("fair")...)
	t.Logf("p99: round_robin %v, least_conn %v, fair %v; fair's share of the slow backend %s", rr, lc, fair, share)
	if fair > rr/2 {
		t.Errorf("fair p99 %v > half of round robin's %v", fair, rr)
	}
	if fair > lc {
		t.Errorf("fair p99 %v > least_conn's %v", fair, lc)
	}
	if p, err := strconv.ParseFloat(strings.TrimSuffix(share, "%"), 64); err != nil || p <= 0 {
		t.Errorf("slow backend's share %s, want some requests", share)
	}
}

// One seed, one result; another seed, other samples.
func TestSimulateSeed(t *testing.T) {
	args := func(seed string) []string {
		return []string{"simulate", "--strategy", "least_conn", "--backends", fiveBackends,
			"--latency", "exp:10ms", "-n", "2000", "--seed", seed}
	}
	_, a, _ := lbsim(t, "", args("3")...)
	_, b, _ := lbsim(t, "", args("3")...)
	_, c, _ := lbsim(t, "", args("4")...)
	if a != b {
		t.Errorf("seed 3 twice:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("seeds 3 and 4 gave the same run:\n%s", a)
	}
}

// Open loop, keys from a file (one key: one backend), and a backend down.
func TestSimulateOptions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("/only/key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := lbsim(t, "", "simulate", "--strategy", "url_hash", "--hash-mode", "maglev",
		"--backends", "127.0.0.1:8081,127.0.0.1:8082", "--latency", "5ms", "--keys", file, "--rate", "100", "-n", "300")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "100 requests/s arriving at random") {
		t.Errorf("no open-loop settings in\n%s", stdout)
	}
	if !strings.Contains(stdout, "300       100.00%") || !strings.Contains(stdout, "0         0.00%") {
		t.Errorf("one key should send every request to one backend:\n%s", stdout)
	}

	code, stdout, stderr = lbsim(t, "", "simulate", "--strategy", "smooth_wrr", "--backends", "127.0.0.1:8081=3,127.0.0.1:8082",
		"--down", "127.0.0.1:8081", "--latency", "uniform:1ms-3ms", "-n", "100")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "127.0.0.1:8081  3       uniform:1ms-3ms (down)  0         0.00%") {
		t.Errorf("down backend got requests:\n%s", stdout)
	}
}

func TestSimulateBadInput(t *testing.T) {
	base := []string{"simulate", "--strategy", "round_robin", "--backends", "127.0.0.1:8081,127.0.0.1:8082"}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"missing latency", nil, []string{"--latency is required"}},
		{"unknown backend", []string{"--latency", "10ms,127.0.0.1:9999=5ms"}, []string{"--latency", `"127.0.0.1:9999" is not in --backends`}},
		{"bad distribution", []string{"--latency", "127.0.0.1:8081=gauss:5ms,10ms"}, []string{"--latency", `"gauss"`}},
		{"bad duration", []string{"--latency", "10 parsecs"}, []string{"--latency", `"10 parsecs"`}},
		{"backend without latency", []string{"--latency", "127.0.0.1:8081=5ms"}, []string{"--latency", `no distribution for "127.0.0.1:8082"`}},
		{"two defaults", []string{"--latency", "5ms,exp:5ms"}, []string{"--latency", "two distributions"}},
		{"latency twice", []string{"--latency", "127.0.0.1:8081=5ms,127.0.0.1:8081=6ms,1ms"}, []string{"--latency", `"127.0.0.1:8081" appears twice`}},
		{"concurrency 0", []string{"--latency", "5ms", "--concurrency", "0"}, []string{"--concurrency 0"}},
		{"rate and concurrency", []string{"--latency", "5ms", "--concurrency", "3", "--rate", "10"}, []string{"--rate 10 and --concurrency 3"}},
		{"negative rate", []string{"--latency", "5ms", "--rate", "-1"}, []string{"--rate -1"}},
		{"non-numeric seed", []string{"--latency", "5ms", "--seed", "x"}, []string{`"x"`, "-seed"}},
		{"negative workers", []string{"--latency", "5ms", "--workers", "-2"}, []string{"--workers -2"}},
		{"slowdown without factor", []string{"--latency", "5ms", "--slowdown", "127.0.0.1:8081=10@0s-1s"}, []string{"--slowdown", `"10@0s-1s"`, "Fx@D1-D2"}},
		{"slowdown empty window", []string{"--latency", "5ms", "--slowdown", "127.0.0.1:8081=10x@2s-1s"}, []string{"--slowdown", "window 2s-1s is empty"}},
		{"slowdown unknown backend", []string{"--latency", "5ms", "--slowdown", "127.0.0.1:9=10x@every:1s"}, []string{"--slowdown", `"127.0.0.1:9" is not in --backends`}},
		{"slowdown bare", []string{"--latency", "5ms", "--slowdown", "10x@every:1s"}, []string{"--slowdown", "want HOST:PORT=VALUE"}},
		{"errors over 100%", []string{"--latency", "5ms", "--errors", "127.0.0.1:8082=150%"}, []string{"--errors", `"150%"`, "0% to 100%"}},
		{"errors bad dist", []string{"--latency", "5ms", "--errors", "127.0.0.1:8082=5%:soon"}, []string{"--errors", `"5%:soon"`, "duration"}},
		{"classes not 100%", []string{"--latency", "5ms", "--classes", "90%:1,5%:100"}, []string{"--classes", "add up to 95%"}},
		{"classes bad cost", []string{"--latency", "5ms", "--classes", "100%:x"}, []string{"--classes", `cost "x"`}},
		{"balancers 0", []string{"--latency", "5ms", "--balancers", "0"}, []string{"--balancers 0"}},
		{"policies without scenario", []string{"--latency", "5ms", "--policies", "oracle"}, []string{`--policies "oracle": only with --scenario`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := lbsim(t, "", append(append([]string{}, base...), tt.args...)...)
			if code != 2 || stdout != "" {
				t.Errorf("exit status %d, stdout %q; want 2 and nothing", code, stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not contain %q", stderr, w)
				}
			}
		})
	}
}

// A scenario prints one row per policy, the same for a seed, and fair's
// targets; --policies picks rows, -n shortens the run, --svg draws it.
func TestSimulateScenario(t *testing.T) {
	code, list, stderr := lbsim(t, "", "simulate", "--scenario", "list")
	if code != 0 || !strings.HasPrefix(list, "slow           One backend 10x slower\n") || strings.Count(list, "\n") != len(sim.Scenarios()) {
		t.Fatalf("list: exit %d %s\n%s", code, stderr, list)
	}
	code, a, stderr := lbsim(t, "", "simulate", "--scenario", "failing", "-n", "3000")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	_, b, _ := lbsim(t, "", "simulate", "--scenario", "failing", "-n", "3000")
	_, c, _ := lbsim(t, "", "simulate", "--scenario", "failing", "-n", "3000", "--seed", "2")
	if a != b || a == c {
		t.Errorf("seed 1 twice differs, or seeds 1 and 2 agree:\n%s\n%s", a, c)
	}
	lines := strings.Split(a, "\n")
	if lines[0] != "scenario failing: A backend that fails fast (seed 1)" ||
		strings.Join(strings.Fields(lines[2]), " ") != "policy p50 p99 mean req/s errors a b c d e" {
		t.Errorf("head:\n%s\n%s", lines[0], lines[2])
	}
	for _, name := range []string{"lbpack fair", "Traefik leasttime", "Caddy least_conn", "Caddy random_choose 2", "nginx least_conn",
		"nginx least_time", "nginx least_time inflight", "HAProxy leastconn", "Envoy LEAST_REQUEST", "Finagle p2c peak EWMA", "oracle"} {
		if !strings.Contains(a, "\n"+name+"  ") {
			t.Errorf("no row for %s in\n%s", name, a)
		}
	}
	// The oracle never sends to the failing backend: no errors, e 0.0%.
	for _, l := range lines {
		if strings.HasPrefix(l, "oracle ") && (!strings.Contains(l, " 0.00% ") || !strings.HasSuffix(l, " 0.0%")) {
			t.Errorf("oracle row %q: want no errors and nothing on e", l)
		}
	}
	for _, want := range []string{"targets: fair p99 <= 1.05 x best peer: ", "targets: fair e (failing) <= 5% of requests: "} {
		if !strings.Contains(a, want) {
			t.Errorf("no %q line in\n%s", want, a)
		}
	}

	// all: every scenario's table and targets, one after another.
	code, all, stderr := lbsim(t, "", "simulate", "--scenario", "all", "-n", "1000", "--policies", "lbpack fair,HAProxy leastconn")
	if code != 0 || strings.Count(all, "\nscenario ") != len(sim.Scenarios())-1 || strings.Count(all, "targets: fair p99 <= 1.05 x best peer: ") != len(sim.Scenarios()) {
		t.Errorf("all: exit %d %s\n%s", code, stderr, all)
	}

	svg := filepath.Join(t.TempDir(), "cdf.svg")
	code, out, stderr := lbsim(t, "", "simulate", "--scenario", "slow", "-n", "2000", "--policies", "lbpack fair, oracle", "--svg", svg)
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	if strings.Count(out, "\n") != 3+2+1 || !strings.Contains(out, "\nlbpack fair ") || !strings.Contains(out, "\noracle ") ||
		!strings.Contains(out, "This run: -n 2000 requests.") || !strings.HasSuffix(out, "\ntargets: none checked (they need the lbpack fair row and a peer's)\n") {
		t.Errorf("two policies, no peer so no targets:\n%s", out)
	}
	data, err := os.ReadFile(svg)
	if err != nil || !strings.HasPrefix(string(data), "<svg ") || strings.Count(string(data), "<polyline") != 4 {
		t.Errorf("svg: %v, %d bytes", err, len(data))
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "slo"}, `--scenario: unknown scenario "slo"`},
		{[]string{"--scenario", "slow", "--backends", "127.0.0.1:8081"}, "--scenario slow and --backends: the scenario sets the backends"},
		{[]string{"--scenario", "slow", "--workers", "2"}, "--scenario slow and --workers"},
		{[]string{"--scenario", "slow", "--policies", "fair"}, `--policies "fair": no policy "fair"`},
		{[]string{"--scenario", "all", "--svg", "x.svg"}, `--scenario all and --svg "x.svg"`},
	}
	for _, c := range bad {
		code, stdout, stderr := lbsim(t, "", append([]string{"simulate"}, c.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// --workers makes backends queue: one backend serving one request at a
// time, two clients, 10 ms each: every request but the first waits 10 ms.
func TestSimulateWorkers(t *testing.T) {
	code, stdout, stderr := lbsim(t, "", "simulate", "--strategy", "round_robin", "--backends", "127.0.0.1:8081",
		"--latency", "10ms", "--workers", "1", "--concurrency", "2", "-n", "100")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "\np50   20ms\n") || !strings.Contains(stdout, "1s simulated") {
		t.Errorf("queueing:\n%s", stdout)
	}
}

// --slowdown, --errors, --classes and --balancers: round robin over two
// backends of constant latency, exact figures.
func TestSimulateBehaviour(t *testing.T) {
	code, stdout, stderr := lbsim(t, "", "simulate", "--strategy", "round_robin", "--backends", "127.0.0.1:8081,127.0.0.1:8082",
		"--latency", "10ms", "--concurrency", "1", "-n", "1000",
		"--slowdown", "127.0.0.1:8081=3x@0s-1s", "--errors", "127.0.0.1:8082=100%:1ms")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	// One client: a (30ms while slow, then 10ms) and b (an error in 1ms)
	// take turns, 31ms a round; a's requests sent at 0, 31ms ... 992ms,
	// 33 of them, take 30ms, its other 467 10ms: mean 11.32ms.
	want := `errors 500 (50.00% of the answers; the figures below are of the 500 successes)
p50   10ms
p90   10ms
p99   30ms
mean  11.32ms
max   30ms
backend         weight  latency               requests  share
127.0.0.1:8081  1       10ms slow 3x@0s-1s    500       50.00%
127.0.0.1:8082  1       10ms errors 100%:1ms  500       50.00%
`
	if _, body, _ := strings.Cut(stdout, "\n"); body != want {
		t.Errorf("got\n%s\nwant\n%s", body, want)
	}

	code, stdout, stderr = lbsim(t, "", "simulate", "--strategy", "round_robin", "--backends", "127.0.0.1:8081,127.0.0.1:8082",
		"--latency", "1ms", "--concurrency", "1", "-n", "2000", "--classes", "90%:1,10%:50", "--balancers", "2")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "\np50   1ms\n") || !strings.Contains(stdout, "\np99   50ms\n") {
		t.Errorf("classes:\n%s", stdout)
	}
}
