// Package bench compares lbpack with its peers: Caddy v2.11.9's built-in
// selection policies, stathat/consistent, serialx/hashring, dgryski/go-jump
// and straightforward textbook implementations. It measures the cost of a
// pick, the quality of the choices (smoothness, balance, disruption), the
// behaviour under latency (a discrete-event simulation) and a fleet of
// independent balancers, and renders the results as Markdown tables and SVG
// charts under docs/.
//
// It is a module of its own so that the peers never enter lbpack's
// dependencies. Regenerate everything with
//
//	cd bench && go run ./cmd/report
package bench
