package lbsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// compareRows runs compare and returns each row's cells after the label,
// keyed by the label. Every strategy must have a row.
func compareRows(t *testing.T, args ...string) map[string][]string {
	t.Helper()
	code, stdout, stderr := lbsim(t, "", append([]string{"compare"}, args...)...)
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	rows := map[string][]string{}
	labels := []string{"ideal"}
	for _, v := range variants() {
		labels = append(labels, v.label)
	}
	for _, line := range strings.Split(stdout, "\n") {
		for _, l := range labels {
			if rest, ok := strings.CutPrefix(line, l+" "); ok {
				// "least_conn" must not take the "least_conn two_choices" row.
				if strings.HasPrefix(rest, " ") {
					rows[l] = strings.Fields(rest)
				}
			}
		}
	}
	for _, l := range labels[1:] {
		if rows[l] == nil {
			t.Errorf("no row for %q in\n%s", l, stdout)
		}
	}
	return rows
}

// Every strategy gets a row of figures; the deterministic schedules' figures
// are exact. Weights 6,3,1: smooth_wrr picks a b a a b a c a b a, whose
// worst window (b a c a b: two a where 3 are due) is off by 1.00 and whose
// longest run is 2; gcd_wrr picks a a a a b a b a b c, whose first four picks
// have 4 a where 2.4 are due (1.60) and whose longest run is 4.
func TestCompare(t *testing.T) {
	rows := compareRows(t, "--backends", "127.0.0.1:8081=6,127.0.0.1:8082=3,127.0.0.1:8083=1", "-n", "1000")
	if got, want := strings.Join(rows["ideal"], " "), "60.00% 30.00% 10.00%"; got != want {
		t.Errorf("ideal row %q, want %q", got, want)
	}
	for label, cells := range rows {
		if label == "ideal" {
			continue
		}
		// 3 shares, "N.NN pt", max dev, longest run, ns/pick
		if len(cells) != 8 || cells[4] != "pt" || !strings.HasSuffix(cells[0], "%") {
			t.Errorf("%s: row %q", label, cells)
		}
	}
	exact := map[string]string{
		"smooth_wrr": "60.00% 30.00% 10.00% 0.00 pt 1.00 2",
		"gcd_wrr":    "60.00% 30.00% 10.00% 0.00 pt 1.60 4",
		// Idle least_conn ties everywhere and shares out by smooth_wrr.
		"least_conn": "60.00% 30.00% 10.00% 0.00 pt 1.00 2",
		// Unweighted rotation: a third each, never twice in a row.
		"round_robin": "33.40% 33.30% 33.30% 26.60 pt 3.00 1",
	}
	for label, want := range exact {
		if got := strings.Join(rows[label][:7], " "); got != want {
			t.Errorf("%s: %q, want %q", label, got, want)
		}
	}
}

// ip_hash and url_hash hash the keys of --keys: one key means one backend.
func TestCompareKeysFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("192.0.2.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rows := compareRows(t, "--backends", "127.0.0.1:8081=1,127.0.0.1:8082=1", "-n", "50", "--keys", file)
	for label, cells := range rows {
		if !strings.HasPrefix(label, "ip_hash") && !strings.HasPrefix(label, "url_hash") {
			continue
		}
		shares := cells[0] + " " + cells[1]
		if shares != "100.00% 0.00%" && shares != "0.00% 100.00%" {
			t.Errorf("%s: shares %s, want all on one backend", label, shares)
		}
		if cells[5] != "50" {
			t.Errorf("%s: longest run %s, want 50", label, cells[5])
		}
	}
}

// Beyond a few backends the shares columns give way to the worst error. Nine
// equal backends in rotation: a window of one pick holds one backend where
// 1/9 is due, a window of eight misses one where 8/9 is due: 0.89.
func TestCompareManyBackends(t *testing.T) {
	var b []string
	for i := range maxShareColumns + 1 {
		b = append(b, "127.0.0.1:"+string(rune('1'+i))+"0")
	}
	rows := compareRows(t, "--backends", strings.Join(b, ","), "-n", "90")
	if got := strings.Join(rows["smooth_wrr"][:4], " "); got != "0.00 pt 0.89 1" {
		t.Errorf("smooth_wrr over 9 equal backends: %q", got)
	}
	if rows["ideal"] != nil {
		t.Errorf("ideal row %q, want none", rows["ideal"])
	}
}

func TestWindowDeviation(t *testing.T) {
	tests := []struct {
		seq    []int
		window int
		share  float64
		want   float64
	}{
		{[]int{0, 0, 0, 0, 1, 0, 1, 0, 1, 2}, 10, 0.6, 1.6},
		{[]int{0, 1, 0, 0, 1, 0, 2, 0, 1, 0}, 10, 0.6, 1.0},
		{[]int{1, 1, 1, 1, 0}, 2, 0.5, 1.0}, // two 1s in a row where one is due
		{[]int{1, 1, 1, 1, 0}, 4, 0.5, 2.0},
		{[]int{0}, 1, 1, 0},
	}
	for _, tt := range tests {
		got := windowDeviation(tt.seq, 0, tt.window, tt.share)
		if d := got - tt.want; d > 1e-9 || d < -1e-9 {
			t.Errorf("windowDeviation(%v, window %d, share %v) = %v, want %v", tt.seq, tt.window, tt.share, got, tt.want)
		}
	}
}
