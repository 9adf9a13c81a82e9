package caddyplugin

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/lbpack/lbpack/core"
)

func init() {
	caddy.RegisterModule(new(SmoothWRR))
}

// SmoothWRR is nginx's smooth weighted round robin: over weights 5, 3, 2 it
// sends a b c a a b a c b a, spreading each upstream's share evenly instead
// of in bursts. With static upstreams a pick is O(1); after a change of
// health, O(n) for at most about two periods while the policy learns nginx's
// schedule over the upstreams left, then O(1) again.
//
// Caddyfile:
//
//	lb_policy smooth_wrr [<weight>...] {
//		name         <name>
//		weight       <address> <weight>
//		backup       <address>...
//		down         <address>...
//		slow_start   <address> <duration>
//		stagger
//		max_fails    [<address>] <n>
//		fail_timeout [<address>] <duration>
//		max_conns    [<address>] <n>
//		fail_status  <status|class>...
//		route        <address> <id>
//		drain        <address>...
//		sticky       cookie <name> {...} | route <sources...> | learn {...}
//	}
type SmoothWRR struct {
	base

	// Stagger starts the schedule at a random point of its period, so that
	// many proxies with the same configuration do not send in step.
	Stagger bool `json:"stagger,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*SmoothWRR) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.smooth_wrr",
		New: func() caddy.Module { return new(SmoothWRR) },
	}
}

// Provision checks the options against the reverse proxy's upstreams and
// prepares the balancer.
func (m *SmoothWRR) Provision(ctx caddy.Context) error {
	return m.p.setup(ctx, "smooth_wrr", &m.Options, core.Config{Strategy: core.SmoothWRR, Stagger: m.Stagger})
}

// UnmarshalCaddyfile sets up the policy from Caddyfile tokens.
func (m *SmoothWRR) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return m.Options.unmarshal(d, staggerOption(&m.Stagger))
}

// staggerOption parses the `stagger` flag of the round robin policies.
func staggerOption(stagger *bool) optionParser {
	return func(d *caddyfile.Dispenser, name string) (bool, error) {
		if name != "stagger" {
			return false, nil
		}
		*stagger = true
		return true, noMoreArgs(d, name)
	}
}

// Interface guards
var (
	_ caddy.Provisioner     = (*SmoothWRR)(nil)
	_ caddy.Validator       = (*SmoothWRR)(nil)
	_ caddy.CleanerUpper    = (*SmoothWRR)(nil)
	_ reverseproxy.Selector = (*SmoothWRR)(nil)
	_ caddyfile.Unmarshaler = (*SmoothWRR)(nil)
)
