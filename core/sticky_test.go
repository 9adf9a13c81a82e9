package core

import (
	"fmt"
	"strings"
	"testing"
)

func TestStickyID(t *testing.T) {
	for _, c := range []struct{ addr, id string }{
		// As nginx 1.31.4 set them (conformance/testdata/sticky).
		{"127.0.0.1:44101", "f27f6f347c0761cc00868148742f844d"},
		{"127.0.0.1:44102", "aace36647c8b12fd805e27cb79696bc9"},
	} {
		if got := StickyID(c.addr); got != c.id {
			t.Errorf("StickyID(%q) = %s, want %s", c.addr, got, c.id)
		}
	}
	b, err := New(Config{Strategy: SmoothWRR, Backends: []Backend{
		{Address: "127.0.0.1:44101", Weight: 1}, {Address: "127.0.0.1:44102", Weight: 1, Route: "b"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if b.ID(0) != StickyID("127.0.0.1:44101") || b.ID(1) != "b" || b.ID(2) != "" || b.ID(-1) != "" {
		t.Errorf("ids %q %q %q", b.ID(0), b.ID(1), b.ID(2))
	}
}

// TestPickSticky checks who takes a bound request, under each strategy:
// a draining backend only bound ones, a down, full, failed or tried one
// none (the strategy picks as if unbound), a backup's id only once no
// primary can be picked, and a shared route its first backend.
func TestPickSticky(t *testing.T) {
	backends := []Backend{
		{Address: "10.0.0.1:80", Weight: 1, Route: "a"},
		{Address: "10.0.0.2:80", Weight: 1, Route: "drain", Drain: true},
		{Address: "10.0.0.3:80", Weight: 1, Route: "down", Down: true},
		{Address: "10.0.0.4:80", Weight: 1, Route: "shared"},
		{Address: "10.0.0.5:80", Weight: 1, Route: "shared"},
	}
	withBackup := append(append([]Backend(nil), backends...), Backend{Address: "10.0.0.9:80", Weight: 1, Route: "backup", Backup: true})
	for _, strategy := range Strategies() {
		bs := withBackup
		if info := strategies[strategy]; info.hashed {
			bs = backends // the hash strategies take no backups
		}
		b, err := New(Config{Strategy: strategy, Backends: bs})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			sticky string
			allow  func(int) bool
			want   int // -2: any backend but the draining and down ones
		}{
			{"a", nil, 0},
			{"drain", nil, 1},
			{"shared", nil, 3},
			{"down", nil, -2},
			{"stale", nil, -2},
			{"", nil, -2},
			{"a", func(i int) bool { return i != 0 }, -2},      // tried: never reused
			{"drain", func(i int) bool { return i != 1 }, -2},  // tried
			{"shared", func(i int) bool { return i != 3 }, -2}, // the first with the route is out: no fallback to the second's route
		} {
			for k := 0; k < 20; k++ {
				i, tk := Pick(b, fmt.Sprint("key", k), Filter{Sticky: c.sticky, Allow: c.allow})
				Done(b, i, tk, 0, false)
				switch {
				case c.want >= 0 && i != c.want:
					t.Fatalf("%s: bound to %q, picked %d, want %d", strategy, c.sticky, i, c.want)
				case c.want == -2 && (i < 0 || i == 1 || i == 2 || c.allow != nil && !c.allow(i)):
					t.Fatalf("%s: bound to %q, picked %d: draining, down, refused or none", strategy, c.sticky, i)
				}
			}
		}
		if strategies[strategy].hashed {
			continue
		}
		// The backup's id counts only once no primary can be picked.
		if i, _ := Pick(b, "k", Filter{Sticky: "backup"}); i == 5 {
			t.Errorf("%s: a backup's id took the request while primaries are up", strategy)
		}
		onlyBackup := func(i int) bool { return i == 5 }
		if i, tk := Pick(b, "k", Filter{Sticky: "backup", Allow: onlyBackup}); i != 5 {
			t.Errorf("%s: with every primary out, the backup's id picked %d", strategy, i)
		} else {
			Done(b, i, tk, 0, false)
		}
		// A draining backup takes no unbound request.
		if i, _ := Pick(b, "k", Filter{Allow: func(i int) bool { return i == 1 }}); i != -1 {
			t.Errorf("%s: only the draining backend allowed, an unbound request picked %d", strategy, i)
		}
	}
}

func TestDownAndDrain(t *testing.T) {
	_, err := New(Config{Strategy: SmoothWRR, Backends: []Backend{{Address: "10.0.0.1:80", Weight: 1, Down: true, Drain: true}}})
	if err == nil || !strings.Contains(err.Error(), "backends[0].drain") {
		t.Errorf("down and drain together: %v", err)
	}
}

// A request bound to a backend by its sticky id goes there, and the ones
// around it keep nginx's smooth sequence as nginx counts a bound request.
func ExamplePick_sticky() {
	b, _ := New(Config{Strategy: SmoothWRR, Backends: []Backend{
		{Address: "10.0.0.1:80", Weight: 5},
		{Address: "10.0.0.2:80", Weight: 3},
		{Address: "10.0.0.3:80", Weight: 2, Drain: true},
	}})
	c := b.ID(2) // what the client's cookie says
	for _, id := range []string{"", c, "", "", c, ""} {
		i, t := Pick(b, "", Filter{Sticky: id})
		fmt.Print(b.Backend(i).Address, " ")
		Done(b, i, t, SincePick, false)
	}
	// Output: 10.0.0.1:80 10.0.0.3:80 10.0.0.2:80 10.0.0.1:80 10.0.0.3:80 10.0.0.1:80
}

// TestBoundLowLimit: nginx's low limit for a bound request counts every
// configured weight, down and draining backends' too (total_weight), so
// two bound requests in a row both run the pass here (c at -8 is above
// -(11-2)); a limit over the backends up only (-(8-2)) would freeze the
// second and the unbound picks after would be a b a a, not a a b a.
func TestBoundLowLimit(t *testing.T) {
	b := mustNew(t, Config{Strategy: SmoothWRR, Backends: []Backend{
		{Address: "10.0.0.1:80", Weight: 5},
		{Address: "10.0.0.2:80", Weight: 3},
		{Address: "10.0.0.3:80", Weight: 2, Drain: true},
		{Address: "10.0.0.4:80", Weight: 1, Down: true},
	}})
	c := b.ID(2)
	var got []int
	for _, id := range []string{c, c, "", "", "", ""} {
		i, tk := Pick(b, "", Filter{Sticky: id})
		Done(b, i, tk, 0, false)
		got = append(got, i)
	}
	if want := []int{2, 2, 0, 0, 1, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("picks %v, want %v", got, want)
	}
}
