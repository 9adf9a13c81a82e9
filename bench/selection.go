package bench

import (
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
)

// Sizes are the pool sizes of the selection table.
var Sizes = []int{10, 100, 1000}

// sinkAll keeps benchmark results alive so the compiler cannot drop a pick.
var sinkAll atomic.Int64

// PickBenchmark returns the Go benchmark of subject s over n backends: one
// goroutine, or b.RunParallel with GOMAXPROCS goroutines. Keys cycle through
// a fixed set, so hashed subjects see many different keys.
func PickBenchmark(s Subject, n int, parallel bool) (func(*testing.B), error) {
	p, err := s.Build(Addrs(n), weightsFor(s.Kind, n))
	if err != nil {
		return nil, fmt.Errorf("%s at n=%d: %v", s.Name, n, err)
	}
	keys := s.benchKeys()
	// pick makes one pick for benchmark key k: through the native call for
	// pickers that have one, otherwise through PickKey. Either way one
	// dynamic call per pick, the same for every subject.
	var pick func(k int) int
	if r, ok := p.(rawPicker); ok {
		pick = r.raw
	} else {
		pick = func(k int) int { return p.PickKey(keys[k]) }
	}
	if pick(0) < 0 {
		return nil, fmt.Errorf("%s at n=%d: no backend picked", s.Name, n)
	}
	if !parallel {
		return func(b *testing.B) {
			b.ReportAllocs()
			acc := 0
			if r, ok := p.(rawPicker); ok {
				for i := 0; i < b.N; i++ {
					acc += r.raw(i & (numKeys - 1))
				}
			} else {
				for i := 0; i < b.N; i++ {
					acc += p.PickKey(keys[i&(numKeys-1)])
				}
			}
			sinkAll.Add(int64(acc))
		}, nil
	}
	return func(b *testing.B) {
		b.ReportAllocs()
		var start atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(997)) // each goroutine starts elsewhere in the key set
			acc := 0
			if r, ok := p.(rawPicker); ok {
				for pb.Next() {
					acc += r.raw(i & (numKeys - 1))
					i++
				}
			} else {
				for pb.Next() {
					acc += p.PickKey(keys[i&(numKeys-1)])
					i++
				}
			}
			sinkAll.Add(int64(acc))
		})
	}, nil
}

// Cost is one benchmark result.
type Cost struct {
	Ns     float64 // wall-clock ns per pick (for parallel runs: total time / total picks)
	Allocs int64   // allocations per pick
}

// SelRow is one subject's row of the selection table.
type SelRow struct {
	Subject Subject
	Serial  map[int]Cost // by n
	Par     map[int]Cost // by n
}

