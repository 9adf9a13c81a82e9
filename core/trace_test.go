package core

import (
	"reflect"
	"strings"
	"testing"
)

func TestTraceSmoothWorkedExample(t *testing.T) {
	steps, err := Trace(Config{Strategy: SmoothWRR, Backends: testBackends([]int{5, 3, 2}, nil)}, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceStep{
		{0, []int{0, 0, 0}, []int{-5, 3, 2}},
		{1, []int{-5, 3, 2}, []int{0, -4, 4}},
		{2, []int{0, -4, 4}, []int{5, -1, -4}},
		{0, []int{5, -1, -4}, []int{0, 2, -2}},
		{0, []int{0, 2, -2}, []int{-5, 5, 0}},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("got  %v\nwant %v", steps, want)
	}
}

func TestTraceGCDWorkedExample(t *testing.T) {
	steps, err := Trace(Config{Strategy: GCDWRR, Backends: testBackends([]int{6, 3, 1}, nil)}, 11)
	if err != nil {
		t.Fatal(err)
	}
	chosen := "a a a a b a b a b c a"
	cw := [][2]int{{0, 6}, {6, 5}, {5, 4}, {4, 3}, {3, 3}, {3, 2}, {2, 2}, {2, 1}, {1, 1}, {1, 1}, {1, 6}}
	var seq []int
	for i, s := range steps {
		seq = append(seq, s.Chosen)
		if len(s.Before) != 1 || len(s.After) != 1 || s.Before[0] != cw[i][0] || s.After[0] != cw[i][1] {
			t.Fatalf("step %d: cw %v -> %v, want %v", i, s.Before, s.After, cw[i])
		}
	}
	if got := letters(seq); got != chosen {
		t.Fatalf("chosen %s, want %s", got, chosen)
	}
}

// TestTraceMatchesBalancerAndNginx: for random sets, with down backends and
// with stagger, the traced picks are the balancer's, and for smooth_wrr the
// traced current weights are those of nginx's own loop.
func TestTraceMatchesBalancerAndNginx(t *testing.T) {
	ws, downs := weightSets(51, 60, 9, 12)
	for k := range ws {
		for _, strategy := range []string{SmoothWRR, GCDWRR} {
			for _, stagger := range []bool{false, true} {
				cfg := func() Config {
					return Config{Strategy: strategy, Backends: testBackends(ws[k], downs[k]), Stagger: stagger, Rand: seededRandFunc(int64(k))}
				}
				n := 2*sumInts(ws[k]) + 3
				steps, err := Trace(cfg(), n)
				if err != nil {
					t.Fatal(err)
				}
				b := mustNew(t, cfg())
				for i, p := range pickN(t, b, n) {
					if steps[i].Chosen != p {
						t.Fatalf("%s %v down %v stagger %v: step %d traced %d, picked %d", strategy, ws[k], downs[k], stagger, i, steps[i].Chosen, p)
					}
				}
				if strategy != SmoothWRR || stagger {
					continue
				}
				ref := newNginxSmooth(ws[k], downs[k])
				for i, s := range steps {
					if !reflect.DeepEqual(s.Before, ref.current) {
						t.Fatalf("%v step %d: before %v, nginx %v", ws[k], i, s.Before, ref.current)
					}
					ref.pick(nil)
					if !reflect.DeepEqual(s.After, ref.current) {
						t.Fatalf("%v step %d: after %v, nginx %v", ws[k], i, s.After, ref.current)
					}
				}
			}
		}
	}
}

func TestTraceBackupsAndErrors(t *testing.T) {
	bs := testBackends([]int{2, 3, 1}, []bool{true, false, false})
	bs[1].Backup, bs[2].Backup = true, true
	steps, err := Trace(Config{Strategy: SmoothWRR, Backends: bs}, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceStep{
		{1, []int{0, 0, 0}, []int{0, -1, 1}},
		{1, []int{0, -1, 1}, []int{0, -2, 2}}, // a tie goes to the earlier
		{2, []int{0, -2, 2}, []int{0, 1, -1}},
		{1, []int{0, 1, -1}, []int{0, 0, 0}},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("backups: got %v\nwant %v", steps, want)
	}

	errs := []struct {
		cfg  Config
		n    int
		want string
	}{
		{Config{Strategy: RoundRobin, Backends: testBackends([]int{1}, nil)}, 3, `strategy "round_robin"`},
		{Config{Strategy: "nope", Backends: testBackends([]int{1}, nil)}, 3, `strategy "nope": unknown`},
		{Config{Strategy: SmoothWRR, Backends: testBackends([]int{0}, nil)}, 3, `backends[0].weight 0`},
		{Config{Strategy: GCDWRR, Backends: testBackends([]int{1}, nil)}, -1, `n -1`},
	}
	for _, e := range errs {
		if _, err := Trace(e.cfg, e.n); err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("Trace(%s, %d): %v, want an error with %q", e.cfg.Strategy, e.n, err, e.want)
		}
	}
	if _, err := Trace(Config{Strategy: GCDWRR, Backends: testBackends([]int{1, 1}, []bool{true, true})}, 2); err != ErrNoBackend {
		t.Errorf("all down: %v, want ErrNoBackend", err)
	}
}
