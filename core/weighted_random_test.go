package core

import "testing"

// TestWeightedRandomAliasExact checks the alias table itself: summed over
// all columns, each member owns exactly weight*n of the n*total units, so the
// probabilities are the weights' shares exactly.
func TestWeightedRandomAliasExact(t *testing.T) {
	ws, downs := weightSets(41, 300, 40, 1000)
	for k := range ws {
		b := mustNew(t, Config{Strategy: WeightedRandom, Backends: testBackends(ws[k], downs[k])})
		s := b.primary.strategy.(*weightedRandom)
		owned := make([]uint64, len(ws[k]))
		for _, c := range s.cells {
			if c.threshold > s.total {
				t.Fatalf("weights %v: threshold %d above %d", ws[k], c.threshold, s.total)
			}
			owned[c.pos] += c.threshold
			owned[c.alias] += s.total - c.threshold
		}
		n := uint64(len(s.cells))
		for i, w := range ws[k] {
			want := uint64(w) * n
			if downs[k][i] {
				want = 0
			}
			if owned[i] != want {
				t.Fatalf("weights %v down %v: backend %d owns %d units, want %d", ws[k], downs[k], i, owned[i], want)
			}
		}
	}
}

func TestWeightedRandomShares(t *testing.T) {
	w := []int{5, 3, 2, 10, 1}
	tests := []struct {
		name     string
		down     []bool
		avail    func(int) bool
		unsteady bool
		want     []float64
	}{
		{"all", nil, nil, false, []float64{5. / 21, 3. / 21, 2. / 21, 10. / 21, 1. / 21}},
		{"down excluded", []bool{false, false, false, true, false}, nil, false, []float64{5. / 11, 3. / 11, 2. / 11, 0, 1. / 11}},
		{"refused excluded", nil, func(i int) bool { return i != 0 }, false, []float64{0, 3. / 16, 2. / 16, 10. / 16, 1. / 16}},
		{"one left", nil, func(i int) bool { return i == 4 }, false, []float64{0, 0, 0, 0, 1}},
		{"unsteady scan", nil, nil, true, []float64{5. / 21, 3. / 21, 2. / 21, 10. / 21, 1. / 21}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustNew(t, Config{Strategy: WeightedRandom, Backends: testBackends(w, tt.down), Rand: seededRandFunc(42)})
			if tt.unsteady {
				b.primary.addUnsteady(1)
			}
			checkShares(t, drawCounts(t, b, 60000, tt.avail), tt.want)
		})
	}
	b := mustNew(t, Config{Strategy: WeightedRandom, Backends: testBackends(w, nil)})
	if p, err := b.chooseFunc("", func(int) bool { return false }); p != -1 || err != ErrNoBackend {
		t.Fatalf("all refused: %d, %v", p, err)
	}
}

func TestWeightedRandomAllocs(t *testing.T) {
	b := mustNew(t, Config{Strategy: WeightedRandom, Backends: testBackends([]int{1, 2, 3}, nil)})
	checkPickAllocs(t, b, func(i int) bool { return i == 1 })
}
