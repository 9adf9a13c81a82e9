package core

import "testing"

// Failures counted while max_fails is 0 (nginx counts them, and reads them
// only where max_fails is set) do not take a backend out when an Update turns
// max_fails on: the Traefik plugin's reload of a middleware from maxFails 0
// to 1 answered 503 for a whole fail_timeout before this.
func TestUpdateTurningMaxFailsOn(t *testing.T) {
	backends := []Backend{{Address: "10.0.0.1:80", Weight: 1}, {Address: "10.0.0.2:80", Weight: 1}}
	b, err := New(Config{Strategy: SmoothWRR, Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 5; k++ {
		b.hold(0)
		b.release(0, 0, true)
	}
	if f := b.Fails(0); f != 5 {
		t.Fatalf("fails with max_fails 0: %d, want 5 (nginx counts them)", f)
	}
	on := []Backend{{Address: "10.0.0.1:80", Weight: 1, MaxFails: 1}, {Address: "10.0.0.2:80", Weight: 1, MaxFails: 1}}
	u, err := b.Update(on)
	if err != nil {
		t.Fatal(err)
	}
	picks := map[int]int{}
	for k := 0; k < 10; k++ {
		i, err := u.choose("")
		if err != nil {
			t.Fatal(err)
		}
		picks[i]++
	}
	if picks[0] != 5 || picks[1] != 5 {
		t.Errorf("after turning max_fails on: picks %v, want 5 each (the old failures do not count)", picks)
	}

	// Failures counted under max_fails stay across an Update that keeps it.
	for k := 0; k < 1; k++ {
		u.hold(0)
		u.release(0, 0, true)
	}
	v, err := u.Update(on)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 4; k++ {
		if i, _ := v.choose(""); i != 1 {
			t.Fatalf("pick %d after a failure under max_fails 1: %d, want 1 (0 is out for fail_timeout)", k, i)
		}
	}
}
