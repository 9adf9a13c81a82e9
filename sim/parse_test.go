package sim

import (
	"strings"
	"testing"
	"time"
)

func TestParseSlowdown(t *testing.T) {
	good := []struct {
		in   string
		at   []time.Duration
		want []float64
	}{
		{"10x@0s-20s", []time.Duration{0, 19999 * ms, 20 * time.Second, time.Hour}, []float64{10, 10, 1, 1}},
		{"2.5x@1s-2s", []time.Duration{999 * ms, time.Second, 2 * time.Second}, []float64{1, 2.5, 1}},
		{"20x@every:1s", []time.Duration{0, 999 * ms, time.Second, 1999 * ms, 2 * time.Second, 3500 * ms}, []float64{1, 1, 20, 20, 1, 20}},
	}
	for _, c := range good {
		f, err := ParseSlowdown(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		for k, at := range c.at {
			if got := f(at); got != c.want[k] {
				t.Errorf("%q at %v: %v, want %v", c.in, at, got, c.want[k])
			}
		}
	}
	bad := []struct{ in, msg string }{
		{"10@0s-1s", "Fx@D1-D2"},
		{"10x", "Fx@D1-D2"},
		{"0x@0s-1s", "positive number"},
		{"-2x@0s-1s", "positive number"},
		{"fastx@0s-1s", "positive number"},
		{"10x@1s", "Fx@D1-D2"},
		{"10x@2s-1s", "empty"},
		{"10x@every:0s", "positive"},
		{"10x@every:soon", "duration"},
	}
	for _, c := range bad {
		if _, err := ParseSlowdown(c.in); err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), `"`+c.in+`"`) {
			t.Errorf("%q: error %v, want one naming it and saying %q", c.in, err, c.msg)
		}
	}
}

func TestParseErrors(t *testing.T) {
	p, d, err := ParseErrors("100%:1ms")
	if err != nil || p != 1 || d == nil || d.String() != "1ms" {
		t.Errorf("100%%:1ms: %v %v %v", p, d, err)
	}
	p, d, err = ParseErrors("2.5%")
	if err != nil || p != 0.025 || d != nil {
		t.Errorf("2.5%%: %v %v %v", p, d, err)
	}
	for _, in := range []string{"5", "150%", "5%:slow:1s@5%", "5%:gauss:1ms"} {
		if _, _, err := ParseErrors(in); err == nil || !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("%q: error %v, want one naming it", in, err)
		}
	}
}

func TestParseClasses(t *testing.T) {
	cl, err := ParseClasses("95%:1, 5%:100")
	if err != nil || len(cl) != 2 || cl[0] != (Class{0.95, 1}) || cl[1] != (Class{0.05, 100}) {
		t.Errorf("classes %v, %v", cl, err)
	}
	bad := []struct{ in, msg string }{
		{"95%:1", "add up to 95%"},
		{"100%", "want P%:COST"},
		{"0%:1,100%:1", "more than 0%"},
		{"100%:0", "positive number"},
		{"100%:x", `cost "x"`},
	}
	for _, c := range bad {
		if _, err := ParseClasses(c.in); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.msg)
		}
	}
}
