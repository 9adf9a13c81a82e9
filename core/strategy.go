package core

import (
	"sort"
	"strings"
	"sync/atomic"
)

// A strategy chooses among the members of one group: the primary backends,
// or the backup backends when no primary is available.
type strategy interface {
	// pick returns the chosen member's position in g.members, or -1 when no
	// member is eligible (r.ok is false for all of them).
	pick(g *group, r request) int
}

// strategyInfo describes one strategy for the registry.
type strategyInfo struct {
	// hashed strategies pick by key; like nginx, they refuse backup backends.
	hashed bool
	// build makes the strategy's state for one group, or rejects the options.
	build func(g *group, c *Config) (strategy, error)
}

// strategies is the registry; each strategy's file adds itself in init.
var strategies = map[string]strategyInfo{}

func register(name string, info strategyInfo) { strategies[name] = info }

// Strategies returns the names of every strategy, sorted.
func Strategies() []string {
	names := make([]string, 0, len(strategies))
	for name := range strategies {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func strategyNames() string { return strings.Join(Strategies(), ", ") }

// group is the set of backends one strategy instance chooses among.
type group struct {
	members []*member
	// totalWeight counts every member, down ones too: nginx's hash walks use
	// it so that marking a backend down does not remap the others.
	totalWeight int
	strategy    strategy
	// smooth is nginx's exact smooth weighted round robin over this group:
	// smooth_wrr's path when its table does not apply, and the fallback of
	// the hash strategies after 20 tries.
	smooth *smoothState
	// unsteady counts members whose weight nginx would not use as configured
	// right now: an effective weight lowered by failures, or a slow start in
	// progress. While it is not zero, strategies with precomputed tables must
	// take nginx's exact path instead.
	unsteady atomic.Int32
}

// steady reports whether every member currently weighs what it is configured
// to weigh, so that precomputed schedules are exact.
func (g *group) steady() bool { return g.unsteady.Load() == 0 }

func newGroup(members []*member, info strategyInfo, c *Config) (*group, error) {
	g := &group{members: members}
	for _, m := range members {
		g.totalWeight += m.weight
	}
	g.smooth = newSmoothState(g)
	s, err := info.build(g, c)
	if err != nil {
		return nil, err
	}
	g.strategy = s
	return g, nil
}

// chosen does nginx's bookkeeping for the member a pick chose and returns its
// backend index: a member whose fail_timeout has passed gets one probe per
// window, so its "checked" time moves to now.
func (g *group) chosen(pos int, r request) int {
	m := g.members[pos]
	if m.maxFails > 0 {
		now := r.now()
		if now-m.state.checked.Load() > m.failTimeout {
			m.state.checked.Store(now)
		}
	}
	return m.index
}

// request is one pick's inputs, passed by value through the strategies.
type request struct {
	key   string
	avail func(int) bool
	b     *Balancer
	nowNs int64 // 0 until read
}

// now returns the pick's time in Unix nanoseconds, reading the clock once.
func (r *request) now() int64 {
	if r.nowNs == 0 {
		r.nowNs = r.b.now().UnixNano()
	}
	return r.nowNs
}

// weight returns member m's weight for this pick: its configured weight,
// scaled down while the member is in slow start.
func (r *request) weight(m *member) int {
	return m.weight
}

// ok reports whether member m may be picked now: not down, not full, not
// failed, and not refused by the caller.
func (r *request) ok(m *member) bool {
	if m.down {
		return false
	}
	s := m.state
	if m.maxConns > 0 && s.inflight.Load() >= int64(m.maxConns) {
		return false
	}
	if m.maxFails > 0 && s.fails.Load() >= int64(m.maxFails) && r.now()-s.checked.Load() <= m.failTimeout {
		return false
	}
	if r.avail != nil && !r.avail(m.index) {
		return false
	}
	return true
}
