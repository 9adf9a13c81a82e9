package caddyplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(AdminState{})
}

// live lists the provisioned policies, for the admin endpoint, and one
// metrics collector per Caddy metrics registry (one per loaded config).
var live = struct {
	sync.Mutex
	policies   map[*policy]*prometheus.Registry
	collectors map[*prometheus.Registry]*picksCollector
}{
	policies:   make(map[*policy]*prometheus.Registry),
	collectors: make(map[*prometheus.Registry]*picksCollector),
}

// register adds p to the admin endpoint and to its config's metrics.
func register(p *policy, ctx caddy.Context) {
	reg := ctx.GetMetricsRegistry()
	live.Lock()
	defer live.Unlock()
	live.policies[p] = reg
	if reg == nil || live.collectors[reg] != nil {
		return
	}
	c := &picksCollector{reg: reg}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			p.logger.Warn("lbpack pick counters not registered", zap.Error(err))
			return
		}
	}
	live.collectors[reg] = c
}

// unregister removes p; the collector goes with its config's last policy.
func unregister(p *policy) {
	live.Lock()
	defer live.Unlock()
	reg, ok := live.policies[p]
	if !ok {
		return
	}
	delete(live.policies, p)
	for _, r := range live.policies {
		if r == reg {
			return
		}
	}
	if c := live.collectors[reg]; c != nil {
		reg.Unregister(c)
		delete(live.collectors, reg)
	}
}

// UpstreamState is one upstream in GET /lbpack/state.
type UpstreamState struct {
	Address string `json:"address"`
	Weight  int    `json:"weight"`
	// EffectiveWeight is the weight the upstream takes part with now:
	// lowered after failures under the policies that follow nginx's
	// smooth weighting, ramping during a slow start, 0 when down (see
	// core's Balancer.EffectiveWeight).
	EffectiveWeight int   `json:"effective_weight"`
	Backup          bool  `json:"backup,omitempty"`
	Down            bool  `json:"down,omitempty"`
	Picks           int64 `json:"picks"`
	InFlight        int64 `json:"in_flight"`
	// LatencyMS is the moving average (1/8 weight for the newest sample) of
	// the successful attempts this policy timed, in milliseconds; only
	// fair, weighted_least_conn and url_hash's bounded mode time attempts.
	// Absent before the first.
	LatencyMS *float64 `json:"latency_ms,omitempty"`
	// EstimateMS is the latency estimate the strategy itself decides by
	// (fair's latency EWMA times its failure penalty, core's
	// Balancer.Latency), in milliseconds; absent for the other policies and
	// before the first measurement.
	EstimateMS *float64 `json:"latency_estimate_ms,omitempty"`
	// Available is Caddy's health view; absent until a request has shown
	// the policy this upstream.
	Available *bool `json:"available,omitempty"`
}

// PolicyState is one policy in GET /lbpack/state.
type PolicyState struct {
	ID        string          `json:"id"`
	Policy    string          `json:"policy"`
	Upstreams []UpstreamState `json:"upstreams"`
}

// state reports p's current upstreams.
func (p *policy) state() PolicyState {
	ps := PolicyState{ID: p.id, Policy: p.name, Upstreams: []UpstreamState{}}
	bal, ups, stats := p.current()
	if bal == nil {
		return ps
	}
	for i := 0; i < bal.Len(); i++ {
		b := bal.Backend(i)
		u := UpstreamState{
			Address:         b.Address,
			Weight:          b.Weight,
			EffectiveWeight: bal.EffectiveWeight(i),
			Backup:          b.Backup,
			Down:            b.Down,
			InFlight:        bal.InFlight(i),
			EstimateMS:      millis(bal.Latency(i)),
		}
		if i < len(stats) {
			u.Picks = stats[i].picks.Load()
			u.LatencyMS = millis(time.Duration(stats[i].latency.Load()))
		}
		if i < len(ups) && ups[i] != nil {
			a := p.available(ups[i])
			u.Available = &a
		}
		ps.Upstreams = append(ps.Upstreams, u)
	}
	return ps
}

// millis is d in milliseconds, nil when d is 0 (not measured).
func millis(d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	ms := float64(d) / float64(time.Millisecond)
	return &ms
}

// livePolicies returns the state of every provisioned policy, by id.
func livePolicies() []PolicyState {
	live.Lock()
	ps := make([]*policy, 0, len(live.policies))
	for p := range live.policies {
		ps = append(ps, p)
	}
	live.Unlock()
	out := make([]PolicyState, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.state())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AdminState is the admin API module serving GET /lbpack/state: every lbpack
// policy of the running config with its upstreams' weights and effective
// weights, picks, requests in flight, latency estimates and availability.
type AdminState struct{}

// CaddyModule returns the Caddy module information.
func (AdminState) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.lbpack",
		New: func() caddy.Module { return new(AdminState) },
	}
}

// Routes returns the admin routes.
func (AdminState) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{
		Pattern: "/lbpack/state",
		Handler: caddy.AdminHandlerFunc(serveState),
	}}
}

func serveState(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(struct {
		Policies []PolicyState `json:"policies"`
	}{livePolicies()})
}

// picksDesc describes the per-upstream pick counters.
var picksDesc = prometheus.NewDesc(
	"caddy_lbpack_picks_total",
	"Upstreams picked by lbpack selection policies.",
	[]string{"policy", "upstream"}, nil)

// picksCollector exports the pick counters of one config's policies. The
// hot path only adds to an atomic; the metric is built at scrape time.
type picksCollector struct {
	reg *prometheus.Registry
}

// Describe implements prometheus.Collector.
func (c *picksCollector) Describe(ch chan<- *prometheus.Desc) { ch <- picksDesc }

// Collect implements prometheus.Collector.
func (c *picksCollector) Collect(ch chan<- prometheus.Metric) {
	live.Lock()
	var ps []*policy
	for p, reg := range live.policies {
		if reg == c.reg {
			ps = append(ps, p)
		}
	}
	live.Unlock()
	for _, p := range ps {
		bal, _, stats := p.current()
		if bal == nil {
			continue
		}
		for i := 0; i < bal.Len() && i < len(stats); i++ {
			ch <- prometheus.MustNewConstMetric(picksDesc, prometheus.CounterValue,
				float64(stats[i].picks.Load()), p.id, bal.Backend(i).Address)
		}
	}
}

// Interface guards
var (
	_ caddy.AdminRouter    = AdminState{}
	_ prometheus.Collector = (*picksCollector)(nil)
)
