package core

import (
	"errors"
	"fmt"
	"math/rand"
	"sync/atomic"
	"time"
)

// ErrNoBackend is returned by a pick when no backend is available: every one
// is down, full, failed, or refused by the caller.
var ErrNoBackend = errors.New("lbpack: no backend available")

// Strategy names accepted in Config.Strategy.
const (
	RoundRobin     = "round_robin"
	Random         = "random"
	WeightedRandom = "weighted_random"
	SmoothWRR      = "smooth_wrr"
	GCDWRR         = "gcd_wrr"
	LeastConn      = "least_conn"
	IPHash         = "ip_hash"
	URLHash        = "url_hash"
	Fair           = "fair"
)

// Hash modes accepted in Config.HashMode (url_hash only).
const (
	HashKetama  = "ketama"
	HashModulo  = "modulo"
	HashMaglev  = "maglev"
	HashBounded = "bounded"
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
	primary *group
	backup  *group                        // nil when there are no backup backends
	since   func(time.Time) time.Duration // the clock (see sinceOf, clockNano)
	rand    func() uint64
	// inflight counts the requests in flight over all backends, shared by
	// every balancer Update derives from one New (requests to an address
	// that was removed count until they are done). Only url_hash's bounded
	// mode and least_conn's quick path (which, while it is 0, follows
	// smooth_wrr's table in O(1); see keepsTotal) read it, so only they
	// have one; nil otherwise (see InFlightTotal).
	inflight *atomic.Int64
	// failing counts this balancer's backends whose failure count is not 0
	// (see failing.go); failing is fails.count. While it is 0, no backend
	// can be out for max_fails, which lets a pick skip the check.
	fails   *failRef
	failing *atomic.Int32
	// counts and requests are the members' counts of requests in flight
	// and started, by backend index, for Begin: one index each.
	counts   []*atomic.Int64
	requests []*atomic.Int64
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
		since:  sinceOf(cfg.Now),
		rand:   cfg.Rand,
	}
	b.fails = new(failRef)
	b.failing = &b.fails.count
	if cfg.Strategy == URLHash && cfg.HashMode == HashBounded || cfg.Strategy == LeastConn && keepsTotal(cfg, prev) {
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
	// Only a balancer that is returned takes a place in the states' lists.
	b.counts, b.requests = make([]*atomic.Int64, n), make([]*atomic.Int64, n)
	for i, m := range b.members {
		attachFails(m.state, b.fails)
		b.counts[i], b.requests[i] = &m.state.inflight, &m.state.requests
	}
	return b, nil
}

// leastTotalMin is the fewest backends for which least_conn keeps a count
// of requests in flight over all of them. Below it, an idle pick scans
// (compiled, 11 to 16 ns at three to eight backends, against 6.1 ns for
// the count's O(1) look from nine), and a request is two atomic operations
// cheaper, which under Traefik's interpreter is worth a few points of
// throughput.
const leastTotalMin = 9

