package traefikplugin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

// reload builds the middleware name again from cfg, as a Traefik reload
// does: the previous one's context ends once the new one exists.
func reload(t *testing.T, prev context.CancelFunc, cfg *Config, name string) (*Plugin, context.CancelFunc) {
	t.Helper()
	h, cancel := reloadHandler(t, prev, cfg, name)
	return pluginOf(h), cancel
}

// reloadHandler is reload returning the handler New built.
func reloadHandler(t *testing.T, prev context.CancelFunc, cfg *Config, name string) (http.Handler, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, err := New(ctx, nil, cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	if prev != nil {
		prev()
	}
	return h, cancel
}

func weighted(weights ...int) *Config {
	cfg := CreateConfig()
	for k, w := range weights {
		cfg.Servers = append(cfg.Servers, Server{URL: "http://10.0.0." + string(rune('1'+k)) + ":80", Weight: intp(w)})
	}
	return cfg
}

func picks(p *Plugin, n int) string {
	var b strings.Builder
	for k := 0; k < n; k++ {
		i, _ := core.Pick(p.bal.Load().(*balancer).Balancer, "", core.Filter{}) // smooth_wrr: nothing to end
		b.WriteByte(byte('a' + i))
	}
	return b.String()
}

// TestReloadContinuesSchedule: a reload with the same settings continues
// nginx's smooth sequence where it was; a reload of another name, or after
// the strategy changed, starts over.
func TestReloadContinuesSchedule(t *testing.T) {
	ref, err := core.New(core.Config{Strategy: core.SmoothWRR, Backends: []core.Backend{{Address: "a:1", Weight: 5}, {Address: "b:1", Weight: 3}, {Address: "c:1", Weight: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for k := 0; k < 20; k++ {
		i, _ := core.Pick(ref, "", core.Filter{})
		want.WriteByte(byte('a' + i))
	}
	p, cancel := reload(t, nil, weighted(5, 3, 2), t.Name())
	got := picks(p, 7)
	p2, cancel := reload(t, cancel, weighted(5, 3, 2), t.Name())
	got += picks(p2, 13)
	if got != want.String() {
		t.Errorf("across a reload: %s, want %s", got, want.String())
	}
	if p2.sh != p.sh {
		t.Error("a reload with the same settings built a new balancer")
	}
	other, _ := reload(t, nil, weighted(5, 3, 2), t.Name()+"/other")
	if s := picks(other, 7); s != want.String()[:7] {
		t.Errorf("another name: %s, want a fresh %s", s, want.String()[:7])
	}
	cfg := weighted(5, 3, 2)
	cfg.Strategy = core.GCDWRR
	p3, _ := reload(t, cancel, cfg, t.Name())
	if p3.bal.Load().(*balancer).Requests(0) != 0 {
		t.Error("a new strategy kept the old balancer's counters")
	}
}

// TestReloadCarriesState: a reload that adds and removes servers keeps the
// counters of those that remain: requests in flight of the replaced
// middleware end on the counters the new one reads, failures stay, only the
// added server starts its slow start, and the removed one is gone.
func TestReloadCarriesState(t *testing.T) {
	cfg := weighted(10, 10, 10)
	cfg.Strategy = core.LeastConn
	cfg.SlowStart = "1h"
	p, cancel := reload(t, nil, cfg, t.Name())
	old := p.bal.Load().(*balancer)
	only := func(i int) core.Filter { return core.Filter{Allow: func(j int) bool { return j == i }} }
	_, inflight := core.Pick(old.Balancer, "", only(1)) // in flight across the reload
	_, fails := core.Pick(old.Balancer, "", only(2))
	core.Done(old.Balancer, 2, fails, 0, true) // server c fails once
	p.markFailed()

	next := weighted(10, 10, 10, 10)
	next.Strategy = core.LeastConn
	next.SlowStart = "1h"
	next.Servers = append(next.Servers[:0], next.Servers[1], next.Servers[2], next.Servers[3]) // a removed, d added
	p2, _ := reload(t, cancel, next, t.Name())
	b := p2.bal.Load().(*balancer)
	if n := b.InFlight(0); n != 1 {
		t.Errorf("b: %d in flight after the reload, want 1", n)
	}
	if n := b.Fails(1); n != 1 || !b.failed {
		t.Errorf("c: %d failures (failed flag %v), want 1", n, b.failed)
	}
	if w := b.EffectiveWeight(0); w != 10 {
		t.Errorf("b: effective weight %d, want 10 (no slow start for a server that stays)", w)
	}
	if w := b.EffectiveWeight(2); w < 1 || w > 2 {
		t.Errorf("d, added: effective weight %d, want its slow start's first tenth", w)
	}
	core.Done(old.Balancer, 1, inflight, 0, false) // the old middleware's request ends
	if n := b.InFlight(0); n != 0 {
		t.Errorf("b: %d in flight after the old request ended, want 0", n)
	}
	keptMu.Lock()
	addrs := strings.Join(kept[t.Name()].addrs, " ")
	keptMu.Unlock()
	if addrs != "10.0.0.2:80 10.0.0.3:80 10.0.0.4:80" {
		t.Errorf("kept addresses %s", addrs)
	}
}

// TestReloadKeepsHealth: a server the active health check marked down stays
// down across a reload that changes the server list, until a check finds
// it up again; without health checks in the new settings the mark goes.
func TestReloadKeepsHealth(t *testing.T) {
	// The checks go to loopback servers whose health check never answers
	// while the test runs (its timeout is an hour), so that only the test
	// marks servers up and down.
	var urls []string
	for k := 0; k < 3; k++ {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	checked := func(n int) *Config {
		cfg := CreateConfig()
		for _, u := range urls[:n] {
			cfg.Servers = append(cfg.Servers, Server{URL: u, Weight: intp(1)})
		}
		cfg.HealthCheck = HealthCheck{Path: "/health", Interval: "1h", Timeout: "1h"}
		return cfg
	}
	p, cancel := reload(t, nil, checked(2), t.Name())
	p.setHealth(1, false, "status 503")
	p2, cancel := reload(t, cancel, checked(3), t.Name())
	if w := p2.bal.Load().(*balancer).EffectiveWeight(1); w != 0 {
		t.Errorf("unhealthy server after a reload: effective weight %d, want 0", w)
	}
	p2.setHealth(1, true, "status 200")
	if w := p2.bal.Load().(*balancer).EffectiveWeight(1); w != 1 {
		t.Errorf("back up: effective weight %d, want 1", w)
	}
	p2.setHealth(0, false, "status 503")
	unchecked := checked(3)
	unchecked.HealthCheck = CreateConfig().HealthCheck
	p3, cancel := reload(t, cancel, unchecked, t.Name())
	defer cancel()
	if w := p3.bal.Load().(*balancer).EffectiveWeight(0); w != 1 {
		t.Errorf("health checks off: effective weight %d, want 1", w)
	}
}

// TestRegistryDropsUnusedNames: a name's state stays while any middleware
// built for it is in use, and goes idleGrace after the last one ended
// unless a New asked for it meanwhile.
func TestRegistryDropsUnusedNames(t *testing.T) {
	keptMu.Lock()
	saved := idleGrace
	idleGrace = 100 * time.Millisecond
	keptMu.Unlock()
	defer func() {
		keptMu.Lock()
		idleGrace = saved
		keptMu.Unlock()
	}()
	held := func(name string) bool {
		keptMu.Lock()
		defer keptMu.Unlock()
		return kept[name] != nil
	}
	name := t.Name()
	_, cancel1 := reload(t, nil, weighted(5, 3, 2), name)
	_, cancel2 := reload(t, nil, weighted(5, 3, 2), name) // a second router using it
	cancel1()
	time.Sleep(250 * time.Millisecond)
	if !held(name) {
		t.Fatal("dropped while one of its middlewares is in use")
	}
	cancel2()
	time.Sleep(30 * time.Millisecond)
	_, cancel3 := reload(t, nil, weighted(5, 3, 2), name) // New within the grace time
	time.Sleep(250 * time.Millisecond)
	if !held(name) {
		t.Fatal("dropped although a New came within the grace time")
	}
	cancel3()
	deadline := time.Now().Add(5 * time.Second)
	for held(name) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if held(name) {
		t.Error("still held after its last middleware ended and the grace time passed")
	}
}
