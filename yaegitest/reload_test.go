package yaegitest

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

// reloadPlugin builds the interpreted middleware "lb" again from doc, as a
// Traefik reload does (the previous middleware's context ends once the new
// one exists), and serves it on a front of its own.
func reloadPlugin(t *testing.T, l *loader, prev context.CancelFunc, doc string) (string, *http.Client, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, err := l.newHandler(ctx, doc, "lb")
	if err != nil {
		t.Fatalf("New: %v\nconfig:\n%s", err, doc)
	}
	if prev != nil {
		prev()
	}
	base, client := front(t, h)
	return base, client, cancel
}

// sequence sends n requests and returns the backends' names in order.
func sequence(t *testing.T, c *http.Client, base string, n int) string {
	t.Helper()
	var sb strings.Builder
	for k := 0; k < n; k++ {
		r := do(t, c, "GET", base+"/", "")
		if r.status != http.StatusOK {
			t.Fatalf("request %d: status %d", k, r.status)
		}
		sb.WriteString(r.backend)
	}
	return sb.String()
}

// TestPluginReloadContinuesSequence: under the loader, a reload with the
// same settings continues nginx's smooth sequence where it was, instead of
// starting it over (abc | reload | abcaaba).
func TestPluginReloadContinuesSequence(t *testing.T) {
	l := loadPlugin(t, nil)
	bs := []*backend{newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")}
	ref, err := core.New(core.Config{Strategy: core.SmoothWRR, Backends: []core.Backend{
		{Address: "a:1", Weight: 5}, {Address: "b:1", Weight: 3}, {Address: "c:1", Weight: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for k := 0; k < 20; k++ {
		i, _ := core.Pick(ref, "", core.Filter{}) // smooth_wrr: nothing to end
		want.WriteString(bs[i].name)
	}
	doc := serversYAML([]string{bs[0].srv.URL, bs[1].srv.URL, bs[2].srv.URL}, "weight: 5", "weight: 3", "weight: 2")
	base, client, cancel := reloadPlugin(t, l, nil, doc)
	got := sequence(t, client, base, 3)
	base, client, cancel = reloadPlugin(t, l, cancel, doc)
	got += sequence(t, client, base, 7)
	base, client, _ = reloadPlugin(t, l, cancel, doc)
	got += sequence(t, client, base, 10)
	if got != want.String() {
		t.Errorf("across two reloads: %s, want %s", got, want.String())
	}
}

// TestPluginReloadAddsServer: a reload that adds a server keeps the others'
// state and starts the slow start of the added server only: it gets about a
// tenth of its share at first, while the servers that stay are not ramped.
func TestPluginReloadAddsServer(t *testing.T) {
	l := loadPlugin(t, nil)
	bs := []*backend{newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c"), newBackend(t, "d")}
	doc := func(n int) string {
		var urls, extra []string
		for _, b := range bs[:n] {
			urls = append(urls, b.srv.URL)
			extra = append(extra, "weight: 10")
		}
		return "slowStart: 1h\n" + serversYAML(urls, extra...)
	}
	base, client, cancel := reloadPlugin(t, l, nil, doc(3))
	if s := sequence(t, client, base, 30); strings.Count(s, "a") != 10 || strings.Count(s, "b") != 10 {
		t.Fatalf("three servers of weight 10: %s", s)
	}
	base, client, _ = reloadPlugin(t, l, cancel, doc(4))
	s := sequence(t, client, base, 62)
	for _, name := range []string{"a", "b", "c"} {
		if n := strings.Count(s, name); n < 19 {
			t.Errorf("%s, present before the reload: %d of 62 requests, want 20 (no slow start): %s", name, n, s)
		}
	}
	if n := strings.Count(s, "d"); n > 4 {
		t.Errorf("d, added by the reload: %d of 62 requests, want about 2 (a tenth of its weight at first): %s", n, s)
	}
}

// registryProbe is added to the interpreted plugin package: it reads how
// many names the reload registry holds and sets how long an unused name's
// state is kept.
const registryProbe = `package traefikplugin

import "time"

func KeptNames() int {
	keptMu.Lock()
	defer keptMu.Unlock()
	return len(kept)
}

func SetIdleGrace(d time.Duration) {
	keptMu.Lock()
	idleGrace = d
	keptMu.Unlock()
}
`

// TestPluginRegistryDropsRemovedNames: under the loader, the state of a
// middleware name goes once every middleware built for it has ended and
// no New has asked for it within the grace time, so that the registry
// does not grow with every name ever configured; a New of the name after
// that starts afresh. A reload in Traefik's order (the previous ctx
// cancelled first, then New) still continues the smooth sequence.
func TestPluginRegistryDropsRemovedNames(t *testing.T) {
	l := loadPlugin(t, map[string]string{"probe.go": registryProbe})
	count := func() int {
		v, err := l.i.Eval("traefikplugin.KeptNames()")
		if err != nil {
			t.Fatal(err)
		}
		return int(v.Int())
	}
	set, err := l.i.Eval("traefikplugin.SetIdleGrace")
	if err != nil {
		t.Fatal(err)
	}
	const grace = 200 * time.Millisecond
	set.Call([]reflect.Value{reflect.ValueOf(grace)})

	bs := []*backend{newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")}
	doc := serversYAML([]string{bs[0].srv.URL, bs[1].srv.URL, bs[2].srv.URL}, "weight: 5", "weight: 3", "weight: 2")
	ref, err := core.New(core.Config{Strategy: core.SmoothWRR, Backends: []core.Backend{
		{Address: "a:1", Weight: 5}, {Address: "b:1", Weight: 3}, {Address: "c:1", Weight: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for k := 0; k < 10; k++ {
		i, _ := core.Pick(ref, "", core.Filter{}) // smooth_wrr: nothing to end
		want.WriteString(bs[i].name)
	}
	build := func(name string) (string, *http.Client, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		h, err := l.newHandler(ctx, doc, name)
		if err != nil {
			t.Fatal(err)
		}
		base, client := front(t, h)
		return base, client, cancel
	}

	// Ten names, each used for three requests and then removed.
	for k := 0; k < 10; k++ {
		base, client, cancel := build(fmt.Sprintf("gone%d", k))
		if s := sequence(t, client, base, 3); s != want.String()[:3] {
			t.Fatalf("gone%d: %s, want %s", k, s, want.String()[:3])
		}
		cancel()
	}
	// "lb" stays, through a reload in Traefik's order.
	base, client, cancel := build("lb")
	got := sequence(t, client, base, 4)
	cancel()
	time.Sleep(grace / 4) // the ended middleware lets go of the name meanwhile
	base, client, _ = build("lb")
	got += sequence(t, client, base, 6)
	if got != want.String() {
		t.Errorf("lb, across a reload that cancels first: %s, want %s", got, want.String())
	}

	deadline := time.Now().Add(5 * time.Second)
	for count() > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(); n != 1 {
		t.Errorf("the registry holds %d names %v after the grace time; want 1, lb's (the ten removed ones dropped)", n, grace)
	}
	// A removed name built again starts over.
	base, client, _ = build("gone0")
	if s := sequence(t, client, base, 3); s != want.String()[:3] {
		t.Errorf("gone0 built again: %s, want a fresh start %s", s, want.String()[:3])
	}
}
