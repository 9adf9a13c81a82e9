package core

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// DefaultFailTimeout is nginx's fail_timeout: how long a backend that reached
// MaxFails is skipped, and the window in which its failures are counted.
const DefaultFailTimeout = 10 * time.Second

// MaxWeight is the largest weight a backend may have. It keeps every sum and
// product of weights the strategies form far from overflow.
const MaxWeight = 1000000

// Backend is one upstream server as configured.
type Backend struct {
	// Address is "host:port" ("[::1]:80" for IPv6). It is the backend's identity:
	// runtime state survives a rebuild for every address that remains, and
	// url_hash's ketama mode hashes it exactly as nginx hashes a server name.
	Address string

	// Weight is the backend's share relative to the others; 1 to MaxWeight.
	Weight int

	// Down marks the backend permanently unavailable, as nginx's "down":
	// it is never picked but still counts in the hash strategies' weight
	// walk, so that marking one backend down does not remap the others.
	Down bool

	// Backup backends are picked only when no primary backend is available.
	// The hash strategies do not accept backups, as in nginx.
	Backup bool

	// MaxConns caps the requests in flight to the backend; a full backend is
	// skipped. 0 means no cap.
	MaxConns int

	// MaxFails is the number of failed requests within FailTimeout after which
	// the backend is skipped for FailTimeout. 0 disables failure accounting
	// (nginx's default is 1; callers that want nginx's default set it).
	MaxFails int

	// FailTimeout is nginx's fail_timeout; 0 means DefaultFailTimeout.
	FailTimeout time.Duration

	// Route is the backend's sticky id: what a request names (Filter.Sticky)
	// to be bound to it, as nginx's route= parameter. Empty means
	// StickyID(Address), nginx's id of a server without route=. Several
	// backends may share a route; a request bound to it goes to the first.
	Route string
	// Drain is nginx's drain: the backend takes only requests bound to it
	// (Filter.Sticky); every other pick skips it as it skips a down
	// backend, and the hash strategies still count it in their walk.
	Drain bool
	// SlowStart is the time over which a newly added or recovered backend's
	// weight ramps from 10% to 100%, in thousandths of a weight, so that a
	// weight of 1 ramps too. 0 disables slow start. The hash strategies
	// (ip_hash, url_hash) refuse it: a key's backend follows the configured
	// weights.
	SlowStart time.Duration
}

// validate checks one backend; field names the backend in errors, as in "backends[2]".
func (b Backend) validate(field string) error {
	if err := CheckAddress(b.Address); err != nil {
		return fmt.Errorf("lbpack: %s.address %q: %v", field, b.Address, err)
	}
	if b.Weight < 1 || b.Weight > MaxWeight {
		return fmt.Errorf("lbpack: %s.weight %d: must be from 1 to %d", field, b.Weight, MaxWeight)
	}
	if b.Down && b.Drain {
		return fmt.Errorf("lbpack: %s.drain: the backend is down too; it is one or the other", field)
	}
	if b.MaxConns < 0 {
		return fmt.Errorf("lbpack: %s.max_conns %d: must not be negative", field, b.MaxConns)
	}
	if b.MaxFails < 0 {
		return fmt.Errorf("lbpack: %s.max_fails %d: must not be negative", field, b.MaxFails)
	}
	if b.FailTimeout < 0 {
		return fmt.Errorf("lbpack: %s.fail_timeout %v: must not be negative", field, b.FailTimeout)
	}
	if b.SlowStart < 0 {
		return fmt.Errorf("lbpack: %s.slow_start %v: must not be negative", field, b.SlowStart)
	}
	return nil
}

// CheckAddress reports whether addr is a usable backend address: "host:port"
// with a non-empty host and a port from 1 to 65535. IPv6 hosts are written in
// brackets ("[::1]:8080").
func CheckAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port")
	}
	if host == "" {
		return fmt.Errorf("empty host")
	}
	if strings.ContainsAny(host, " \t/") {
		return fmt.Errorf("invalid host %q", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("invalid port %q", port)
	}
	return nil
}
