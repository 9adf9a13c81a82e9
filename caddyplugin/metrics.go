package caddyplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/lbpack/lbpack/core"
)

// live lists the provisioned policies, for the admin endpoint, and one
// metrics collector per Caddy metrics registry. Caddy makes a registry per
// loaded config, so the registry also tells the configs apart: while a
// reload runs, the old config's policies and the new one's are both here.
var live = struct {
	sync.Mutex
	policies   map[*policy]*prometheus.Registry
	collectors map[*prometheus.Registry]*collector
}{
	policies:   make(map[*policy]*prometheus.Registry),
	collectors: make(map[*prometheus.Registry]*collector),
}

// policyDesc is what the admin endpoint and the metrics say about a policy
// besides its identity.
type policyDesc struct {
	mode    string          // url_hash's hash mode, the default filled in
	key     string          // the placeholder expression the hash policies hash
	options json.RawMessage // the module's JSON configuration
}

// checkName checks a policy's name option.
func checkName(name string) error {
	if name == "" {
		return errors.New("name: must not be empty")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.-/:", r)) {
			return fmt.Errorf("name %q: %q not allowed (letters, digits and _ . - / : only)", name, r)
		}
	}
	return nil
}

// identify describes p and returns its identity, and the config it is
// built from: the module name, the module's JSON configuration and the
// reverse proxy's upstreams (h, nil outside one). The identity is the name
// option, or else the module name and 8 hex digits of a hash of the rest of
// the config: the same for the same configuration on every load, and
// different between policies that differ in any option or upstream.
func (p *policy) identify(ctx caddy.Context, h *reverseproxy.Handler) (id, config string) {
	// ctx.Module is the module being provisioned when Caddy loads it; a
	// policy provisioned by hand describes its shared options only.
	var conf []byte
	if m := ctx.Module(); m != nil && m.CaddyModule().ID == "http.reverse_proxy.selection_policies."+caddy.ModuleID(p.name) {
		conf, _ = json.Marshal(m)
	}
	if conf == nil {
		conf, _ = json.Marshal(p.opts)
	}
	p.desc.options = conf
	switch p.cfg.Strategy {
	case core.URLHash:
		var f struct{ Key string }
		_ = json.Unmarshal(conf, &f)
		p.desc.key = f.Key
		p.desc.mode = p.cfg.HashMode
		if p.desc.mode == "" {
			p.desc.mode = core.HashKetama
		}
	case core.IPHash:
		p.desc.key = "{client_ip}"
	}
	built := conf
	if h != nil {
		built = append(append(built[:len(built):len(built)], 0), h.DynamicUpstreamsRaw...)
		for _, u := range h.Upstreams {
			built = append(append(built, 0), u.Dial...)
		}
	}
	config = p.name + "\x00" + string(built)
	if p.opts.Name != "" {
		return p.opts.Name, config
	}
	sum := fnv.New32a()
	sum.Write(built)
	return fmt.Sprintf("%s-%08x", p.name, sum.Sum32()), config
}

// register gives p its identity, adds it to the admin endpoint and to its
// config's metrics, and hands it the state of its identity (see acquire),
// so that its balancer and counters go on across a reload. Two policies of
// one config with the same default identity (the same options and
// upstreams) get -2, -3... in the order Caddy provisions them; two with the
// same name are an error.
func register(p *policy, ctx caddy.Context, h *reverseproxy.Handler) error {
	id, config := p.identify(ctx, h)
	reg := ctx.GetMetricsRegistry()
	live.Lock()
	defer live.Unlock()
	taken := func(id string) bool {
		for q, r := range live.policies {
			if r == reg && q.id == id {
				return true
			}
		}
		return false
	}
	if taken(id) {
		if p.opts.Name != "" {
			return fmt.Errorf("name %q: another lbpack policy of this config has that name", id)
		}
		n := 2
		for taken(fmt.Sprintf("%s-%d", id, n)) {
			n++
		}
		p.logger.Warn("lbpack policies with the same options and upstreams are told apart by the order Caddy provisions them in, which may change between reloads across servers; give each a name",
			zap.String("policy", id))
		id = fmt.Sprintf("%s-%d", id, n)
	}
	p.id = id
	acquire(p, config)
	live.policies[p] = reg
	if reg == nil || live.collectors[reg] != nil {
		return nil
	}
	c := &collector{reg: reg}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			p.logger.Warn("lbpack metrics not registered", zap.Error(err))
			return nil
		}
	}
	live.collectors[reg] = c
	return nil
}

