package core

import (
	"math"
	"math/rand"
	"testing"
)

func newRng(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }

// checkShares fails unless every backend's count is within 5 standard
// deviations of its expected share (a false alarm about once in 3.5 million
// backends); want holds the expected probabilities.
func checkShares(t *testing.T, counts []int, want []float64) {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c
	}
	for i, p := range want {
		mean := p * float64(n)
		sd := math.Sqrt(float64(n) * p * (1 - p))
		if math.Abs(float64(counts[i])-mean) > 5*sd+1e-9 {
			t.Fatalf("backend %d: %d picks of %d, expected %.1f ± %.1f (5 sd)", i, counts[i], n, mean, 5*sd)
		}
	}
}

// drawCounts makes n picks with avail and counts them.
func drawCounts(t *testing.T, b *Balancer, n int, avail func(int) bool) []int {
	t.Helper()
	counts := make([]int, b.Len())
	for i := 0; i < n; i++ {
		p, err := b.chooseFunc("", avail)
		if err != nil {
			t.Fatalf("pick %d: %v", i, err)
		}
		counts[p]++
	}
	return counts
}

func TestRandomUniform(t *testing.T) {
	tests := []struct {
		name  string
		down  []bool
		avail func(int) bool
		want  []float64
	}{
		{"all", nil, nil, []float64{.2, .2, .2, .2, .2}},
		{"down excluded", []bool{true, false, false, false, true}, nil, []float64{0, 1. / 3, 1. / 3, 1. / 3, 0}},
		{"refused excluded", nil, func(i int) bool { return i%2 == 0 }, []float64{1. / 3, 0, 1. / 3, 0, 1. / 3}},
		// Only one of five left: most picks go through the scan.
		{"one left", nil, func(i int) bool { return i == 3 }, []float64{0, 0, 0, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustNew(t, Config{Strategy: Random, Backends: testBackends([]int{1, 9, 1, 5, 1}, tt.down), Rand: seededRandFunc(31)})
			checkShares(t, drawCounts(t, b, 50000, tt.avail), tt.want)
		})
	}
	b := mustNew(t, Config{Strategy: Random, Backends: testBackends([]int{1, 1}, nil)})
	if p, err := b.chooseFunc("", func(int) bool { return false }); p != -1 || err != ErrNoBackend {
		t.Fatalf("all refused: %d, %v", p, err)
	}
}

// TestSampleEligibleUniform checks the scan fallback on its own: with 999 of
// 1000 draws refused it must still be uniform among the eligible.
func TestSampleEligibleUniform(t *testing.T) {
	w := []int{3, 1, 2, 4, 1, 1}
	for _, weighted := range []bool{false, true} {
		b := mustNew(t, Config{Strategy: Random, Backends: testBackends(w, nil), Rand: seededRandFunc(32)})
		r := request{b: b, avail: func(i int) bool { return i != 2 }}
		up := upPositions(b.primary)
		counts := make([]int, len(w))
		for i := 0; i < 60000; i++ {
			counts[sampleEligible(b.primary, &r, up, weighted)]++
		}
		want := make([]float64, len(w))
		total := 0.0
		for i := range w {
			if i != 2 {
				want[i] = 1
				if weighted {
					want[i] = float64(w[i])
				}
				total += want[i]
			}
		}
		for i := range want {
			want[i] /= total
		}
		checkShares(t, counts, want)
	}
}

func TestRandomAllocs(t *testing.T) {
	b := mustNew(t, Config{Strategy: Random, Backends: testBackends([]int{1, 1, 1}, nil)})
	checkPickAllocs(t, b, func(i int) bool { return i == 1 })
}