// RunSelection runs every subject's benchmarks at every size through
// testing.Benchmark (benchtime from -test.benchtime, see cmd/report) and
// calls progress after each.
func RunSelection(subjects []Subject, sizes []int, progress func(string)) ([]SelRow, error) {
	var rows []SelRow
	for _, s := range subjects {
		row := SelRow{Subject: s, Serial: map[int]Cost{}, Par: map[int]Cost{}}
		for _, n := range sizes {
			for _, par := range []bool{false, true} {
				f, err := PickBenchmark(s, n, par)
				if err != nil {
					return nil, err
				}
				r := testing.Benchmark(f)
				if r.N == 0 {
					return nil, fmt.Errorf("%s at n=%d: benchmark did not run", s.Name, n)
				}
				c := Cost{Ns: float64(r.T.Nanoseconds()) / float64(r.N), Allocs: r.AllocsPerOp()}
				if par {
					row.Par[n] = c
				} else {
					row.Serial[n] = c
				}
				if progress != nil {
					progress(fmt.Sprintf("%-32s n=%-5d par=%-5v %10.1f ns/pick %d allocs", s.Name, n, par, c.Ns, c.Allocs))
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// fmtNs prints a cost with three significant digits.
func fmtNs(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.0f", ns)
	case ns >= 100:
		return fmt.Sprintf("%.0f", ns)
	case ns >= 10:
		return fmt.Sprintf("%.1f", ns)
	default:
		return fmt.Sprintf("%.2f", ns)
	}
}

// fmtRatio prints peer/lbpack.
func fmtRatio(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f×", r)
	case r >= 10:
		return fmt.Sprintf("%.1f×", r)
	default:
		return fmt.Sprintf("%.2f×", r)
	}
}

// WriteSelection writes docs/selection.md's body: one table, every subject,
// ns per pick and, for the peers, the ratio to their lbpack counterpart.
func WriteSelection(w io.Writer, rows []SelRow, sizes []int, cmd string) {
	byName := map[string]SelRow{}
	for _, r := range rows {
		byName[r.Subject.Name] = r
	}
	fmt.Fprintf(w, "# Selection cost\n\n")
	fmt.Fprintf(w, "Nanoseconds per pick, measured in one run by `testing.Benchmark` (%s, %d CPUs, GOMAXPROCS=%d).\n",
		runtime.Version(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "Regenerate with `%s`.\n\n", cmd)
	fmt.Fprintf(w, "\"1 g\" is one goroutine; \"par\" is `b.RunParallel` with GOMAXPROCS goroutines (wall time / picks, so perfect scaling halves it).\n")
	fmt.Fprintf(w, "For every peer, `×` is its time divided by the lbpack row in the \"vs\" column at the same n and mode:\n")
	fmt.Fprintf(w, "above 1 means lbpack is faster. Weighted subjects use weights 1,2,3,4,5,1,2,...; hashed ones hash ~32-byte URIs (or client IPs for ip_hash)\n")
	fmt.Fprintf(w, "cycling through %d keys. Caddy's policies are called as its handler calls them: `Select(pool, req, nil)` on a pool of `*Upstream` with Dial addresses;\n", numKeys)
	fmt.Fprintf(w, "nothing is in flight, so Caddy's least_conn and lbpack's first and two_choices rows measure the all-tied case (lbpack least_conn then follows\n")
	fmt.Fprintf(w, "smooth_wrr's table); \"least_conn, 1 in flight\" keeps one request open on the first backend, so that every pick scans and shares the others' tie by nginx's pass.\n\n")

	fmt.Fprintf(w, "| subject | vs | allocs |")
	for _, mode := range []string{"1 g", "par"} {
		for _, n := range sizes {
			fmt.Fprintf(w, " %s n=%d |", mode, n)
		}
	}
	fmt.Fprintf(w, "\n|---|---|---:|")
	for i := 0; i < 2*len(sizes); i++ {
		fmt.Fprintf(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		vs, hasVs := byName[r.Subject.Versus]
		var allocs int64
		for _, n := range sizes {
			if r.Serial[n].Allocs > allocs {
				allocs = r.Serial[n].Allocs
			}
		}
		name := r.Subject.Name
		if r.Subject.Family == FamLbpack {
			name = "**" + name + "**"
		}
		versus := strings.TrimPrefix(r.Subject.Versus, "lbpack ")
		if !hasVs {
			versus = ""
		}
		fmt.Fprintf(w, "| %s | %s | %d |", name, versus, allocs)
		for _, par := range []bool{false, true} {
			for _, n := range sizes {
				c, base := r.Serial[n], vs.Serial[n]
				if par {
					c, base = r.Par[n], vs.Par[n]
				}
				cell := fmtNs(c.Ns)
				if hasVs && base.Ns > 0 {
					cell += " (" + fmtRatio(c.Ns/base.Ns) + ")"
				}
				fmt.Fprintf(w, " %s |", cell)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	writeSelectionHeadlines(w, rows, sizes)
}

// writeSelectionHeadlines lists the largest-n ratios of each peer, sorted.
func writeSelectionHeadlines(w io.Writer, rows []SelRow, sizes []int) {
	n := sizes[len(sizes)-1]
	byName := map[string]SelRow{}
	for _, r := range rows {
		byName[r.Subject.Name] = r
	}
	type line struct {
		text  string
		ratio float64
	}
	var lines []line
	for _, r := range rows {
		vs, ok := byName[r.Subject.Versus]
		if !ok || vs.Serial[n].Ns == 0 {
			continue
		}
		ratio := r.Serial[n].Ns / vs.Serial[n].Ns
		lines = append(lines, line{fmt.Sprintf("- %s: %s ns vs %s ns for %s, %s", r.Subject.Name,
			fmtNs(r.Serial[n].Ns), fmtNs(vs.Serial[n].Ns), vs.Subject.Name, fmtRatio(ratio)), ratio})
	}
	sort.SliceStable(lines, func(a, b int) bool { return lines[a].ratio > lines[b].ratio })
	fmt.Fprintf(w, "At n=%d, one goroutine:\n\n", n)
	for _, l := range lines {
		fmt.Fprintln(w, l.text)
	}
	fmt.Fprintln(w)
}
