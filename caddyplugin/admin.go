package caddyplugin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(AdminState{})
}

// UpstreamState is one upstream in GET /lbpack/state.
type UpstreamState struct {
	// Address is the upstream's dial address; Weight its configured
	// weight.
	Address string `json:"address"`
	Weight  int    `json:"weight"`
	// EffectiveWeight is the weight the upstream takes part with now:
	// lowered after failures under the policies that follow nginx's
	// smooth weighting, ramping during a slow start, 0 when down (see
	// core's Balancer.EffectiveWeight).
	EffectiveWeight int `json:"effective_weight"`
	// Backup and Down are the upstream's backup and down options.
	Backup bool `json:"backup,omitempty"`
	Down   bool `json:"down,omitempty"`
	// Picks counts the times the policy picked the upstream (kept across
	// reloads of the same policy identity); InFlight the tries in flight,
	// counted by the policies that follow tries.
	Picks    int64 `json:"picks"`
	InFlight int64 `json:"in_flight"`
	// LatencyMS is the moving average (1/8 weight for the newest sample) of
	// the successful attempts this policy timed, in milliseconds; only the
	// policies that follow tries time them (fair, weighted_least_conn,
	// url_hash's bounded mode, any with max_fails or max_conns). Absent
	// before the first.
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
	// ID is the policy's identity, the policy label of its metrics: its
	// name option, or the module name and a hash of its configuration.
	ID string `json:"id"`
	// Policy is the module name (smooth_wrr, url_hash...).
	Policy string `json:"policy"`
	// Mode is url_hash's hash mode; Key what url_hash and nginx_ip_hash
	// hash. Both are absent for the other policies.
	Mode string `json:"mode,omitempty"`
	Key  string `json:"key,omitempty"`
	// Options is the policy's JSON configuration, as Caddy loaded it.
	Options json.RawMessage `json:"options"`
	// Upstreams are those of the pool the policy balanced last (before
	// any request, its static upstreams).
	Upstreams []UpstreamState `json:"upstreams"`
}

// state reports p's current upstreams.
func (p *policy) state() PolicyState {
	ps := PolicyState{ID: p.id, Policy: p.name, Mode: p.desc.mode, Key: p.desc.key,
		Options: p.desc.options, Upstreams: []UpstreamState{}}
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
			InFlight:        stats[i].inflight.Load(),
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
	ps := policiesOf(nil)
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

// Interface guards
var _ caddy.AdminRouter = AdminState{}
