package bench

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestSimulation(t *testing.T) {
	res, err := RunSimulation()
	if err != nil {
		t.Fatal(err)
	}
	models := SimModels()
	for s, sc := range Scenarios {
		if len(res[s]) != len(models) {
			t.Fatalf("%s: %d results, want one per model (%d)", sc.Name, len(res[s]), len(models))
		}
		for i, r := range res[s] {
			if r.Model != models[i].Name || len(r.Latencies) != sc.Requests {
				t.Fatalf("%s: result %d is %q with %d latencies", sc.Name, i, r.Model, len(r.Latencies))
			}
			sum := 0.0
			for _, sh := range r.Shares {
				sum += sh
			}
			if math.Abs(sum-1) > 1e-9 || r.P50 > r.P99 || r.P50 <= 0 {
				t.Errorf("%s %s: shares sum to %v, p50 %v p99 %v", sc.Name, r.Model, sum, r.P50, r.P99)
			}
		}
	}
	get := func(scenario int, model string) SimResult {
		for _, r := range res[scenario] {
			if r.Model == model {
				return r
			}
		}
		t.Fatalf("%s: no result for %s", Scenarios[scenario].Name, model)
		return SimResult{}
	}
	// One slow backend: the latency-aware strategies cut round robin's p99
	// by more than half, and fair still sends the slow backend over 1%.
	rr, lc, fair := get(0, "lbpack round_robin"), get(0, "lbpack least_conn"), get(0, "lbpack fair")
	if fair.P99 > rr.P99/2 || lc.P99 > rr.P99/2 {
		t.Errorf("slow backend: p99 fair %v least_conn %v round_robin %v", fair.P99, lc.P99, rr.P99)
	}
	if fair.P99 > lc.P99 {
		t.Errorf("slow backend: fair p99 %v above least_conn's %v", fair.P99, lc.P99)
	}
	if fair.Shares[4] < 0.01 {
		t.Errorf("slow backend: fair sent it %.2f%%, want at least 1%% (no starvation)", 100*fair.Shares[4])
	}
	// The Traefik model reproduces the reported starvation of a slow server.
	if tr := get(0, "Traefik leasttime (model)"); tr.Shares[4] > 0.005 {
		t.Errorf("Traefik leasttime model sent the slow backend %.2f%%; the model should starve it", 100*tr.Shares[4])
	}
	// Heterogeneous weights: smooth_wrr's shares are exact (30000 picks are
	// whole periods of 8).
	sw := get(2, "lbpack smooth_wrr")
	for i, want := range []float64{0.5, 0.25, 0.125, 0.125} {
		if math.Abs(sw.Shares[i]-want) > 1e-12 {
			t.Errorf("heterogeneous: smooth_wrr share of %s %.4f, want %.4f", letter(i), sw.Shares[i], want)
		}
	}
	var buf bytes.Buffer
	WriteSimulation(&buf, res, "cmd")
	for _, m := range models {
		if strings.Count(buf.String(), m.Name) < len(Scenarios) {
			t.Errorf("simulation.md lacks rows for %s", m.Name)
		}
	}
}

// TestSimulationDeterministic: one seed, one outcome.
func TestSimulationDeterministic(t *testing.T) {
	for _, m := range SimModels() {
		a, err := Simulate(Scenarios[1], m, 7)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Simulate(Scenarios[1], m, 7)
		if a.P99 != b.P99 || a.Duration != b.Duration {
			t.Errorf("%s: two runs differ: p99 %v/%v", m.Name, a.P99, b.P99)
		}
	}
}

// TestCaddyLeastConnModel: ties are broken at random among the least loaded only.
func TestCaddyLeastConnModel(t *testing.T) {
	m := SimModels()
	var build SimModel
	for _, x := range m {
		if x.Name == "Caddy least_conn (model)" {
			build = x
		}
	}
	p, err := build.Build([]int{1, 1, 1, 1}, newSeeded(3), func() time.Duration { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	p.Start(0)
	p.Start(2)
	seen := map[int]int{}
	for i := 0; i < 400; i++ {
		seen[p.Pick()]++
	}
	if seen[0] != 0 || seen[2] != 0 || seen[1] < 150 || seen[3] < 150 {
		t.Fatalf("picks %v: want only 1 and 3, about evenly", seen)
	}
}

// TestTraefikLeastTimeModel: the lowest mean×(1+in flight)/weight wins;
// means are whole milliseconds of the last 100 samples.
func TestTraefikLeastTimeModel(t *testing.T) {
	lt := newTraefikLeastTime([]int{1, 1})
	// No samples: both score 0, and ties go by earliest deadline (deadlines
	// start at 1 and 2; the first of equal deadlines wins).
	var got []int
	for i := 0; i < 7; i++ {
		got = append(got, lt.Pick())
	}
	if fmt.Sprint(got) != "[0 0 1 0 1 0 1]" {
		t.Fatalf("cold ties: %v, want [0 0 1 0 1 0 1]", got)
	}
	lt.Start(0)
	lt.Done(0, 900*time.Microsecond) // counts as 0 ms
	lt.Start(1)
	lt.Done(1, 5*time.Millisecond)
	for i := 0; i < 10; i++ {
		if p := lt.Pick(); p != 0 {
			t.Fatalf("pick %d = %d: backend 0 scores 0 and must win", i, p)
		}
	}
}

// newSeeded returns a deterministic random source.
func newSeeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
