package caddyplugin

import (
	"net"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/lbpack/lbpack/core"
)

func init() {
	caddy.RegisterModule(new(NginxIPHash))
}

// NginxIPHash is nginx's ip_hash: clients of one IPv4 /24 (or one full IPv6
// address) go to the same upstream, weighted, with nginx's exact mapping and
// its way of trying others when that upstream is unavailable. Caddy's own
// ip_hash and client_ip_hash use rendezvous hashing and another mapping.
//
// The client address is Caddy's client_ip variable, which honours the
// server's trusted_proxies; a forwarded header is never read directly.
//
// Caddyfile:
//
//	lb_policy nginx_ip_hash [<weight>...] {
//		name         <name>
//		weight       <address> <weight>
//		down         <address>...
//		max_fails    [<address>] <n>
//		fail_timeout [<address>] <duration>
//		max_conns    [<address>] <n>
//		fail_status  <status|class>...
//		route        <address> <id>
//		drain        <address>...
//		sticky       cookie <name> {...} | route <sources...> | learn {...}
//	}
type NginxIPHash struct {
	base
}

// CaddyModule returns the Caddy module information.
func (*NginxIPHash) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.nginx_ip_hash",
		New: func() caddy.Module { return new(NginxIPHash) },
	}
}

// Provision checks the options against the reverse proxy's upstreams and
// prepares the balancer.
func (m *NginxIPHash) Provision(ctx caddy.Context) error {
	m.p.key = clientIP
	return m.p.setup(ctx, "nginx_ip_hash", &m.Options, core.Config{Strategy: core.IPHash})
}

// UnmarshalCaddyfile sets up the policy from Caddyfile tokens.
func (m *NginxIPHash) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return m.Options.unmarshal(d, nil)
}

// clientIP returns the request's client IP as Caddy determined it. Outside
// Caddy's HTTP server (no variables) it falls back to the peer address.
func clientIP(r *http.Request) string {
	addr, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if !ok {
		addr = r.RemoteAddr
	}
	// Strip a port if there is one, without SplitHostPort's error
	// allocation for the usual bare address.
	if strings.HasPrefix(addr, "[") {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			return host
		}
	} else if i := strings.IndexByte(addr, ':'); i >= 0 && strings.LastIndexByte(addr, ':') == i {
		return addr[:i]
	}
	return addr
}

// Interface guards
var (
	_ caddy.Provisioner     = (*NginxIPHash)(nil)
	_ caddy.Validator       = (*NginxIPHash)(nil)
	_ caddy.CleanerUpper    = (*NginxIPHash)(nil)
	_ reverseproxy.Selector = (*NginxIPHash)(nil)
	_ caddyfile.Unmarshaler = (*NginxIPHash)(nil)
)
