package caddyplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
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
	// Two requests at once: the second is picked while the first is in
	// flight (ended, the first would be measured before the second pick).
	var reqs []*http.Request
	for i := 0; i < 2; i++ {
		r := request("/", nil)
		picked[m.Select(static, r, nil).Dial] = true
		reqs = append(reqs, r)
	}
	for _, r := range reqs {
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

// config is one loaded Caddy config: its context (and metrics registry).
type config struct {
	ctx    caddy.Context
	unload context.CancelFunc
}

// newConfig starts a config; t's cleanup unloads it if the test has not,
// and forgets the state of the identities left without policies.
func newConfig(t *testing.T) *config {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(func() {
		cancel()
		forgetIdle()
	})
	return &config{ctx: ctx, unload: cancel}
}

// load loads a policy module from its JSON the way Caddy does, outside a
// reverse proxy, and gives it the health view h.
func (c *config) load(t *testing.T, name, js string, h *health) (selector, error) {
	t.Helper()
	mod, err := c.ctx.LoadModuleByID("http.reverse_proxy.selection_policies."+name, json.RawMessage(js))
	if err != nil {
		return nil, err
	}
	m := mod.(selector)
	m.pol().available, m.pol().healthy = h.available, h.healthy
	m.pol().logger = zap.NewNop()
	return m, nil
}

func (c *config) mustLoad(t *testing.T, name, js string) selector {
	t.Helper()
	m, err := c.load(t, name, js, &health{})
	if err != nil {
		t.Fatalf("load %s %s: %v", name, js, err)
	}
	return m
}

// metrics gathers the config's registry: "name{label=value,...}" -> value
// (labels in name order), for the lbpack series only.
func (c *config) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	fams, err := c.ctx.GetMetricsRegistry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "caddy_lbpack_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// picks makes n picks of m over p (one request each, ended at once).
func picks(m selector, p reverseproxy.UpstreamPool, n int) {
	for i := 0; i < n; i++ {
		r := request("/", nil)
		m.Select(p, r, nil)
		cancelRequest(r)
	}
}

// A reload of the same configuration keeps each series' labels and its
// count: the new config's policy takes over the old one's counters.
func TestMetricsSurviveReload(t *testing.T) {
	const js = `{"weights":[5,3,2]}`
	old := newConfig(t)
	m1 := old.mustLoad(t, "smooth_wrr", js)
	picks(m1, pool(abc...), 10)

	cur := newConfig(t) // Caddy provisions the new config, then unloads the old
	m2 := cur.mustLoad(t, "smooth_wrr", js)
	old.unload()
	picks(m2, pool(abc...), 10)

	id := m2.pol().id
	if id != m1.pol().id {
		t.Fatalf("same config, ids %q then %q", m1.pol().id, id)
	}
	got := cur.metrics(t)
	for i, want := range []float64{10, 6, 4} {
		key := fmt.Sprintf("caddy_lbpack_picks_total{policy=%s,upstream=%s}", id, abc[i])
		if got[key] != want {
			t.Errorf("%s = %v, want %v (5:3:2 over two loads of 10 picks); have %v", key, got[key], want, got)
		}
	}
	if ps := stateOf(t, id); ps.Upstreams[0].Picks != 10 {
		t.Errorf("/lbpack/state: %s picks %d, want 10", abc[0], ps.Upstreams[0].Picks)
	}
}

// A policy's identity is its name option, or its module name and a hash of
// its configuration: the same on every load, apart for different options,
// numbered within one config when two are alike.
func TestPolicyIdentity(t *testing.T) {
	a, b := newConfig(t), newConfig(t)
	first := a.mustLoad(t, "url_hash", `{"mode":"maglev"}`).pol().id
	if !regexp.MustCompile(`^url_hash-[0-9a-f]{8}$`).MatchString(first) {
		t.Errorf("default id %q: want url_hash-<8 hex digits>", first)
	}
	if again := b.mustLoad(t, "url_hash", `{"mode":"maglev"}`).pol().id; again != first {
		t.Errorf("same config in another load: id %q, want %q", again, first)
	}
	for _, js := range []string{`{"mode":"ketama"}`, `{"mode":"maglev","key":"{http.request.header.X-User}"}`, `{"mode":"maglev","weights":[1,2]}`} {
		if id := b.mustLoad(t, "url_hash", js).pol().id; id == first || !strings.HasPrefix(id, "url_hash-") {
			t.Errorf("url_hash %s: id %q, want url_hash-... other than %q", js, id, first)
		}
	}
	if twin := a.mustLoad(t, "url_hash", `{"mode":"maglev"}`).pol().id; twin != first+"-2" {
		t.Errorf("second alike policy in one config: id %q, want %q", twin, first+"-2")
	}
	if id := a.mustLoad(t, "fair", `{"name":"checkout"}`).pol().id; id != "checkout" {
		t.Errorf("name checkout: id %q", id)
	}
	if _, err := a.load(t, "smooth_wrr", `{"name":"checkout"}`, &health{}); err == nil || !strings.Contains(err.Error(), `name "checkout"`) {
		t.Errorf("a second policy named checkout in one config: err %v, want one naming it", err)
	}
	if id := b.mustLoad(t, "smooth_wrr", `{"name":"checkout"}`).pol().id; id != "checkout" {
		t.Errorf("name checkout in another config: id %q", id)
	}
	for _, name := range []string{"two words", "é", `q"uote`} {
		js, _ := json.Marshal(map[string]string{"name": name})
		if _, err := b.load(t, "fair", string(js), &health{}); err == nil || !strings.Contains(err.Error(), "name") {
			t.Errorf("name %q: err %v, want it refused", name, err)
		}
	}
}

// The state shows each policy's identity, mode, key and options.
func TestAdminStateDescribesPolicy(t *testing.T) {
	c := newConfig(t)
	tests := []struct {
		name, js, mode, key string
	}{
		{"url_hash", `{"name":"users","mode":"maglev","key":"{http.request.header.X-User}"}`, "maglev", "{http.request.header.X-User}"},
		{"url_hash", `{"name":"uris"}`, "ketama", "{http.request.uri}"},
		{"nginx_ip_hash", `{"name":"clients"}`, "", "{client_ip}"},
		{"smooth_wrr", `{"name":"web","weights":[5,3,2],"stagger":true}`, "", ""},
	}
	for _, tt := range tests {
		c.mustLoad(t, tt.name, tt.js)
		ps := stateOf(t, tt.js[9:strings.IndexByte(tt.js[9:], '"')+9])
		if ps.Policy != tt.name || ps.Mode != tt.mode || ps.Key != tt.key {
			t.Errorf("%s %s: policy %q mode %q key %q; want %q %q %q", tt.name, tt.js, ps.Policy, ps.Mode, ps.Key, tt.name, tt.mode, tt.key)
		}
		var want, got map[string]any
		json.Unmarshal([]byte(tt.js), &want)
		if err := json.Unmarshal(ps.Options, &got); err != nil {
			t.Fatalf("%s: options %s: %v", tt.js, ps.Options, err)
		}
		for k, v := range want {
			if fmt.Sprint(got[k]) != fmt.Sprint(v) {
				t.Errorf("%s: options %s: %s = %v, want %v", tt.js, ps.Options, k, got[k], v)
			}
		}
	}
}

// A policy that follows attempts exports failures and requests in flight;
// every policy exports effective weights and one info series.
func TestMetricsSeries(t *testing.T) {
	c := newConfig(t)
	lc := c.mustLoad(t, "weighted_least_conn", `{"name":"lc"}`)
	rr := c.mustLoad(t, "smooth_wrr", `{"name":"rr","upstreams":{"10.0.0.3:80":{"down":true}}}`)
	static := pool(abc...)
	// One request whose first attempt fails (Caddy selects again: a retry)
	// and whose second is still in flight.
	r := request("/", nil)
	first := lc.Select(static, r, nil)
	second := lc.Select(static, r, nil)
	picks(rr, static, 2)
	defer cancelRequest(r)

	got := c.metrics(t)
	want := map[string]float64{
		"caddy_lbpack_policy_info{key=,mode=,module=weighted_least_conn,policy=lc}": 1,
		"caddy_lbpack_policy_info{key=,mode=,module=smooth_wrr,policy=rr}":          1,
		"caddy_lbpack_failures_total{policy=lc,upstream=" + first.Dial + "}":        1,
		"caddy_lbpack_requests_in_flight{policy=lc,upstream=" + second.Dial + "}":   1,
		"caddy_lbpack_effective_weight{policy=rr,upstream=10.0.0.3:80}":             0,
		"caddy_lbpack_effective_weight{policy=rr,upstream=10.0.0.1:80}":             1,
		"caddy_lbpack_picks_total{policy=rr,upstream=10.0.0.3:80}":                  0,
		"caddy_lbpack_picks_total{policy=lc,upstream=" + second.Dial + "}":          1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if first == second {
		t.Errorf("the retry went to %s again", first.Dial)
	}
	for k := range got {
		if strings.Contains(k, "policy=rr,") && (strings.HasPrefix(k, "caddy_lbpack_failures_total") || strings.HasPrefix(k, "caddy_lbpack_requests_in_flight")) {
			t.Errorf("smooth_wrr does not follow attempts, yet exports %s", k)
		}
	}
	// 3 upstreams: picks and effective weight for both, failures and in
	// flight for lc; one info series each.
	if len(got) != 3*2*2+3*2+2 {
		t.Errorf("%d series, want 20: %v", len(got), got)
	}
}

// An upstream gone from the pool (dynamic upstreams) loses its series.
func TestMetricsDropGoneUpstreams(t *testing.T) {
	c := newConfig(t)
	m := c.mustLoad(t, "smooth_wrr", `{"name":"dyn"}`)
	picks(m, pool(abcd...), 4)
	picks(m, pool(abc...), 3)
	got := c.metrics(t)
	if _, ok := got["caddy_lbpack_picks_total{policy=dyn,upstream="+abcd[3]+"}"]; ok {
		t.Errorf("series of %s, gone from the pool, still exported: %v", abcd[3], got)
	}
	for _, a := range abc {
		if v := got["caddy_lbpack_picks_total{policy=dyn,upstream="+a+"}"]; v != 2 {
			t.Errorf("%s: %v picks, want 2", a, v)
		}
	}
}

// The Caddyfile's name option sets the identity; two policies of one config
// may not share one.
func TestCaddyfileName(t *testing.T) {
	const three = "10.0.0.1:80 10.0.0.2:80 10.0.0.3:80"
	cfg, err := adapt(t, site(three+" {\n\t\tlb_policy smooth_wrr 5 3 2 {\n\t\t\tname checkout\n\t\t}\n\t}"))
	if err != nil {
		t.Fatal(err)
	}
	if got := selectionPolicy(t, cfg); got != `{"name":"checkout","policy":"smooth_wrr","weights":[5,3,2]}` {
		t.Errorf("adapted to %s", got)
	}
	for _, tt := range []struct{ block, want string }{
		{"name", "lb_policy smooth_wrr: name: missing the name"},
		{"name a b", `name: unexpected argument "b"`},
		{`name "a b"`, `lb_policy smooth_wrr: name "a b": ' ' not allowed`},
	} {
		_, err := adapt(t, site(three+" {\n\t\tlb_policy smooth_wrr {\n\t\t\t"+tt.block+"\n\t\t}\n\t}"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %s", tt.block, err, tt.want)
		}
	}
	twice := "{\n\tadmin off\n}\nhttp://localhost:8080 {\n\thandle /a {\n\t\treverse_proxy 10.0.0.1:80 {\n\t\t\tlb_policy fair {\n\t\t\t\tname shop\n\t\t\t}\n\t\t}\n\t}\n" +
		"\thandle {\n\t\treverse_proxy 10.0.0.2:80 {\n\t\t\tlb_policy smooth_wrr {\n\t\t\t\tname shop\n\t\t\t}\n\t\t}\n\t}\n}\n"
	cfg, err = adapt(t, twice)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(cfg); err == nil || !strings.Contains(err.Error(), `name "shop": another lbpack policy of this config has that name`) {
		t.Errorf("two policies named shop: err %v", err)
	}
}
