package core

import (
	"errors"
	"fmt"
	"math/rand"
	"sync/atomic"
	"time"
)

// Config describes a balancer: its strategy, the strategy's options and the
// backends. Options that do not apply to the strategy must be left zero.
type Config struct {
	// Strategy is one of the strategy names above.
	Strategy string

	// Backends are the upstream servers, in configuration order (the order
	// matters: nginx's tie-breaks and hash walks follow it).
	Backends []Backend

	// HashMode selects url_hash's mapping: "ketama" (default; nginx's
	// "hash $key consistent"), "modulo" (nginx's plain "hash $key"),
	// "maglev" (a weighted Maglev lookup table) or "bounded" (consistent
	// hashing with bounded loads).
	HashMode string

	// LoadFactor is the bounded mode's c: no backend takes more than
	// ceil(c * mean) requests in flight. 0 means 1.25; otherwise above 1.
	LoadFactor float64

	// Stagger starts smooth_wrr and gcd_wrr at a random point of their period,
	// so that many balancers with one configuration do not burst in step.
	Stagger bool

	// TwoChoices makes least_conn pick the better of two random backends
	// (power of two choices, O(1)) instead of nginx's exact scan.
	TwoChoices bool

	// DecayTime is fair's EWMA decay time; 0 means 10s.
	DecayTime time.Duration

	// Now is the clock; nil means time.Now. Tests inject one. Intervals
	// (fail_timeout, slow start, fair's decay and probes) are differences
	// of its readings taken with time.Time.Sub: with time.Now's readings
	// they follow the monotonic clock, whatever the wall clock does.
	Now func() time.Time

	// Rand returns uniformly random 64-bit values; nil means math/rand's
	// lock-free global source. Tests inject a seeded one.
	Rand func() uint64
}

// Balancer picks backends with one strategy. It is safe for concurrent use.
type Balancer struct {
	cfg     Config
	members []*member      // one per Config.Backends entry, same order
	byAddr  map[string]int // address -> index in members
	ids     []string       // sticky ids (Balancer.ID), by index
	byID    map[string]int // sticky id -> the first index with it
	primary *group
	backup  *group                        // nil when there are no backup backends
	since   func(time.Time) time.Duration // the clock (see sinceOf, clockNano)
	rand    func() uint64
	// inflight counts the requests in flight over all backends, shared by
	// every balancer Update derives from one New (requests to an address
	// that was removed count until they are done). Only url_hash's bounded
	// mode and least_conn's steady read (which, while it is 0, follows
	// smooth_wrr's table in O(1); see keepsTotal) read it, so only they
	// have one; nil otherwise.
	inflight *atomic.Int64
	// failing counts this balancer's backends whose failure count is not 0
	// (see failing.go); failing is fails.count. While it is 0, no backend
	// can be out for max_fails, which lets a pick skip the check.
	fails   *failRef
	failing *atomic.Int32
	// counts and requests are the members' counts of requests in flight
	// and started, by backend index: one index each.
	counts   []*atomic.Int64
	requests []*atomic.Int64
	// counted says that a pick counts its request in flight (the
	// strategy's Traits.Counts, or a backend with max_conns), timed that
	// the strategy times answers (Traits.Times): see Pick and Done.
	counted, timed bool
}

// New validates cfg and builds a balancer. Errors name the field and value.
func New(cfg Config) (*Balancer, error) {
	return build(cfg, nil)
}

// Update returns a balancer with the same strategy and options over a new
// backend list. Runtime state (requests in flight, failures, latency
// estimates) carries over for every address present in both; an address that
// is new starts its slow start, if it has one.
func (b *Balancer) Update(backends []Backend) (*Balancer, error) {
	cfg := b.cfg
	cfg.Backends = backends
	return build(cfg, b)
}

