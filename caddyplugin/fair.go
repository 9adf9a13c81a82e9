package caddyplugin

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/lbpack/lbpack/core"
)

func init() {
	caddy.RegisterModule(new(Fair))
}

// Fair sends each request to the upstream expected to answer soonest, from
// its weight, its requests in flight and a decaying average of how long its
// attempts took, so that traffic moves away from a slow upstream and comes
// back when it recovers. It needs no other configuration: Select itself
// follows each try, whose latency is Caddy's upstream latency (the time to
// the upstream's response headers).
//
// Caddyfile:
//
//	lb_policy fair [<weight>...] {
//		name         <name>
//		decay_time   <duration>
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
type Fair struct {
	base

	// DecayTime is how fast old latency samples fade from the estimate:
	// a sample's weight halves about every DecayTime * ln 2, or over the
	// next 140 answers if they come sooner; an upstream not picked for
	// DecayTime/4 gets one probe request. Default 10s.
	DecayTime caddy.Duration `json:"decay_time,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*Fair) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.fair",
		New: func() caddy.Module { return new(Fair) },
	}
}

// Provision checks the options against the reverse proxy's upstreams and
// prepares the balancer.
func (m *Fair) Provision(ctx caddy.Context) error {
	return m.p.setup(ctx, "fair", &m.Options, core.Config{Strategy: core.Fair, DecayTime: time.Duration(m.DecayTime)})
}

// UnmarshalCaddyfile sets up the policy from Caddyfile tokens.
func (m *Fair) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return m.Options.unmarshal(d, func(d *caddyfile.Dispenser, name string) (bool, error) {
		if name != "decay_time" {
			return false, nil
		}
		var err error
		m.DecayTime, err = durationArg(d, name)
		return true, err
	})
}

// Interface guards
var (
	_ caddy.Provisioner     = (*Fair)(nil)
	_ caddy.Validator       = (*Fair)(nil)
	_ caddy.CleanerUpper    = (*Fair)(nil)
	_ reverseproxy.Selector = (*Fair)(nil)
	_ caddyfile.Unmarshaler = (*Fair)(nil)
)
