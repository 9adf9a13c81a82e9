package bench

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkSelect measures every subject at n = 10, 100, 1000, one goroutine
// and parallel. cmd/report runs the same functions and writes the table:
//
//	go test -bench 'Select/lbpack_smooth' -benchtime 200ms
func BenchmarkSelect(b *testing.B) {
	for _, s := range Subjects() {
		for _, n := range Sizes {
			for _, par := range []bool{false, true} {
				name := fmt.Sprintf("%s/n=%d", s.Name, n)
				if par {
					name += "/parallel"
				}
				f, err := PickBenchmark(s, n, par)
				if err != nil {
					b.Fatal(err)
				}
				b.Run(name, f)
			}
		}
	}
}

// TestSubjectsPick checks that every subject builds at every size, picks a
// valid backend, and that the peers and textbook rows have an lbpack
// counterpart when that strategy is registered.
func TestSubjectsPick(t *testing.T) {
	subjects := Subjects()
	names := map[string]bool{}
	for _, s := range subjects {
		names[s.Name] = true
	}
	for _, want := range []string{"Caddy weighted_round_robin", "Caddy round_robin", "Caddy least_conn",
		"Caddy uri_hash", "Caddy ip_hash", "Caddy random", "stathat/consistent", "serialx/hashring",
		"dgryski/go-jump", "O(n) smooth WRR, one mutex", "expanded-list WRR", "sorted ring, 16 replicas"} {
		if !names[want] {
			t.Errorf("subject %q missing", want)
		}
	}
	for _, sp := range lbpackSpecs {
		if registered(sp.strategy) && !names["lbpack "+sp.name] {
			t.Errorf("registered strategy %q has no row %q", sp.strategy, "lbpack "+sp.name)
		}
	}
	for _, s := range subjects {
		for _, n := range Sizes {
			p, err := s.Build(Addrs(n), weightsFor(s.Kind, n))
			if err != nil {
				t.Fatalf("%s n=%d: %v", s.Name, n, err)
			}
			keys := s.benchKeys()
			for k := 0; k < 50; k++ {
				i := p.PickKey(keys[k])
				if i < 0 || i >= n {
					t.Fatalf("%s n=%d key %q: picked %d", s.Name, n, keys[k], i)
				}
				if r, ok := p.(rawPicker); ok && r.raw(k) < 0 {
					t.Fatalf("%s n=%d: native pick of key %d failed", s.Name, n, k)
				}
			}
		}
	}
}

// TestHashedSubjectsDeterministic checks that two instances of each hashed
// subject built from one configuration map every key alike.
func TestHashedSubjectsDeterministic(t *testing.T) {
	for _, s := range Subjects() {
		if s.Kind != Hashed {
			continue
		}
		a, err := s.Build(Addrs(100), weightsFor(s.Kind, 100))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := s.Build(Addrs(100), weightsFor(s.Kind, 100))
		keys := s.benchKeys()
		for k := 0; k < 200; k++ {
			if x, y := a.PickKey(keys[k]), b.PickKey(keys[k]); x != y {
				t.Fatalf("%s: key %q maps to %d and %d in two instances", s.Name, keys[k], x, y)
			}
		}
	}
}

// TestSelectionTable runs every benchmark for a few iterations (timings are
// not asserted) and checks that the table has every subject, a cell for
// every n and mode, and a ratio for every peer whose lbpack counterpart runs.
func TestSelectionTable(t *testing.T) {
	old := flag.Lookup("test.benchtime").Value.String()
	if err := flag.Set("test.benchtime", "20x"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("test.benchtime", old)
	subjects := Subjects()
	rows, err := RunSelection(subjects, Sizes, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	WriteSelection(&buf, rows, Sizes, "cmd")
	table := buf.String()
	for _, r := range rows {
		for _, n := range Sizes {
			if r.Serial[n].Ns <= 0 || r.Par[n].Ns <= 0 {
				t.Errorf("%s n=%d: no timing", r.Subject.Name, n)
			}
		}
		line := ""
		for _, l := range strings.Split(table, "\n") {
			if strings.HasPrefix(l, "| "+boldIf(r.Subject)+" |") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("no row for %s", r.Subject.Name)
			continue
		}
		if cells := strings.Count(line, "|") - 1; cells != 3+2*len(Sizes) {
			t.Errorf("%s: %d cells, want %d", r.Subject.Name, cells, 3+2*len(Sizes))
		}
		if _, ok := FindSubject(r.Subject.Versus); ok && strings.Count(line, "×") != 2*len(Sizes) {
			t.Errorf("%s: ratios missing in %q", r.Subject.Name, line)
		}
	}
}