// unregister removes p and releases its state; the collector goes with its
// config's last policy.
func unregister(p *policy) {
	live.Lock()
	defer live.Unlock()
	reg, ok := live.policies[p]
	if !ok {
		return
	}
	delete(live.policies, p)
	release(p)
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

// policiesOf returns the live policies of one registry (nil: all of them).
func policiesOf(reg *prometheus.Registry) []*policy {
	live.Lock()
	defer live.Unlock()
	var ps []*policy
	for p, r := range live.policies {
		if reg == nil || r == reg {
			ps = append(ps, p)
		}
	}
	return ps
}

// The metrics. Every per-upstream series is labelled with the policy's
// identity and the upstream's dial address, and exists for the upstreams of
// the pool the policy balanced last: an upstream that leaves it loses its
// series (its counters carry on if it comes back while the policy still
// remembers it), so dynamic upstreams do not grow the label sets.
var (
	picksDesc = prometheus.NewDesc("caddy_lbpack_picks_total",
		"Times the lbpack policy picked the upstream.",
		[]string{"policy", "upstream"}, nil)
	failuresDesc = prometheus.NewDesc("caddy_lbpack_failures_total",
		"Tries at the upstream that failed (policies that follow tries: fair, weighted_least_conn, url_hash bounded, any with max_fails or max_conns).",
		[]string{"policy", "upstream"}, nil)
	inFlightDesc = prometheus.NewDesc("caddy_lbpack_requests_in_flight",
		"Tries at the upstream in flight (policies that follow tries: fair, weighted_least_conn, url_hash bounded, any with max_fails or max_conns).",
		[]string{"policy", "upstream"}, nil)
	effectiveWeightDesc = prometheus.NewDesc("caddy_lbpack_effective_weight",
		"The weight the upstream takes part with now: lowered after failures, ramping during slow start, 0 when down.",
		[]string{"policy", "upstream"}, nil)
	infoDesc = prometheus.NewDesc("caddy_lbpack_policy_info",
		"One series per lbpack policy, value 1: its module, and the hash policies' mode and key.",
		[]string{"policy", "module", "mode", "key"}, nil)
)

// collector exports the counters of one config's policies. The hot path
// only adds to atomics; the metrics are built at scrape time.
type collector struct {
	reg *prometheus.Registry
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{picksDesc, failuresDesc, inFlightDesc, effectiveWeightDesc, infoDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range policiesOf(c.reg) {
		ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, p.id, p.name, p.desc.mode, p.desc.key)
		bal, _, stats := p.current()
		if bal == nil {
			continue
		}
		for i := 0; i < bal.Len() && i < len(stats); i++ {
			addr := bal.Backend(i).Address
			ch <- prometheus.MustNewConstMetric(picksDesc, prometheus.CounterValue, float64(stats[i].picks.Load()), p.id, addr)
			ch <- prometheus.MustNewConstMetric(effectiveWeightDesc, prometheus.GaugeValue, float64(bal.EffectiveWeight(i)), p.id, addr)
			if p.track {
				ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(stats[i].failures.Load()), p.id, addr)
				ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(stats[i].inflight.Load()), p.id, addr)
			}
		}
	}
}

// Interface guard
var _ prometheus.Collector = (*collector)(nil)
