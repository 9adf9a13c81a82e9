// Package core implements lbpack's load-balancing strategies: the choices nginx
// makes for the strategies nginx has, and the strategies its open-source build
// lacks.
//
// A [Balancer] is built once from a [Config] (a strategy name, its options and
// the backends) by [New], and rebuilt over another list of backends by
// [Balancer.Update], which keeps the runtime state (requests in flight,
// failures, latency estimates, slow starts) of every address that remains.
// Construction validates everything and reports bad input with an error
// that names the field and the value.
//
// A request's life is one call at each end:
//
//   - [Pick] chooses a backend for the request's key, among those a
//     [Filter] allows (the caller's health checks, the backends a retried
//     request has tried), and begins the request there. It returns the
//     backend and a [Ticket].
//   - [Done] ends the request with its latency and whether it failed. A
//     zero Ticket needs Done only when the request fails; any other must
//     reach Done (the balancer counts the request in flight, times it, or
//     has failures to clear).
//
// [Take] is Pick for a caller that an interpreter runs (the Traefik plugin,
// under yaegi): see interp.go. Picks never panic, many goroutines may pick at
// once, and while the backends are steady a pick is one read of a
// precomputed table (see table.go), allocating nothing and taking no lock.
// [TraitsOf] says what a strategy needs from its host (a key, Done for every
// request, real latencies, default failing statuses), so that hosts need not
// know strategies by name.
//
// # The package's files
//
// balancer.go (Config, New, Update), pick.go (Pick, Done), state.go (a
// backend's runtime state, shared by the balancers Update derives), failing.go
// (the count of failing backends), smooth_state.go (nginx's smooth pass, which
// least_conn's ties and the hash strategies' fallback run too), table.go (the
// tables and their guard), strategy.go (the strategy interface, the registry,
// Traits, the group of backends one strategy instance picks among), and one
// file per strategy, its test file beside it.
//
// Adding a strategy touches: its own file in this package (its type, whose
// pick method is its full pick; its build function, which may give the group
// a table; its name's constant; and its registration in init, with its
// Traits: counts, times, failStatus, hashed), its test file, and its Caddy
// module in caddyplugin (one file: the module and its Caddyfile options).
// The Traefik plugin, lbsim and the nginx converter take any registered
// strategy by name and read its Traits. A strategy whose steady choice is not
// a table's read (as least_conn's and fair's depend on requests in flight)
// may add one function to interp.go, held to its full pick by
// TestSteadyMatchesFullPick.
//
// The package uses the standard library only and avoids every language feature
// that Traefik's interpreter (yaegi) lacks: no generics (so no generic atomic
// pointer), none of the builtins added after Go 1.20, no range over integers.
// Traefik runs it unchanged.
package core
