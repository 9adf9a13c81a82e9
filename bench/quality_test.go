package bench

import (
	"bytes"
	"math"
	"net"
	"strings"
	"testing"
)

func TestMeasureSmoothness(t *testing.T) {
	// weights 2,1: a a b a a b ... has runs of 2 and never strays a whole pick.
	seq := []int{0, 0, 1, 0, 0, 1, 0, 0, 1}
	sm := MeasureSmoothness(seq, []int{2, 1})
	if sm.First != "a a b a a b a a b" || sm.LongestRun != 2 {
		t.Fatalf("first %q run %d", sm.First, sm.LongestRun)
	}
	// Window "a a" (k=2): a has 2 against 4/3; b has 0 against 2/3.
	if math.Abs(sm.MaxDev-2.0/3) > 1e-9 {
		t.Fatalf("max dev %v, want 2/3", sm.MaxDev)
	}
	if sm.ShareErr > 1e-9 {
		t.Fatalf("share error %v, want 0", sm.ShareErr)
	}
	// A burst: a a a a b b b b under equal weights strays by 2.
	if sm := MeasureSmoothness([]int{0, 0, 0, 0, 1, 1, 1, 1}, []int{1, 1}); sm.LongestRun != 4 || math.Abs(sm.MaxDev-2) > 1e-9 {
		t.Fatalf("burst: run %d dev %v", sm.LongestRun, sm.MaxDev)
	}
}

func TestSmoothnessTable(t *testing.T) {
	rows, err := RunSmoothness(Subjects())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]SmoothRow{}
	for _, r := range rows {
		if len(r.BySet) != len(SmoothSets) {
			t.Fatalf("%s: %d weight sets, want %d", r.Subject.Name, len(r.BySet), len(SmoothSets))
		}
		by[r.Subject.Name] = r
	}
	want := map[string]string{
		"Caddy weighted_round_robin": "a a a a b b b c c a", // Caddy's counter starts at 1
		"O(n) smooth WRR, one mutex": "a b c a a b a c b a", // nginx's order
		"expanded-list WRR":          "a a a a a b b b c c",
	}
	if registered("smooth_wrr") {
		want["lbpack smooth_wrr"] = "a b c a a b a c b a"
	}
	for name, first := range want {
		r, ok := by[name]
		if !ok {
			t.Fatalf("row %q missing", name)
		}
		if r.BySet[0].First != first {
			t.Errorf("%s: first picks %q, want %q", name, r.BySet[0].First, first)
		}
	}
	// nginx's smooth order never strays a backend by more than about one pick
	// per window; Caddy's strays by w(1-w/W) = 2.5 for a in 5,3,2.
	if r := by["O(n) smooth WRR, one mutex"]; r.BySet[0].MaxDev > 1.0+1e-9 || r.BySet[0].LongestRun != 2 {
		t.Errorf("textbook smooth 5,3,2: dev %.2f run %d", r.BySet[0].MaxDev, r.BySet[0].LongestRun)
	}
	if r := by["Caddy weighted_round_robin"]; math.Abs(r.BySet[0].MaxDev-2.5) > 1e-9 || r.BySet[0].LongestRun != 5 {
		t.Errorf("Caddy 5,3,2: dev %.2f run %d, want 2.5 and 5", r.BySet[0].MaxDev, r.BySet[0].LongestRun)
	}
	var buf bytes.Buffer
	WriteQuality(&buf, rows, nil, "cmd")
	var subjects []Subject
	for _, r := range rows {
		subjects = append(subjects, r.Subject)
	}
	checkRows(t, buf.String(), subjects)
}

// checkRows fails the test unless the page md has a table row for every
// subject.
func checkRows(t *testing.T, md string, subjects []Subject) {
	t.Helper()
	for _, s := range subjects {
		if !strings.Contains(md, "| "+boldIf(s)+" |") {
			t.Errorf("quality.md has no row for %s", s.Name)
		}
	}
}

