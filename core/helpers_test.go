package core

import (
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers shared by the package's tests.

// mustNew builds a balancer or fails the test.
func mustNew(tb testing.TB, cfg Config) *Balancer {
	tb.Helper()
	b, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return b
}

// letters renders backend indexes as "a b c ..." ("-" for none).
func letters(seq []int) string {
	s := make([]string, len(seq))
	for i, p := range seq {
		if p < 0 {
			s[i] = "-"
		} else {
			s[i] = string(rune('a' + p))
		}
	}
	return strings.Join(s, " ")
}

// seqCase is a worked example: backends of these weights (down ones marked)
// pick in the order want, written as letters.
type seqCase struct {
	name    string
	weights []int
	down    []bool
	want    string
}

// checkSequences builds a balancer of the strategy for every case and
// compares its first picks with the case's sequence.
func checkSequences(t *testing.T, strategy string, cases []seqCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			b := mustNew(t, Config{Strategy: strategy, Backends: testBackends(tt.weights, tt.down)})
			if got := letters(pickN(t, b, (len(tt.want)+1)/2)); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// pickLikeNginx makes b's next pick and fails the test unless it is want,
// nginx's choice (-1: nginx finds none). It returns the pick, or -1 when
// there is none. where says which set and step, for the message.
func pickLikeNginx(t *testing.T, b *Balancer, want int, where string) int {
	t.Helper()
	got, err := b.choose("")
	if want < 0 {
		if err != ErrNoBackend {
			t.Fatalf("%s: got %d, %v; nginx finds none", where, got, err)
		}
		return -1
	}
	if got != want {
		t.Fatalf("%s: got %d, nginx %d", where, got, want)
	}
	return got
}

// checkConcurrentCounts has 8 goroutines make picks picks from b between
// them and fails the test unless backend i got exactly want(i) of them: the
// schedules hand out whole periods exactly even under concurrency. what
// names the unit of want, for the message.
func checkConcurrentCounts(t *testing.T, b *Balancer, picks int, want func(i int) int, what string) {
	t.Helper()
	const goroutines = 8
	counts := make([][]int, goroutines)
	var wg sync.WaitGroup
	for gr := 0; gr < goroutines; gr++ {
		counts[gr] = make([]int, b.Len())
		wg.Add(1)
		go countPicks(b, picks/goroutines, counts[gr], &wg)
	}
	wg.Wait()
	for i := 0; i < b.Len(); i++ {
		got := 0
		for gr := range counts {
			got += counts[gr][i]
		}
		if got != want(i) {
			t.Fatalf("backend %d: %d picks in %s, want %d", i, got, what, want(i))
		}
	}
}

// checkPickAllocs fails the test if a pick, or one with the filter refuse, allocates.
func checkPickAllocs(t *testing.T, b *Balancer, refuse func(i int) bool) {
	t.Helper()
	if a := testing.AllocsPerRun(1000, func() { b.choose("") }); a != 0 {
		t.Fatalf("Pick allocates %v", a)
	}
	if a := testing.AllocsPerRun(1000, func() { b.chooseFunc("", refuse) }); a != 0 {
		t.Fatalf("a filtered pick allocates %v", a)
	}
}

// playFailureTimelines drives 40 random sets of 2 to 6 backends (weights
// 1..6, max_fails 0..3, fail_timeout 10s, addresses 10.<subnet>.0.x) through
// strategy and through nginx's round robin, 400 steps each: now and then a
// clock step of whole seconds (nginx's clock), then a pick that must be
// nginx's, its request ended at once, failed when the set's rule says so.
// rule is called once per set, after the balancer is built, and returns
// that set's failure rule; before, when not nil, sees the balancer before
// each pick.
func playFailureTimelines(t *testing.T, strategy string, seed int64, subnet int, rule func(rng *rand.Rand) func(step, got int) bool, before func(b *Balancer)) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	for set := 0; set < 40; set++ {
		n := 2 + rng.Intn(5)
		weights, maxFails := make([]int, n), make([]int, n)
		bs := make([]Backend, n)
		for i := range bs {
			weights[i] = 1 + rng.Intn(6)
			maxFails[i] = rng.Intn(4) // 0 disables accounting
			bs[i] = Backend{Address: fmt.Sprintf("10.%d.0.%d:80", subnet, i+1), Weight: weights[i],
				MaxFails: maxFails[i], FailTimeout: 10 * time.Second}
		}
		clock := newHCClock()
		base := clock.t.Unix()
		ref := newNginxRR(weights, maxFails, 10)
		b := mustNew(t, Config{Strategy: strategy, Backends: bs, Now: clock.now})
		fails := rule(rng)
		for step := 0; step < 400; step++ {
			if rng.Intn(8) == 0 {
				clock.add(time.Duration(1+rng.Intn(6)) * time.Second)
			}
			now := clock.t.Unix() - base
			if before != nil {
				before(b)
			}
			want := ref.get(now)
			got := pickLikeNginx(t, b, want, fmt.Sprintf("set %d (weights %v max_fails %v) step %d", set, weights, maxFails, step))
			if got < 0 {
				continue
			}
			failed := fails(step, got)
			b.hold(got)
			b.release(got, time.Millisecond, failed)
			ref.free(want, failed, now)
		}
	}
}
