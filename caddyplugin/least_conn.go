package caddyplugin

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/lbpack/lbpack/core"
)

func init() {
	caddy.RegisterModule(new(WeightedLeastConn))
}

// WeightedLeastConn is nginx's least_conn: the upstream with the fewest
// requests in flight relative to its weight, ties shared out by smooth
// weighted round robin. Caddy's own least_conn ignores weights and breaks
// ties at random. In-flight counts are this policy's own (an attempt runs
// from Select to the end of the request, or to Caddy's next try when it
// retries), so retries count correctly.
//
// Caddyfile:
//
//	lb_policy weighted_least_conn [<weight>...] {
//		name         <name>
//		two_choices
//		weight       <address> <weight>
//		backup       <address>...
//		down         <address>...
//		slow_start   <address> <duration>
//		max_fails    [<address>] <n>
//		fail_timeout [<address>] <duration>
//		max_conns    [<address>] <n>
//		fail_status  <status|class>...
//		route        <address> <id>
//		drain        <address>...
//		sticky       cookie <name> {...} | route <sources...> | learn {...}
//	}
type WeightedLeastConn struct {
	base

	// TwoChoices picks the better of two random upstreams (the power of two
	// choices, O(1) per pick) instead of nginx's exact scan of all of them.
	TwoChoices bool `json:"two_choices,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*WeightedLeastConn) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.weighted_least_conn",
		New: func() caddy.Module { return new(WeightedLeastConn) },
	}
}

// Provision checks the options against the reverse proxy's upstreams and
// prepares the balancer.
func (m *WeightedLeastConn) Provision(ctx caddy.Context) error {
	return m.p.setup(ctx, "weighted_least_conn", &m.Options, core.Config{Strategy: core.LeastConn, TwoChoices: m.TwoChoices})
}

// UnmarshalCaddyfile sets up the policy from Caddyfile tokens.
func (m *WeightedLeastConn) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return m.Options.unmarshal(d, func(d *caddyfile.Dispenser, name string) (bool, error) {
		if name != "two_choices" {
			return false, nil
		}
		m.TwoChoices = true
		return true, noMoreArgs(d, name)
	})
}

// Interface guards
var (
	_ caddy.Provisioner     = (*WeightedLeastConn)(nil)
	_ caddy.Validator       = (*WeightedLeastConn)(nil)
	_ caddy.CleanerUpper    = (*WeightedLeastConn)(nil)
	_ reverseproxy.Selector = (*WeightedLeastConn)(nil)
	_ caddyfile.Unmarshaler = (*WeightedLeastConn)(nil)
)
