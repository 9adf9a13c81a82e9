package hold

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

func TestID(t *testing.T) {
	for _, c := range []struct{ target, want string }{
		{"/a?hold=x1", "x1"},
		{"/a?k=1&hold=x2", "x2"},
		{"hold=x3", "x3"},
		{"k=%zz&hold=x4", "x4"},
		{"/a?threshold=5", ""},
		{"/a?k=1", ""},
	} {
		if got := ID(c.target); got != c.want {
			t.Errorf("ID(%q) = %q, want %q", c.target, got, c.want)
		}
	}
}

func TestWait(t *testing.T) {
	g := New()
	r := httptest.NewRequest("GET", "/?hold=a", nil)
	if g.Wait(r, "a", nil) {
		t.Fatal("Wait for an id no test holds: true")
	}

	came := g.Hold("a")
	if n := g.Len(); n != 1 {
		t.Errorf("one request held: Len %d", n)
	}
	arrived := make(chan bool, 1)
	done := make(chan bool, 1)
	go func() { done <- g.Wait(r, "a", func() { arrived <- true }) }()
	select {
	case <-came:
	case <-time.After(5 * time.Second):
		t.Fatal("the held request never came")
	}
	<-arrived
	select {
	case <-done:
		t.Fatal("the held request answered before its release")
	case <-time.After(20 * time.Millisecond):
	}
	g.Release("a")
	if ok := <-done; !ok {
		t.Error("Wait for a held id: false")
	}
	g.Release("a") // twice: nothing
	if n := g.Len(); n != 0 {
		t.Errorf("all released: Len %d", n)
	}

	g.Hold("b")
	g.Hold("c")
	go func() { done <- g.Wait(r, "b", nil) }()
	g.ReleaseAll()
	<-done
	if g.Wait(r, "c", nil) {
		t.Error("Wait after ReleaseAll: c is still held")
	}

	ctx, cancel := context.WithCancel(context.Background())
	g.Hold("d")
	go func() { done <- g.Wait(r.WithContext(ctx), "d", nil) }()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait outlived its request's context")
	}
}
