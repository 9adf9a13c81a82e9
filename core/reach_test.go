package core

import (
	"fmt"
	"reflect"
	"testing"
)

// TestReach: the backends the first try never picks, exactly.
func TestReach(t *testing.T) {
	cases := []struct {
		strategy, mode string
		weights        []int
		far            []int
		span           int
	}{
		{IPHash, "", []int{5000, 3000, 2000}, []int{2}, 6271},
		{IPHash, "", []int{6270, 1}, nil, 6271},
		{IPHash, "", []int{6271, 1}, []int{1}, 6271},
		{IPHash, "", []int{3000, 3000, 270, 1, 5}, []int{4}, 6271},
		{IPHash, "", []int{3000, 3000, 271, 1, 5}, []int{3, 4}, 6271},
		{URLHash, HashModulo, []int{50000, 30000, 20000}, []int{1, 2}, 32768},
		{URLHash, HashModulo, []int{5000, 3000, 2000}, nil, 32768},
		{URLHash, HashModulo, []int{32767, 1, 1}, []int{2}, 32768},
		{URLHash, HashKetama, []int{50000, 30000, 20000}, nil, 0},
		{URLHash, HashMaglev, []int{50000, 30000, 20000}, nil, 0},
		{SmoothWRR, "", []int{50000, 30000, 20000}, nil, 0},
	}
	for _, c := range cases {
		far, span := Unreachable(c.strategy, c.mode, hcBackends(c.weights...))
		if !reflect.DeepEqual(far, c.far) || span != c.span {
			t.Errorf("%s %s %v: %v, %d; want %v, %d", c.strategy, c.mode, c.weights, far, span, c.far, c.span)
		}
	}
}

// TestReachPicks: Unreachable agrees with the picks themselves: over
// every /24 of two first octets (ip_hash) and 200,000 keys (modulo), the
// backends never picked are exactly the ones it names.
func TestReachPicks(t *testing.T) {
	cases := []struct {
		strategy, mode string
		weights        []int
		keys           func(i int) string
		n              int
	}{
		{IPHash, "", []int{5000, 3000, 2000}, func(i int) string { return fmt.Sprintf("10.%d.%d.1", i>>8, i&255) }, 65536},
		{IPHash, "", []int{4000, 2000, 272, 1, 5}, func(i int) string { return fmt.Sprintf("%d.%d.%d.1", 1+i>>16, i>>8&255, i&255) }, 1 << 18},
		{URLHash, HashModulo, []int{50000, 30000, 20000}, func(i int) string { return fmt.Sprintf("/item/%d", i) }, 200000},
		{URLHash, HashModulo, []int{20000, 12000, 700, 90000}, func(i int) string { return fmt.Sprintf("/item/%d", i) }, 200000},
	}
	for _, c := range cases {
		bs := hcBackends(c.weights...)
		b, err := New(Config{Strategy: c.strategy, HashMode: c.mode, Backends: bs})
		if err != nil {
			t.Fatal(err)
		}
		reached := make([]bool, len(bs))
		for i := 0; i < c.n; i++ {
			p, err := b.choose(c.keys(i))
			if err != nil {
				t.Fatal(err)
			}
			reached[p] = true
		}
		var never []int
		for i, r := range reached {
			if !r {
				never = append(never, i)
			}
		}
		far, _ := Unreachable(c.strategy, c.mode, bs)
		if !reflect.DeepEqual(far, never) {
			t.Errorf("%s %s %v: Unreachable %v, never picked %v", c.strategy, c.mode, c.weights, far, never)
		}
	}
}
