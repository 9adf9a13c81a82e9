package caddyplugin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// stateOf fetches GET /lbpack/state and returns the policy with id.
func stateOf(t *testing.T, id string) PolicyState {
	t.Helper()
	w := httptest.NewRecorder()
	if err := serveState(w, httptest.NewRequest(http.MethodGet, "/lbpack/state", nil)); err != nil {
		t.Fatal(err)
	}
	var body struct{ Policies []PolicyState }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s: %v", w.Body, err)
	}
	for _, ps := range body.Policies {
		if ps.ID == id {
			return ps
		}
	}
	t.Fatalf("policy %s not in %s", id, w.Body)
	return PolicyState{}
}

// The state shows each upstream's effective weight: its weight, 0 when
// down, 10% of it when a slow start has just begun.
func TestAdminStateEffectiveWeight(t *testing.T) {
	m := &SmoothWRR{base: base{Options: Options{Upstreams: map[string]UpstreamOptions{
		abcd[0]: {Weight: 10},
		abcd[1]: {Weight: 10, SlowStart: caddy1h},
		abcd[2]: {Weight: 4, Down: true},
	}}}}
	h := &health{}
	h.set(abcd[1], true)
	clock := provisionClocked(t, m, h)
	static := pool(abcd...)
	m.Select(static, request("/", nil), nil)
	h.set(abcd[1], false)
	clock.add(healthRefresh)
	for i := 0; i < 4; i++ {
		m.Select(static, request("/", nil), nil)
	}
	want := []struct {
		weight, effective int
		down              bool
	}{{10, 10, false}, {10, 1, false}, {4, 0, true}, {1, 1, false}}
	got := stateOf(t, m.p.id).Upstreams
	if len(got) != len(want) {
		t.Fatalf("%d upstreams, want %d", len(got), len(want))
	}
	for i, u := range got {
		w := want[i]
		if u.Address != abcd[i] || u.Weight != w.weight || u.EffectiveWeight != w.effective || u.Down != w.down {
			t.Errorf("upstream %d: %+v; want %s weight %d effective %d down %v", i, u, abcd[i], w.weight, w.effective, w.down)
		}
		if u.EstimateMS != nil {
			t.Errorf("upstream %d: smooth_wrr keeps no latency estimate, got %v ms", i, *u.EstimateMS)
		}
	}
}

// fair's own latency estimate (core's) shows for the upstreams it measured,
// beside the policy's moving average of attempt durations.
func TestAdminStateLatencyEstimate(t *testing.T) {
	m := &Fair{}
	provision(t, m, &health{})
	static := pool(abc...)
	picked := map[string]bool{}
	for i := 0; i < 2; i++ {
		r := request("/", nil)
		picked[m.Select(static, r, nil).Dial] = true
		r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("http.reverse_proxy.upstream.latency", 3*time.Millisecond)
		cancelRequest(r)
	}
	waitIdle(t, &m.p)
	for _, u := range stateOf(t, m.p.id).Upstreams {
		// What is timed is Caddy's upstream latency: 3 ms exactly.
		measured := u.EstimateMS != nil && *u.EstimateMS == 3 && u.LatencyMS != nil && *u.LatencyMS == 3
		if measured != picked[u.Address] {
			t.Errorf("%s: picked %v, estimate %v ms, average %v ms", u.Address, picked[u.Address], u.EstimateMS, u.LatencyMS)
		}
		if u.EffectiveWeight != 1 {
			t.Errorf("%s: effective weight %d, want 1", u.Address, u.EffectiveWeight)
		}
	}
	if len(picked) != 2 {
		t.Errorf("two idle unmeasured upstreams of three: picked %v, want two distinct", picked)
	}
}
