package lbsim

import (
	"regexp"
	"strings"
	"testing"
)

// compare and simulate take bare names too, and show them as written.
func TestBareNamesEverywhere(t *testing.T) {
	code, stdout, stderr := lbsim(t, "", "compare", "--backends", "a=5,b=3,c=2", "-n", "1000")
	if code != 0 {
		t.Fatalf("compare: exit status %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "\nstrategy ") || !regexpLine(stdout, `^strategy\s+a\s+b\s+c\s+worst share err`) {
		t.Errorf("compare: header does not name a b c:\n%s", stdout)
	}
	if !regexpLine(stdout, `^smooth_wrr\s+50\.00%\s+30\.00%\s+20\.00%`) {
		t.Errorf("compare: smooth_wrr row is not 50/30/20:\n%s", stdout)
	}

	code, stdout, stderr = lbsim(t, "", "simulate", "--strategy", "round_robin", "--backends", "a,b,10.0.0.3:80",
		"--latency", "10ms,b=100ms", "-n", "300")
	if code != 0 {
		t.Fatalf("simulate: exit status %d: %s", code, stderr)
	}
	for _, row := range []string{`^a\s+1\s+10ms\s+100\s+33\.33%$`, `^b\s+1\s+100ms\s+100\s+33\.33%$`, `^10\.0\.0\.3:80\s+1\s+10ms\s+100\s+33\.33%$`} {
		if !regexpLine(stdout, row) {
			t.Errorf("simulate: no row %s in\n%s", row, stdout)
		}
	}
	if !regexpLine(stdout, `^p90\s+100ms$`) {
		t.Errorf("simulate: b's 100ms latency did not reach the figures:\n%s", stdout)
	}
	// The per-backend behaviours name backends as --backends does too.
	code, stdout, stderr = lbsim(t, "", "simulate", "--strategy", "round_robin", "--backends", "a,b,c",
		"--latency", "10ms", "--errors", "b=50%", "-n", "300")
	if code != 0 || !regexpLine(stdout, `^b\s+1\s+10ms errors 50%\s+100\s+33\.33%$`) {
		t.Errorf("simulate --errors b=50%%: exit %d, stderr %s, stdout\n%s", code, stderr, stdout)
	}
}

// Caddy's names are shown in compare's rows under the Caddy host only.
func TestCompareHostNames(t *testing.T) {
	var lb, cd strings.Builder
	Lbsim.Run([]string{"compare", "--backends", "a,b", "-n", "100"}, nil, &lb, &lb)
	Caddy.Run([]string{"compare", "--backends", "a,b", "-n", "100"}, nil, &cd, &cd)
	for _, tt := range []struct {
		out  string
		want []string
	}{
		{lb.String(), []string{`^least_conn\s`, `^least_conn two_choices\s`, `^ip_hash\s`}},
		{cd.String(), []string{`^weighted_least_conn\s`, `^weighted_least_conn two_choices\s`, `^nginx_ip_hash\s`}},
	} {
		for _, w := range tt.want {
			if !regexpLine(tt.out, w) {
				t.Errorf("no row %s in\n%s", w, tt.out)
			}
		}
	}
}

// regexpLine reports whether some line of s matches the expression.
func regexpLine(s, expr string) bool {
	re := regexp.MustCompile(expr)
	for _, l := range strings.Split(s, "\n") {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}
