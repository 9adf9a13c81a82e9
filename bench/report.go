package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ReportCmd is the command that regenerates docs/, quoted in every page.
const ReportCmd = "cd bench && go run ./cmd/report"

// Parts of the report, for Report's only argument.
const (
	PartSelection = "selection"
	PartQuality   = "quality"
	PartSim       = "simulation"
	PartFleet     = "fleet"
)

// AllParts lists every part in the order they run.
var AllParts = []string{PartQuality, PartSim, PartFleet, PartSelection}

// Report regenerates the given parts of docs/ in dir: Markdown pages and
// their SVG charts. log receives progress lines.
func Report(dir string, parts []string, log func(string)) error {
	want := map[string]bool{}
	for _, p := range parts {
		want[p] = true
	}
	write := func(name string, fill func(*bytes.Buffer) error) error {
		var buf bytes.Buffer
		if err := fill(&buf); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		log("wrote " + name)
		return os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
	}
	subjects := Subjects()
	if want[PartQuality] {
		log("quality: smoothness and hashing")
		smooth, err := RunSmoothness(subjects)
		if err != nil {
			return err
		}
		hash, err := RunHashQuality(subjects, QualityKeys)
		if err != nil {
			return err
		}
		if err := ChartSmooth(filepath.Join(dir, "smoothness.svg")); err != nil {
			return err
		}
		if err := ChartHash(filepath.Join(dir, "hashing.svg"), hash); err != nil {
			return err
		}
		if err := write("quality.md", func(b *bytes.Buffer) error {
			WriteQuality(b, smooth, hash, ReportCmd)
			fmt.Fprintf(b, "![picks per backend over time, smooth_wrr vs Caddy weighted_round_robin](smoothness.svg)\n\n")
			fmt.Fprintf(b, "![balance vs disruption of the hash schemes](hashing.svg)\n")
			return nil
		}); err != nil {
			return err
		}
	}
	if want[PartSim] {
		log("simulation")
		runs, err := RunSimulation()
		if err != nil {
			return err
		}
		if err := ChartSimulation(dir, runs); err != nil {
			return err
		}
		if err := write("simulation.md", func(b *bytes.Buffer) error {
			WriteSimulation(b, runs, ReportCmd)
			return nil
		}); err != nil {
			return err
		}
	}
	if want[PartFleet] {
		log("fleet")
		diff, bursts, err := RunFleet()
		if err != nil {
			return err
		}
		if err := write("fleet.md", func(b *bytes.Buffer) error { WriteFleet(b, diff, bursts, ReportCmd); return nil }); err != nil {
			return err
		}
	}
	if want[PartSelection] {
		log("selection: benchmarks")
		rows, err := RunSelection(subjects, Sizes, log)
		if err != nil {
			return err
		}
		if err := ChartCost(filepath.Join(dir, "cost.svg"), rows, Sizes); err != nil {
			return err
		}
		if err := write("selection.md", func(b *bytes.Buffer) error {
			WriteSelection(b, rows, Sizes, ReportCmd)
			fmt.Fprintf(b, "![ns per pick vs n](cost.svg)\n")
			return nil
		}); err != nil {
			return err
		}
	}
	return write("README.md", func(b *bytes.Buffer) error {
		fmt.Fprintf(b, "# lbpack compared\n\nMeasured, repeatable comparisons of lbpack with Caddy 2.11.9's built-in policies, ")
		fmt.Fprintf(b, "nginx, HAProxy, and the usual Go libraries and textbook algorithms. Everything here is generated: ")
		fmt.Fprintf(b, "`%s` rewrites the pages and charts (`-only selection,quality,simulation,fleet` for parts), ", ReportCmd)
		fmt.Fprintf(b, "and `bench/e2e.sh` rewrites e2e.md.\n\n")
		pages := []struct{ file, what string }{
			{"selection.md", "cost per pick against every peer, n = 10, 100, 1000, one goroutine and parallel"},
			{"quality.md", "smoothness of the weighted schedules; balance, disruption and memory of the hash schemes"},
			{"simulation.md", "latency-aware balancing with queueing backends (slow, flapping, failing; mixed costs; open loop; eight balancers; weights), lbpack against every peer's model and an oracle"},
			{"fleet.md", "eight balancers with one configuration: identical url_hash mappings, and stagger"},
			{"e2e.md", "end to end on loopback with wrk: Caddy with lbpack and its built-ins, nginx, HAProxy"},
		}
		for _, p := range pages {
			if _, err := os.Stat(filepath.Join(dir, p.file)); err == nil {
				fmt.Fprintf(b, "- [%s](%s): %s\n", strings.TrimSuffix(p.file, ".md"), p.file, p.what)
			}
		}
		return nil
	})
}
