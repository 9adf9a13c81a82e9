package caddyplugin

import (
	"fmt"
	"sync"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// releaseGrace is how long the state of a policy identity outlives the last
// policy of that identity (its Cleanup): a policy left out of the config for
// less than this, and then loaded again, goes on where it was.
const releaseGrace = 30 * time.Second

// pools is what a policy keeps of its upstreams: the balancer of each set of
// upstreams it has seen, and the counters of each address. It is shared by
// every policy of one identity, across reloads (see acquire): Caddy builds
// new policy modules on every config load, but the smooth schedule, the
// requests in flight (max_conns), failures (max_fails), slow starts and
// fair's estimates live in the balancer and must go on.
type pools struct {
	mu     sync.Mutex            // guards the rest of pools (the slow path), and policy.warned
	sets   map[string]*poolEntry // by the sorted set of dial addresses
	stats  map[string]*upstreamStats
	latest *poolEntry     // the latest usable entry (the admin endpoint's before any request)
	all    *core.Balancer // over every address of sets; new sets derive from it

	// strategy is the strategy and its options, which core's Update cannot
	// change (see strategyKey); config is everything the policy is built
	// from (see identify).
	strategy, config string

	// sessions is sticky learn's table, kept across reloads as the
	// balancers are, for as long as its bounds stay the same.
	sessions *sticky.Sessions
}

func newPools(strategy, config string) *pools {
	return &pools{
		sets:     make(map[string]*poolEntry),
		stats:    make(map[string]*upstreamStats),
		strategy: strategy,
		config:   config,
	}
}

// successor returns the pools of a policy of the same identity built from
// another config: empty, with ps's counters, and, when the strategy and its
// options are the same, ps's balancer over every address, from which the
// new sets derive: an address that remains keeps its state in core
// (requests in flight, failures, slow start, fair's estimate), which the
// requests still in flight under ps's policies end on.
func (ps *pools) successor(strategy, config string) *pools {
	next := newPools(strategy, config)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for addr, st := range ps.stats {
		next.stats[addr] = st
	}
	if ps.strategy == strategy {
		next.all = ps.all
	}
	next.sessions = ps.sessions
	return next
}

// learnTable returns the sticky learn table of l's bounds: the one these
// pools have when its bounds are the same, else a new one.
func (ps *pools) learnTable(l *StickyLearn) *sticky.Sessions {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if s := ps.sessions; s == nil || s.Timeout() != time.Duration(l.Timeout) || s.Max() != l.MaxSessions {
		ps.sessions = sticky.NewSessions(time.Duration(l.Timeout), l.MaxSessions)
	}
	return ps.sessions
}

// strategyKey is what core's Update cannot change: the strategy and its
// options.
func strategyKey(c core.Config) string {
	return fmt.Sprintf("%q %q %v %v %v %v", c.Strategy, c.HashMode, c.LoadFactor, c.Stagger, c.TwoChoices, c.DecayTime)
}

// identity is the state of one policy identity and who uses it.
type identity struct {
	cur   *pools             // the newest state, which the next policy takes up
	users map[*policy]uint64 // the policies provisioned and not cleaned up, by their order
	idle  time.Time          // when users last became empty
}

// kept holds the state of each policy identity in use (see acquire). Caddy
// provisions a new config before it cleans up the one it replaces, so
// during a reload both configs' policies of an identity are users; an
// identity without users is dropped releaseGrace after its last one left.
var kept = struct {
	sync.Mutex
	ids map[string]*identity
	seq uint64 // orders users
}{ids: make(map[string]*identity)}

// acquire gives p, whose identity is set, the state it runs on, and makes
// that the identity's newest:
//   - the same config as the newest state's: that state itself, the very
//     balancers, so the smooth schedule goes on and everything with it;
//   - another config with the same strategy and options (with a name,
//     other upstreams or per-upstream options): a successor whose
//     balancers derive from it (see successor);
//   - another strategy or options: a fresh state with the counters alone.
//
// config is everything p is built from (see identify).
func acquire(p *policy, config string) {
	strategy := strategyKey(p.cfg)
	kept.Lock()
	defer kept.Unlock()
	sweep(time.Now())
	k := kept.ids[p.id]
	switch {
	case k == nil:
		k = &identity{cur: newPools(strategy, config), users: make(map[*policy]uint64)}
		kept.ids[p.id] = k
	case k.cur.config != config || k.cur.strategy != strategy:
		k.cur = k.cur.successor(strategy, config)
	}
	kept.seq++
	k.users[p] = kept.seq
	p.pools = k.cur
}

// release records that p was cleaned up. When p's state is the newest and
// no other user has it (a config that failed to load, or a validation,
// made it), the newest state is again that of the latest user left: the
// running config's. Without users, the identity is dropped releaseGrace
// later unless a policy takes it up meanwhile.
func release(p *policy) {
	kept.Lock()
	defer kept.Unlock()
	k := kept.ids[p.id]
	if k == nil {
		return
	}
	if _, ok := k.users[p]; !ok {
		return
	}
	delete(k.users, p)
	if len(k.users) == 0 {
		k.idle = time.Now()
		time.AfterFunc(releaseGrace, sweepKept)
		return
	}
	var latest *policy
	for q, n := range k.users {
		if q.pools == k.cur {
			return
		}
		if latest == nil || n > k.users[latest] {
			latest = q
		}
	}
	k.cur = latest.pools
}

// sweepKept is sweep under kept's lock.
func sweepKept() {
	kept.Lock()
	defer kept.Unlock()
	sweep(time.Now())
}

// sweep drops every identity without users for releaseGrace at now. kept's
// lock must be held.
func sweep(now time.Time) {
	for id, k := range kept.ids {
		if len(k.users) == 0 && now.Sub(k.idle) >= releaseGrace {
			delete(kept.ids, id)
		}
	}
}
