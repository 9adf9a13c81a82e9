package caddyplugin

import (
	"reflect"
	"testing"
)

// TestWarnReach: weights beyond what a hash's first try reaches are warned of
// once, naming the upstreams that never get a key; weights within it, and
// hash modes without the bound, are not.
func TestWarnReach(t *testing.T) {
	cases := []struct {
		name string
		m    selector
		far  []any
	}{
		{"ip_hash 5000 3000 2000", &NginxIPHash{base: base{Options: Options{Weights: []int{5000, 3000, 2000}}}}, []any{abc[2]}},
		{"modulo 50000 30000 20000", &URLHash{Mode: "modulo", base: base{Options: Options{Weights: []int{50000, 30000, 20000}}}}, []any{abc[1], abc[2]}},
		{"ip_hash 5 3 2", &NginxIPHash{base: base{Options: Options{Weights: []int{5, 3, 2}}}}, nil},
		{"ketama 50000 30000 20000", &URLHash{Mode: "ketama", base: base{Options: Options{Weights: []int{50000, 30000, 20000}}}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			provision(t, c.m, &health{})
			logs := observed(c.m)
			for i := 0; i < 3; i++ {
				c.m.Select(pool(abc...), request("/", nil), nil)
			}
			got := logs.FilterMessageSnippet("the weights add up to more than the hash reaches").All()
			if c.far == nil {
				if len(got) != 0 {
					t.Errorf("warned: %v", got)
				}
				return
			}
			if len(got) != 1 || !reflect.DeepEqual(got[0].ContextMap()["unreachable"], c.far) {
				t.Errorf("%d warnings %v, want one naming %v", len(got), got, c.far)
			}
		})
	}
}
