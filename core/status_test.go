package core

import "testing"

func TestParseStatus(t *testing.T) {
	for _, c := range []struct {
		in     string
		lo, hi int
		ok     bool
	}{
		{"503", 503, 503, true},
		{"5xx", 500, 599, true},
		{"4XX", 400, 499, true},
		{"1xx", 100, 199, true},
		{"500-504", 500, 504, true},
		{"599", 599, 599, true},
		{"100-599", 100, 599, true},
		{"6xx", 0, 0, false},
		{"0xx", 0, 0, false},
		{"600", 0, 0, false},
		{"099", 0, 0, false},
		{"504-500", 0, 0, false},
		{"50", 0, 0, false},
		{"5003", 0, 0, false},
		{"500-", 0, 0, false},
		{"-500", 0, 0, false},
		{"+50", 0, 0, false},
		{"", 0, 0, false},
		{"5x", 0, 0, false},
	} {
		lo, hi, ok := ParseStatus(c.in)
		if lo != c.lo || hi != c.hi || ok != c.ok {
			t.Errorf("ParseStatus(%q) = %d, %d, %v; want %d, %d, %v", c.in, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
	for _, s := range Strategies() {
		tr, _ := TraitsOf(s, "")
		if tr.FailStatus == "" {
			continue
		}
		if _, _, ok := ParseStatus(tr.FailStatus); !ok {
			t.Errorf("%s's default failing statuses %q: not an entry ParseStatus reads", s, tr.FailStatus)
		}
	}
}