// TestSmoothMatchesTextbook: lbpack's smooth_wrr makes exactly the choices of
// the textbook O(n) nginx algorithm, pick for pick, for every weight set.
func TestSmoothMatchesTextbook(t *testing.T) {
	lb, ok := FindSubject("lbpack smooth_wrr")
	if !ok {
		t.Fatal("lbpack smooth_wrr: not registered in core")
	}
	naive, _ := FindSubject("O(n) smooth WRR, one mutex")
	for _, set := range append(SmoothSets, WeightSet{"1..5 x 20", Weights(100)}) {
		a, err := Sequence(lb, set.Weights, 3000)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Sequence(naive, set.Weights, 3000)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("weights %s: pick %d: lbpack %d, textbook %d", set.Name, i, a[i], b[i])
			}
		}
	}
}

func TestHashQualityTable(t *testing.T) {
	rows, err := RunHashQuality(Subjects(), 20000)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]HashQuality{}
	for _, q := range rows {
		names[q.Subject.Name] = q
		for _, n := range QualitySizes {
			if q.Balance[n] < 1 {
				t.Errorf("%s n=%d: max/mean %.3f below 1", q.Subject.Name, n, q.Balance[n])
			}
		}
	}
	for _, want := range []string{"Caddy uri_hash", "stathat/consistent", "serialx/hashring", "dgryski/go-jump", "sorted ring, 16 replicas"} {
		if _, ok := names[want]; !ok {
			t.Errorf("row %q missing", want)
		}
	}
	// Consistent schemes move about 1/n of the keys; rendezvous and jump are
	// exact up to sampling. Modulo moves most keys.
	for _, name := range []string{"Caddy uri_hash", "dgryski/go-jump", "lbpack url_hash ketama", "lbpack url_hash maglev"} {
		q, ok := names[name]
		if !ok {
			continue // an lbpack mode not registered yet
		}
		for _, n := range QualitySizes {
			if q.Leave[n] > 1/float64(n)+0.02 {
				t.Errorf("%s n=%d: %.2f%% of keys moved on leave, want about %.2f%%", name, n, 100*q.Leave[n], 100/float64(n))
			}
		}
	}
	if q, ok := names["lbpack url_hash modulo"]; ok && q.Leave[10] < 0.5 {
		t.Errorf("modulo n=10 moved only %.2f%% of keys on leave", 100*q.Leave[10])
	}
	// Hot keys: the bounded mode keeps every backend within ceil(1.25 × mean)
	// in flight; a plain ring does not.
	if q, ok := names["lbpack url_hash bounded"]; ok {
		if q.HotLoad > 1.26 {
			t.Errorf("bounded: hot-key load %.2f × mean, want at most 1.26", q.HotLoad)
		}
		if k := names["lbpack url_hash ketama"]; k.HotLoad <= q.HotLoad {
			t.Errorf("ketama's hot-key load %.2f not above bounded's %.2f", k.HotLoad, q.HotLoad)
		}
	}
	if q := names["dgryski/go-jump"]; q.Memory[1000] != 0 {
		t.Errorf("jump hash retains %d bytes; it has no state", q.Memory[1000])
	}
	var buf bytes.Buffer
	WriteQuality(&buf, nil, rows, "cmd")
	var subjects []Subject
	for _, q := range rows {
		subjects = append(subjects, q.Subject)
	}
	checkRows(t, buf.String(), subjects)
}

// TestKeySets: the key sets are what they claim to be.
func TestKeySets(t *testing.T) {
	seen := map[string]bool{}
	for _, ip := range ClientIPs(QualityKeys) {
		if net.ParseIP(ip) == nil {
			t.Fatalf("client IP %q does not parse", ip)
		}
		if seen[ip] {
			t.Fatalf("client IP %q twice", ip)
		}
		seen[ip] = true
	}
	for i, k := range URLKeys(1000) {
		if len(k) < 28 || len(k) > 36 || k[0] != '/' {
			t.Fatalf("URL key %d %q: want a ~32-byte path", i, k)
		}
	}
}
