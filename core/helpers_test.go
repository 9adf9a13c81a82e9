package core

import (
	"strings"
	"testing"
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
	got, err := b.Pick("")
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
