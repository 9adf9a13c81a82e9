package lbsim

import (
	"strings"
	"testing"
)

func TestTrace(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			// nginx's smooth pass worked by hand: add each weight to its
			// current weight, choose the largest (the earliest on a tie),
			// take the total (10) from the chosen one.
			name: "smooth_wrr 5,3,2",
			args: []string{"--strategy", "smooth_wrr", "--backends", "a=5,b=3,c=2", "-n", "10"},
			want: `smooth_wrr, weights a=5 b=3 c=2: current weights of [a b c]
request  before      chosen  after
1        [ 0  0  0]  a       [-5  3  2]
2        [-5  3  2]  b       [ 0 -4  4]
3        [ 0 -4  4]  c       [ 5 -1 -4]
4        [ 5 -1 -4]  a       [ 0  2 -2]
5        [ 0  2 -2]  a       [-5  5  0]
6        [-5  5  0]  b       [ 0 -2  2]
7        [ 0 -2  2]  a       [-5  1  4]
8        [-5  1  4]  c       [ 0  4 -4]
9        [ 0  4 -4]  b       [ 5 -3 -2]
10       [ 5 -3 -2]  a       [ 0  0  0]
sequence: a b c a a b a c b a
`,
		},
		{
			// The same with b down: b keeps its current weight 0 and the
			// total is 7.
			name: "smooth_wrr 5,3,2 b down",
			args: []string{"--strategy", "smooth_wrr", "--backends", "a=5,b=3,c=2", "--down", "b", "-n", "3"},
			want: `smooth_wrr, weights a=5 b=3 c=2: current weights of [a b c]
request  before     chosen  after
1        [ 0 0  0]  a       [-2 0  2]
2        [-2 0  2]  c       [ 3 0 -3]
3        [ 3 0 -3]  a       [ 1 0 -1]
sequence: a c a
`,
		},
		{
			// LVS: cw starts at 0; passing the first backend lowers it by
			// the gcd (1), wrapping to the largest weight (6) at 0 or below;
			// the next backend whose weight is at least cw is chosen.
			name: "gcd_wrr 6,3,1",
			args: []string{"--strategy", "gcd_wrr", "--backends", "a=6,b=3,c=1"},
			want: `gcd_wrr, weights a=6 b=3 c=1: the scheduler's current weight cw
request  cw before  chosen  cw after
1        0          a       6
2        6          a       5
3        5          a       4
4        4          a       3
5        3          b       3
6        3          a       2
7        2          b       2
8        2          a       1
9        1          b       1
10       1          c       1
sequence: a a a a b a b a b c
`,
		},
		{
			name: "host:port names",
			args: []string{"--strategy", "smooth_wrr", "--backends", "10.0.0.1:80=2,[::1]:8080", "-n", "3"},
			want: `smooth_wrr, weights 10.0.0.1:80=2 [::1]:8080=1: current weights of [10.0.0.1:80 [::1]:8080]
request  before   chosen       after
1        [ 0  0]  10.0.0.1:80  [-1  1]
2        [-1  1]  [::1]:8080   [ 1 -1]
3        [ 1 -1]  10.0.0.1:80  [ 0  0]
sequence: 10.0.0.1:80 [::1]:8080 10.0.0.1:80
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := lbsim(t, "", append([]string{"trace"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit status %d: %s", code, stderr)
			}
			if stdout != tt.want {
				t.Errorf("got\n%s\nwant\n%s", stdout, tt.want)
			}
		})
	}
}

// The trace's sequence is the sequence pick prints for the same weights.
func TestTraceMatchesPick(t *testing.T) {
	for _, s := range []string{"smooth_wrr", "gcd_wrr"} {
		_, trace, _ := lbsim(t, "", "trace", "--strategy", s, "--backends", "a=7,b=5,c=1,d=3", "-n", "32")
		_, pick, _ := lbsim(t, "", "pick", "--strategy", s, "--backends", "127.0.0.1:8081=7,127.0.0.1:8082=5,127.0.0.1:8083=1,127.0.0.1:8084=3", "-n", "32")
		_, seq, ok := strings.Cut(trace, "sequence: ")
		if !ok {
			t.Fatalf("%s: no sequence in\n%s", s, trace)
		}
		if want := lines(seq); pick != want || len(want) == 0 {
			t.Errorf("%s: pick printed\n%s\ntrace's sequence is\n%s", s, pick, want)
		}
	}
}
