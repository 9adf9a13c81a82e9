// Package faults is lbpack's fault suite for Caddy, with nginx as the
// anchor: three loopback backends behind the proxy, a steady load of GETs
// and checksummed POSTs, one backend killed mid-run and restarted, then
// every backend down. Each case asserts its targets (see
// internal/faultsuite's Row.Problems). Caddy runs in this test process,
// with its admin endpoint on its own port; nginx runs as a process of its
// own. The Traefik plugin's cases are in the yaegitest module.
//
// The suite uses free loopback ports among 33100 to 33149 (Caddy) and
// 33150 to 33199 (nginx); LBPACK_FAULT_PORT moves the first. With
// LBPACK_WRITE_DOCS=1 it writes its rows to docs/reliability.md:
//
//	LBPACK_WRITE_DOCS=1 go test -count=1 -run . ./faults/
package faults
