package lbsim

import (
	"strings"
	"testing"
)

// A trace longer than its schedule's period (the total weight; gcd_wrr's
// after its first pick) repeats that period: printed exactly as the whole
// trace (these outputs are the earlier lbsim's, which kept every step).
func TestTraceLong(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--strategy", "smooth_wrr", "--backends", "a=1,b=2", "-n", "12"}, `smooth_wrr, weights a=1 b=2: current weights of [a b]
request  before   chosen  after
1        [ 0  0]  b       [ 1 -1]
2        [ 1 -1]  a       [-1  1]
3        [-1  1]  b       [ 0  0]
4        [ 0  0]  b       [ 1 -1]
5        [ 1 -1]  a       [-1  1]
6        [-1  1]  b       [ 0  0]
7        [ 0  0]  b       [ 1 -1]
8        [ 1 -1]  a       [-1  1]
9        [-1  1]  b       [ 0  0]
10       [ 0  0]  b       [ 1 -1]
11       [ 1 -1]  a       [-1  1]
12       [-1  1]  b       [ 0  0]
sequence: b a b b a b b a b b a b
`},
		{[]string{"--strategy", "gcd_wrr", "--backends", "a=3,b=1", "-n", "14"}, `gcd_wrr, weights a=3 b=1: the scheduler's current weight cw
request  cw before  chosen  cw after
1        0          a       3
2        3          a       2
3        2          a       1
4        1          b       1
5        1          a       3
6        3          a       2
7        2          a       1
8        1          b       1
9        1          a       3
10       3          a       2
11       2          a       1
12       1          b       1
13       1          a       3
14       3          a       2
sequence: a a a b a a a b a a a b a a
`},
		{[]string{"--strategy", "smooth_wrr", "--backends", "a=2,b=5,c=1", "--down", "b", "-n", "11"}, `smooth_wrr, weights a=2 b=5 c=1: current weights of [a b c]
request  before     chosen  after
1        [ 0 0  0]  a       [-1 0  1]
2        [-1 0  1]  c       [ 1 0 -1]
3        [ 1 0 -1]  a       [ 0 0  0]
4        [ 0 0  0]  a       [-1 0  1]
5        [-1 0  1]  c       [ 1 0 -1]
6        [ 1 0 -1]  a       [ 0 0  0]
7        [ 0 0  0]  a       [-1 0  1]
8        [-1 0  1]  c       [ 1 0 -1]
9        [ 1 0 -1]  a       [ 0 0  0]
10       [ 0 0  0]  a       [-1 0  1]
11       [-1 0  1]  c       [ 1 0 -1]
sequence: a c a a c a a c a a c
`},
	} {
		code, got, stderr := lbsim(t, "", append([]string{"trace"}, c.args...)...)
		if code != 0 || got != c.want {
			t.Errorf("%v: exit %d, stderr %s; got\n%s\nwant\n%s", c.args, code, stderr, got, c.want)
		}
	}

	// A period too long to keep is refused, naming -n and the bound.
	code, out, stderr := lbsim(t, "", "trace", "--strategy", "smooth_wrr", "--backends", "a=1000000,b=999999", "-n", "3000000")
	want := "lbsim trace: -n 3000000: the schedule over these weights repeats every 1999999 picks, too long to keep with a trace of more than 524288 picks: give -n at most 524288\n"
	if code != 2 || out != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, stderr, want)
	}
}

// simulate refuses what it cannot simulate, naming the flags and values:
// a service time past the simulation's limit, alone or by a cost class, a
// run that lasts past it, and more requests than it keeps latencies of.
func TestSimulateLimits(t *testing.T) {
	base := []string{"simulate", "--strategy", "smooth_wrr", "--backends", "a,b"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--latency", "10ms", "--classes", "50%:1,50%:1e300"},
			`lbsim simulate: --classes "50%:1,50%:1e300": a cost of 1e+300 times a's mean service time 10ms is past the simulation's limit of 291h16m16s` + "\n"},
		{[]string{"--latency", "1000h", "-n", "100"},
			`lbsim simulate: --latency "1000h": a's mean service time 1000h0m0s is past the simulation's limit of 291h16m16s` + "\n"},
		{[]string{"--latency", "100h", "-n", "100"},
			"lbsim simulate: --latency 100h -n 100: sim: scenario: server 0 (a:80): a service time at 200h0m0s would take 100h0m0s: past the simulation's limit (291h16m16s, 1048576 windows of 1s)\n"},
		{[]string{"--latency", "exp:10ms", "--rate", "1e-9", "-n", "3"},
			"lbsim simulate: --latency exp:10ms -n 3 --rate 1e-09: sim: scenario: the next arrival at 0s would take 164758h48m35.136971904s: past the simulation's limit (291h16m16s, 1048576 windows of 1s)\n"},
		{[]string{"--latency", "10ms", "-n", "16777217"},
			"lbsim simulate: -n 16777217: the simulation keeps every request's latency: at most 16777216 requests\n"},
	}
	for _, tt := range tests {
		code, out, stderr := lbsim(t, "", append(append([]string{}, base...), tt.args...)...)
		if code != 2 || out != "" || stderr != tt.want {
			t.Errorf("%v: exit %d, stdout %q, stderr\n%q\nwant 2 and\n%q", tt.args, code, out, stderr, tt.want)
		}
	}
	// Just within the limit: ten rounds of 29h.
	code, out, stderr := lbsim(t, "", append(append([]string{}, base...), "--latency", "29h", "-n", "100")...)
	if code != 0 || !strings.HasPrefix(out, "smooth_wrr: 100 requests, 10 concurrent clients, seed 1, 290h0m0s simulated\n") {
		t.Errorf("29h: exit %d, stderr %s, stdout\n%s", code, stderr, out)
	}
}
