// Package core implements lbpack's load-balancing strategies: the choices nginx
// makes for the strategies nginx has, and the strategies its open-source build
// lacks.
//
// A [Balancer] is built once from a [Config] (a strategy name, its options and
// the backends) and then answers [Balancer.Pick] from many goroutines at once.
// Construction validates everything and reports bad input with an error that
// names the field and the value; picks never panic and, for the static
// strategies, allocate nothing and take no lock.
//
// The caller reports when a request to a backend starts and ends
// ([Balancer.Start], [Balancer.Done]); least_conn, fair, url_hash's bounded
// mode, max_conns and max_fails use those reports. A caller that ends a
// request with a deferred call (under Traefik's interpreter a deferred call
// into compiled code costs a fraction of one into interpreted code) begins
// it with [Begin], reports its outcome with [Report] and ends it with
// Add(-1) on the count Begin returned and on [InFlightTotal]'s, if any;
// [Take] picks and begins in one call, and [ReportSince] times the answer
// from the clock reading Take gave. Per-backend runtime state is keyed by
// address, so a balancer rebuilt with [Balancer.Update] keeps the counters
// and failure state of the addresses that remain.
//
// The package uses the standard library only and avoids every language feature
// that Traefik's interpreter (yaegi) lacks: no generics (so no generic atomic
// pointer), none of the builtins added after Go 1.20, no range over integers.
// Traefik runs it unchanged.
package core
