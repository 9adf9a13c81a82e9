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
// upstreams), and per address the flags backup and down, slow_start (not the
// hash policies: they map keys by weight), and nginx's max_fails,
// fail_timeout and max_conns, which may also be given once for every
// upstream (max_fails 3). Every option may be given once (per address for
// the per-address ones); an option for an address the upstreams lack is an
// error with static upstreams and a warning with dynamic ones.
//
// Availability is Caddy's own: active and passive health checks and
// max_requests, through Upstream.Available; max_fails and max_conns add
// nginx's per-policy counts on top. A pick asks Caddy about the chosen
// upstream only, and reads the health of all of them at most every 250ms, so
// that it stays O(1) where the strategy is; an upstream that comes back
// healthy starts its slow start. The choices are nginx's exactly while
// health is stable (see seen for what happens when it changes). Per-upstream
// state is keyed by the dial address and is one per address, whatever pools
// dynamic upstreams return.
//
// Retries: every policy knows a retry of a request (Caddy's lb_retries and
// lb_try_duration call Select again for it) and sends it to an upstream the
// request has not tried, the one nginx's proxy_next_upstream would choose
// (for the hash policies the next point of the ring, or nginx's next
// rehash); once every upstream has been tried, Select returns nil and Caddy
// answers with the last error, except under lb_try_duration, where a new
// round begins. lb_retries alone makes Caddy retry at once; lb_try_duration
// also sets lb_try_interval (250ms by default), which Caddy waits after
// every failed try.
//
// What the policies that track tries (fair, weighted_least_conn, url_hash's
// bounded mode, and any policy with max_fails or max_conns) count: a try
// ends at the request's next Select (it failed) or at the request's end; its
// latency is Caddy's upstream latency, the time to the response headers. A
// try the upstream did not answer is a failure of the upstream only when
// Caddy retried it or ended the request with an error: a client that goes
// away first is not the upstream's fault.
//
// Upstreams must dial host:port (no unix sockets, no placeholders in the
// address): the address is the upstream's identity and the hash strategies
// hash it.
//
// The package also registers the admin endpoint GET /lbpack/state
// (admin.api.lbpack), a caddy_lbpack_picks_total counter per upstream in
// Caddy's metrics, and the command `caddy lbpack trace`.
//
// Build Caddy with it: xcaddy build --with github.com/lbpack/lbpack/caddyplugin.
package caddyplugin
