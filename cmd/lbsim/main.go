// Command lbsim runs lbpack's load-balancing strategies from the command
// line: it prints the backends a balancer picks, the step table of the
// weighted round robin algorithms, a side-by-side comparison of every
// strategy, and a simulation of requests against backends with given
// latencies. Scripts depend on its interface, which is fixed.
//
// Usage:
//
//	lbsim pick --strategy NAME --backends HOST:PORT=W[,HOST:PORT=W...] [--down HOST:PORT[,...]] [--hash-mode MODE] [-n N]
//	lbsim trace --strategy smooth_wrr|gcd_wrr --backends a=5,b=3,c=2 [-n N]
//	lbsim compare --backends HOST:PORT=W[,...] [--down HOST:PORT[,...]] [-n N] [--keys FILE] [--seed S]
//	lbsim simulate --strategy NAME --backends HOST:PORT=W[,...] --latency HOST:PORT=DIST[,...] [--concurrency C | --rate R] [-n N] [--seed S]
//	lbsim convert [--to caddyfile|json|traefik] NGINX.CONF
//
// In every --backends list "=W" may be omitted (weight 1), and a backend is
// an address (HOST:PORT) or a bare name (a, web-1): a bare name stands for
// the address NAME:80, which is what the hash strategies hash, and the
// output shows it as written. --down and --backup name backends as
// --backends does. --strategy takes core's names and the names of lbpack's
// Caddy policies: weighted_least_conn for least_conn, nginx_ip_hash for
// ip_hash.
//
// pick prints one chosen backend address per line. For ip_hash and url_hash
// it reads keys from standard input, one per line (a client IP for ip_hash,
// the exact key string for url_hash; a line ends at "\n" or "\r\n"), and
// prints one address per key; -n does not apply. For the other strategies it
// prints N picks (default 10) of a fresh balancer. Further flags pass through
// to the balancer's configuration: --backup HOST:PORT[,...], --stagger,
// --two-choices, --load-factor C, --decay-time D, and --seed S for a
// reproducible random source.
//
// trace prints, for each of N requests (default 10), the current weights
// before the pick, the chosen backend and the current weights after it: nginx's
// smooth weighted round robin keeps one current weight per backend, the LVS
// scheduler of gcd_wrr keeps one current weight cw for the whole set.
// Backends may be named by bare names (a, b, c); --down names some of them.
// The table streams: a trace longer than its schedule's period (the total
// weight) repeats that period, so any N is printed in little memory; a
// period too long to keep with an N as long is refused.
//
// compare runs N picks (default 100000) of every strategy, of every hash
// mode of url_hash, and of least_conn with two choices, over the same
// backends, and prints a table: each backend's share of the picks against its
// ideal share (its weight over the sum W of the weights of the backends not
// down), the worst share error, the largest window deviation, the longest run
// of one backend, and the cost per pick. The window deviation is the largest
// |count_i - k*w_i/W| over every window of k <= W consecutive picks (k <= N
// when N < W) and every backend i: small for a smooth schedule
// (a b c a a b a c b a), larger for a bursty one (a a a a a b b b c c).
// Windows of exactly W picks would not tell these apart, since both are exact
// over any W consecutive picks. ip_hash and url_hash hash the keys of
// --keys FILE (one per line, used in turn; ip_hash needs client IPs) or,
// without it, N generated keys. --seed S seeds the random strategies. The
// cost per pick is measured by timing N picks of a fresh balancer in this
// process; it is a report, not a benchmark. least_conn and fair get no
// request reports from compare, so they show their choices on idle backends.
//
// simulate runs a discrete-event simulation (package sim): N requests
// (default 10000) from C concurrent clients (default 10), or arriving at
// random at --rate R per second, each backend answering after a latency drawn
// from its distribution, and prints the p50, p90 and p99 latency (one per
// line, as "p99 12.5ms") and each backend's share. A distribution is a fixed
// time (10ms), exponential with a mean (exp:10ms), uniform (uniform:5ms-15ms),
// or a fraction of slow answers (slow:100ms@30% answers 30% of requests in
// 100ms and the rest as the bare entry says, or in 10ms). An entry without
// "HOST:PORT=" gives every backend not listed its distribution; every backend
// needs one. ip_hash and url_hash hash random client IPs, or the keys of
// --keys FILE. The simulation is deterministic for a given --seed (default 1).
// It refuses what it cannot simulate, naming the flags: at most 2^24
// requests, and no service time (a cost class's multiple included), arrival
// gap or whole run past 2^20 seconds of simulated time (12 days).
//
// convert reads an nginx configuration file and the files it includes and
// prints the equivalent Caddyfile (the default), Caddy JSON or Traefik
// dynamic configuration with lbpack's policies, keeping nginx's choices;
// what cannot be carried over is a warning on standard error with its
// file:line (see docs/migrating-from-nginx.md).
//
// Bad input gets a message on standard error naming the flag and the value,
// and exit status 2; a failure while running (no backend available) gets
// exit status 1.
package main

import (
	"os"

	// convert --to json adapts the Caddyfile with Caddy's adapter, which
	// needs the HTTP modules and lbpack's policies registered.
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/standard"
	_ "github.com/lbpack/lbpack/caddyplugin"

	"github.com/lbpack/lbpack/internal/lbsim"
)

func main() {
	os.Exit(lbsim.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
