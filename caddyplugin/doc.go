// Package caddyplugin plugs lbpack's load-balancing strategies into Caddy's
// reverse proxy as selection policies (namespace
// http.reverse_proxy.selection_policies):
//
//	smooth_wrr           nginx's smooth weighted round robin
//	gcd_wrr              LVS's interleaved weighted round robin
//	url_hash             hashing of any placeholder: ketama, maglev, bounded, modulo
//	fair                 the upstream expected to answer soonest
//	weighted_least_conn  nginx's least_conn (Caddy owns the name least_conn)
//	nginx_ip_hash        nginx's ip_hash (Caddy owns the name ip_hash)
//
// Every policy takes weights by position (lb_policy smooth_wrr 5 3 2) or by
// dial address in its block (weight 10.0.0.1:80 5; needed for dynamic
// upstreams), and per address the flags backup, down and slow_start.
// Availability is Caddy's own: active and passive health checks and
// max_requests, through Upstream.Available. A pick asks Caddy about the
// chosen upstream only, and reads the health of all of them at most every
// 250ms, so that it stays O(1) where the strategy is; an upstream that comes
// back healthy starts its slow start. The choices are nginx's exactly while
// health is stable; a change is seen at the next read, or at once when it is
// the chosen upstream's. Per-upstream
// state is keyed by the dial address, so it survives dynamic upstreams (fresh
// *Upstream values on every request) and retries.
//
// Upstreams must dial host:port (no unix sockets, no placeholders in the
// address): the address is the upstream's identity and the hash strategies
// hash it.
//
// The package also registers the admin endpoint GET /lbpack/state
// (admin.api.lbpack), per-upstream series in Caddy's metrics
// (caddy_lbpack_picks_total and others), and the command `caddy lbpack`.
//
// docs/caddy.md in the repository is the reference: every policy and option
// with its default and an example, the JSON fields, the state and the
// metrics. Build Caddy with the package from a checkout: ./xcaddy.sh build.
package caddyplugin
