package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lbpack/lbpack/sim"
)

// The simulation page has every scenario, every contender's row in each,
// fair's targets and a chart per scenario.
func TestWriteSimulation(t *testing.T) {
	runs, err := RunSimulation()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != len(sim.Scenarios()) {
		t.Fatalf("%d runs for %d scenarios", len(runs), len(sim.Scenarios()))
	}
	var buf bytes.Buffer
	WriteSimulation(&buf, runs, "cmd")
	page := buf.String()
	for _, r := range runs {
		for _, want := range []string{"## " + r.Scenario.Name + ": ", "--scenario " + r.Scenario.Name + " ", "(" + simChart(r.Scenario) + ")",
			"[" + r.Scenario.Name + "](#" + anchor(r.Scenario) + ")"} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
	}
	for _, c := range sim.Contenders() {
		if n := strings.Count(page, "| "+c.Name+" |") + strings.Count(page, "| **"+c.Name+"** |") + strings.Count(page, "| *"+c.Name+"* |"); n != len(runs) {
			t.Errorf("%s: %d rows, want one per scenario (%d)", c.Name, n, len(runs))
		}
	}
	if n := strings.Count(page, "- fair, p99 <= 1.05 x best peer: "); n != len(runs) {
		t.Errorf("%d p99 target lines, want %d", n, len(runs))
	}
	// The recovery scenario has its column.
	if !strings.Contains(page, "| e at 90% after |") {
		t.Error("recovery table lacks its column")
	}

	dir := t.TempDir()
	if err := ChartSimulation(dir, runs[:1]); err != nil {
		t.Fatal(err)
	}
}

func TestAnchor(t *testing.T) {
	sc := sim.Scenario{Name: "mixed-cost", Title: "Identical backends, mixed request costs"}
	if got, want := anchor(sc), "mixed-cost-identical-backends-mixed-request-costs"; got != want {
		t.Errorf("anchor %q, want %q", got, want)
	}
}
