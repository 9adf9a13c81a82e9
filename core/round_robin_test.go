package core

import (
	"testing"
)

func TestRoundRobin(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		down    []bool
		avail   func(int) bool
		want    string
	}{
		{"weights ignored", []int{5, 1, 2}, nil, nil, "a b c a b c a"},
		{"down skipped", []int{1, 1, 1, 1}, []bool{false, true, false, false}, nil, "a c d a c d"},
		// c refused: its turn passes to d, so d takes two turns in three.
		{"refused passes on", []int{1, 1, 1, 1}, nil, func(i int) bool { return i != 2 }, "a b d d a b d d"},
		{"one left", []int{1, 1, 1}, nil, func(i int) bool { return i == 1 }, "b b b"},
		{"none left", []int{1, 1}, nil, func(int) bool { return false }, "- -"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustNew(t, Config{Strategy: RoundRobin, Backends: testBackends(tt.weights, tt.down)})
			var seq []int
			for i := 0; i < (len(tt.want)+1)/2; i++ {
				p, err := b.chooseFunc("", tt.avail)
				if (p < 0) != (err == ErrNoBackend) {
					t.Fatalf("pick %d: %d, %v", i, p, err)
				}
				seq = append(seq, p)
			}
			if got := letters(seq); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestRoundRobinConcurrentEqualCounts(t *testing.T) {
	w := drawWeights(newRng(21), 37, 10)
	b := mustNew(t, Config{Strategy: RoundRobin, Backends: testBackends(w, nil)})
	const laps = 200
	checkConcurrentCounts(t, b, laps*len(w), func(int) int { return laps }, "200 laps")
}

func TestRoundRobinAllocs(t *testing.T) {
	b := mustNew(t, Config{Strategy: RoundRobin, Backends: testBackends([]int{1, 1, 1}, nil)})
	checkPickAllocs(t, b, func(i int) bool { return i != 1 })
}