func build(cfg Config, prev *Balancer) (*Balancer, error) {
	info, ok := strategies[cfg.Strategy]
	if !ok {
		return nil, fmt.Errorf("lbpack: strategy %q: unknown (want one of %s)", cfg.Strategy, strategyNames())
	}
	if len(cfg.Backends) == 0 {
		return nil, errors.New("lbpack: backends: empty list")
	}
	if err := checkOptions(&cfg); err != nil {
		return nil, err
	}
	b := &Balancer{
		cfg:    cfg,
		byAddr: make(map[string]int, len(cfg.Backends)),
		ids:    make([]string, len(cfg.Backends)),
		byID:   make(map[string]int, len(cfg.Backends)),
		since:  sinceOf(cfg.Now),
		rand:   cfg.Rand,
	}
	traits := info.traits(&cfg)
	b.timed = traits.Times
	b.counted = traits.Counts
	for _, be := range cfg.Backends {
		b.counted = b.counted || be.MaxConns > 0
	}
	b.fails = new(failRef)
	b.failing = &b.fails.count
	if keepsTotal(info, cfg, prev) {
		if prev != nil && prev.inflight != nil {
			b.inflight = prev.inflight
		} else {
			b.inflight = new(atomic.Int64)
		}
	}
	b.cfg.Backends = append([]Backend(nil), cfg.Backends...)
	if b.rand == nil {
		// Strategies read the source from the Config they are built from.
		b.rand = rand.Uint64
		b.cfg.Rand = b.rand
	}
	// Members come from one slab: one allocation for all of them.
	n := len(b.cfg.Backends)
	slab := make([]member, n)
	b.members = make([]*member, n)
	primary := make([]*member, 0, n)
	var backup []*member
	for i, be := range b.cfg.Backends {
		if err := checkBackend(be, i); err != nil {
			return nil, err
		}
		if j, dup := b.byAddr[be.Address]; dup {
			return nil, fmt.Errorf("lbpack: %s.address %q: duplicate of backends[%d]", backendField(i), be.Address, j)
		}
		if be.Backup && info.hashed {
			return nil, fmt.Errorf("lbpack: %s.backup: strategy %q does not accept backup backends", backendField(i), cfg.Strategy)
		}
		if be.SlowStart > 0 && info.hashed {
			// A key's backend follows the configured weights; a ramp would
			// only move keys back and forth (NGINX Plus refuses slow_start
			// with hash too).
			return nil, fmt.Errorf("lbpack: %s.slow_start %v: strategy %q maps keys by weight and has no slow start", backendField(i), be.SlowStart, cfg.Strategy)
		}
		b.byAddr[be.Address] = i
		addID(b, i, be)
		m := newMember(&slab[i], i, be, b, prev)
		b.members[i] = m
		if be.Backup {
			backup = append(backup, m)
		} else {
			primary = append(primary, m)
		}
	}
	if len(primary) == 0 {
		return nil, errors.New("lbpack: backends: every backend is a backup; at least one must be primary")
	}
	var err error
	if b.primary, err = newGroup(primary, info, b); err != nil {
		return nil, err
	}
	if len(backup) > 0 {
		if b.backup, err = newGroup(backup, info, b); err != nil {
			return nil, err
		}
	}
	if b.counted && !traits.Counts {
		// A backup's max_conns has every request counted in flight, which
		// the table of a strategy that counts nothing does not do.
		b.primary.table = tableNone
	}
	// Only a balancer that is returned takes a place in the states' lists.
	b.counts, b.requests = make([]*atomic.Int64, n), make([]*atomic.Int64, n)
	for i, m := range b.members {
		attachFails(m.state, b.fails)
		b.counts[i], b.requests[i] = &m.state.inflight, &m.state.requests
	}
	return b, nil
}

// keepsTotal reports whether a balancer built from cfg keeps the count of
// requests in flight over all backends (strategyInfo.total): decided at New
// and kept by every Update (a count begun later would miss the requests
// already in flight).
func keepsTotal(info strategyInfo, cfg Config, prev *Balancer) bool {
	if prev != nil {
		return prev.inflight != nil
	}
	return info.total != nil && info.total(&cfg)
}

// checkBackend validates backend i. The field name ("backends[i]") is
// formatted only for an error: a rebuild of many backends formats none.
func checkBackend(be Backend, i int) error {
	if be.validate("") == nil {
		return nil
	}
	return be.validate(backendField(i))
}

func backendField(i int) string { return fmt.Sprintf("backends[%d]", i) }

// checkOptions rejects options that do not apply to the strategy, and fills defaults.
func checkOptions(c *Config) error {
	if c.HashMode != "" && c.Strategy != URLHash {
		return fmt.Errorf("lbpack: hash_mode %q: only url_hash has hash modes, not %q", c.HashMode, c.Strategy)
	}
	if c.LoadFactor != 0 && !(c.Strategy == URLHash && c.HashMode == HashBounded) {
		return fmt.Errorf("lbpack: load_factor %v: only url_hash's bounded mode has a load factor", c.LoadFactor)
	}
	if c.Stagger && c.Strategy != SmoothWRR && c.Strategy != GCDWRR {
		return fmt.Errorf("lbpack: stagger: only smooth_wrr and gcd_wrr can stagger, not %q", c.Strategy)
	}
	if c.TwoChoices && c.Strategy != LeastConn {
		return fmt.Errorf("lbpack: two_choices: only least_conn has it, not %q", c.Strategy)
	}
	if c.DecayTime != 0 && c.Strategy != Fair {
		return fmt.Errorf("lbpack: decay_time %v: only fair has a decay time, not %q", c.DecayTime, c.Strategy)
	}
	if c.DecayTime < 0 {
		return fmt.Errorf("lbpack: decay_time %v: must be positive", c.DecayTime)
	}
	return nil
}

// pickFrom asks the strategy, of the primary group and then of the backups,
// and returns the backend index or -1. The request travels by value: a
// pointer passed through the strategy interface would escape and cost an
// allocation per pick. (This and other helpers on the pick path are
// functions with one result, not methods: see interp.go for why.)
func pickFrom(b *Balancer, r request) int {
	g := b.primary
	i := -1
	if r.bound != nil {
		i = pickBound(g, r)
	}
	if i < 0 {
		i = g.strategy.pick(g, r)
	}
	if i < 0 && b.backup != nil {
		g = b.backup
		if r.bound != nil {
			i = pickBound(g, r)
		}
		if i < 0 {
			i = g.strategy.pick(g, r)
		}
	}
	if i < 0 {
		return -1
	}
	// chosen has work only for a member with max_fails: skip the call.
	if m := g.members[i]; m.maxFails == 0 {
		return m.index
	}
	return chosen(g, i, r)
}

// Len returns the number of backends.
func (b *Balancer) Len() int { return len(b.members) }

// Backend returns backend i as configured, or the zero Backend when i is out
// of range.
func (b *Balancer) Backend(i int) Backend {
	if i < 0 || i >= len(b.cfg.Backends) {
		return Backend{}
	}
	return b.cfg.Backends[i]
}

// Index returns the index of the backend with the given address, or -1.
func (b *Balancer) Index(address string) int {
	if i, ok := b.byAddr[address]; ok {
		return i
	}
	return -1
}

// Strategy returns the balancer's strategy name.
func (b *Balancer) Strategy() string { return b.cfg.Strategy }
