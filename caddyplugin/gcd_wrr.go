package caddyplugin

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/lbpack/lbpack/core"
)

func init() {
	caddy.RegisterModule(new(GCDWRR))
}

// GCDWRR is LVS's interleaved weighted round robin: the current weight
// steps down by the weights' greatest common divisor and every upstream at
// least that heavy is picked in turn (5, 3, 2 gives a a a b a b c a b c).
//
// Caddyfile:
//
//	lb_policy gcd_wrr [<weight>...] {
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
type GCDWRR struct {
	base

	// Stagger starts the schedule at a random point of its period, so that
	// many proxies with the same configuration do not send in step.
	Stagger bool `json:"stagger,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*GCDWRR) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.gcd_wrr",
		New: func() caddy.Module { return new(GCDWRR) },
	}
}

// Provision checks the options against the reverse proxy's upstreams and
// prepares the balancer.
func (m *GCDWRR) Provision(ctx caddy.Context) error {
	return m.p.setup(ctx, "gcd_wrr", &m.Options, core.Config{Strategy: core.GCDWRR, Stagger: m.Stagger})
}

// UnmarshalCaddyfile sets up the policy from Caddyfile tokens.
func (m *GCDWRR) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return m.Options.unmarshal(d, staggerOption(&m.Stagger))
}

// Interface guards
var (
	_ caddy.Provisioner     = (*GCDWRR)(nil)
	_ caddy.Validator       = (*GCDWRR)(nil)
	_ caddy.CleanerUpper    = (*GCDWRR)(nil)
	_ reverseproxy.Selector = (*GCDWRR)(nil)
	_ caddyfile.Unmarshaler = (*GCDWRR)(nil)
)