// keepsTotal reports whether a least_conn balancer built from cfg keeps
// the count over all backends: decided at New, by size, and kept by every
// Update (a count begun later would miss the requests already in flight).
func keepsTotal(cfg Config, prev *Balancer) bool {
	if prev != nil {
		return prev.inflight != nil
	}
	return len(cfg.Backends) >= leastTotalMin
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

// Pick chooses a backend and returns its index in Config.Backends. key is
// what the hash strategies hash (the client IP for ip_hash, any string for
// url_hash); the others ignore it. It returns ErrNoBackend when no backend is
// available.
func (b *Balancer) Pick(key string) (int, error) {
	if i := PickIndex(b, key); i >= 0 {
		return i, nil
	}
	return -1, ErrNoBackend
}

// PickIndex is Pick with one result: the backend's index, or -1 when Pick
// would return ErrNoBackend.
func (b *Balancer) PickIndex(key string) int { return PickIndex(b, key) }

// PickIndex is b.PickIndex(key) as a function. Under Traefik's interpreter a
// call with one result costs markedly less than one with two, and a plain
// function call a fraction of a method call (and of its garbage), so a
// plugin's request path calls this.
//
// It takes each strategy's quick path (see quickTable and after): while the
// primary group is quiet (no backend out for max_fails) and, for the
// strategies that follow weights, steady (no slow start, no weight lowered
// by failures), a pick is the read of one precomputed table. Under the
// interpreter every function call, local variable (each costs an
// allocation per call) and atomic operation costs more than a whole compiled
// pick, so each quick path is one small function. Anything else goes
// through the strategy's full pick, which gives the same answer. (The
// interpreter tries the cases in order, at a cost each: the commonest
// strategies come first.)
func PickIndex(b *Balancer, key string) int {
	switch b.primary.quick {
	case quickTable:
		return PickNext(b, key)
	case quickLeast:
		return pickLeastQuick(b, key)
	case quickDraw:
		return pickDrawn(b, key)
	case quickIPHash:
		return pickIPHashQuick(b, key)
	case quickCRC:
		return pickCRCQuick(b, key)
	case quickMaglev:
		return pickMaglevQuick(b, key)
	case quickBounded:
		return pickBoundedQuick(b, key)
	case quickTwo:
		return pickTwoQuick(b, key)
	case quickFair:
		return pickFairQuick(b, key)
	}
	return pickKey(b, key)
}

// PickNext is PickIndex for the table strategies (smooth_wrr, gcd_wrr,
// round_robin), one call shorter: their quick path, the next entry of the
// canonical schedule while the group is quiet, without PickIndex's dispatch,
// which under Traefik's interpreter costs a microsecond. For any other
// strategy it makes the strategy's full pick: the answer PickIndex gives, at
// a higher cost. (The cursor's plain modulo is exact at any count: take
// reduces it by whole periods only.)
func PickNext(b *Balancer, key string) int {
	g := b.primary
	if g.quick == quickTable && g.sched.gate.Load() == 1 && (len(g.flagged) == 0 || !g.capped && g.failing.Load() == 0) { // isQuiet(g)
		return int(g.look[(g.cur.n.Add(1)-1)%g.cur.size])
	}
	return pickKey(b, key)
}

// pickKey is the full pick for key: what the quick paths fall back to. As a
// call of its own it keeps the request's construction out of their frames,
// which the interpreter allocates whole on every call, taken branch or not.
func pickKey(b *Balancer, key string) int {
	return pickFrom(b, request{key: key, b: b})
}

// PickFunc is Pick with the caller's own view of availability: available(i)
// reports whether backend i may be picked now (for example Caddy's health
// checks, or the backends a retried request has tried already). A nil func
// means every backend is available as far as the caller knows. Backends the
// caller refuses are skipped the way nginx skips an unavailable peer.
func (b *Balancer) PickFunc(key string, available func(i int) bool) (int, error) {
	if available == nil {
		return b.Pick(key)
	}
	i := pickFrom(b, request{key: key, avail: available, b: b})
	if i < 0 {
		return -1, ErrNoBackend
	}
	return i, nil
}

// PickVersion is PickFunc for a caller whose view of availability changes
// seldom and has a version: while the caller passes one version, available
// must give the same answers (a caller bumps it whenever an answer may have
// changed, say on every health change). The balancer may then reuse what it
// learnt of the answers instead of asking about every backend: smooth_wrr,
// which with a filter asks it about every backend on every pick (nginx's
// choice depends on each answer), and with a backend refused makes nginx's
// O(n) pass, learns nginx's schedule over the available backends within
// two of its periods and follows it in O(1), nginx's choices still. The
// other strategies ask available only about the backends they consider, as
// with PickFunc. A nil available is Pick.
func (b *Balancer) PickVersion(key string, available func(i int) bool, version uint64) (int, error) {
	if available == nil {
		return b.Pick(key)
	}
	i := pickFrom(b, request{key: key, avail: available, b: b, version: version, versioned: true})
	if i < 0 {
		return -1, ErrNoBackend
	}
	return i, nil
}

// pickFrom asks the strategy, of the primary group and then of the backups,
// and returns the backend index or -1. The request travels by value: a
// pointer passed through the strategy interface would escape and cost an
// allocation per pick. (This and other helpers on the pick path are
// functions with one result, not methods: under Traefik's interpreter a
// method call costs about four function calls, a second result more.)
func pickFrom(b *Balancer, r request) int {
	g := b.primary
	i := pickIn(g, &r)
	if i < 0 && b.backup != nil {
		g = b.backup
		i = pickIn(g, &r)
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
