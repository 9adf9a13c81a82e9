package core

import (
	"math/bits"
	"sync/atomic"
)

// RoundRobin names the round_robin strategy in Config.Strategy.
const RoundRobin = "round_robin"

func init() {
	register(RoundRobin, strategyInfo{build: buildRoundRobin})
}

// roundRobin rotates through the members that are not down, one step per
// pick, ignoring weights. An ineligible member passes its turn to the next;
// so does a member in slow start for the turns its ramp does not give it yet
// (see takeTurn: one in ten at first).
type roundRobin struct {
	up    []int32 // positions of the members that are not down
	cur   *cursor
	turns rampTurns
}

func buildRoundRobin(g *group, c *Config) (strategy, error) {
	s := &roundRobin{up: upPositions(g), turns: newRampTurns(g)}
	if len(s.up) > 0 {
		s.cur = newCursor(len(s.up), 0)
		g.sched.follow(1, &orbit{table: s.up, cur: s.cur})
		g.setSchedule(s.up, s.cur)
	}
	return s, nil
}

func (s *roundRobin) pick(g *group, req request) int {
	r := &req
	if len(s.up) == 0 {
		return -1
	}
	p := s.cur.take(1)
	ramps, passed := g.ramps.Load() != 0, false
	// At most one lap: the probing is bounded by the number of members.
	for k := 0; k < len(s.up); k++ {
		pos := int(s.up[p])
		m := g.members[pos]
		if usable(r, m) {
			if !ramps || takeTurn(&s.turns, r, m) {
				if passed && k > 0 {
					// A turn passed on for a slow start counts as taken, so
					// the member it went to is not served twice in a row:
					// a ramping member's share is then f/(n-1+f) at ramp
					// share f, as its weight's would be.
					s.cur.take(uint64(k))
				}
				return pos
			}
			passed = true
		}
		p++
		if p == len(s.up) {
			p = 0
		}
	}
	return -1
}

// upPositions lists the positions of g's members that are not down: the only
// ones a rotation or a schedule needs to hold, as nginx never considers a
// down peer.
func upPositions(g *group) []int32 {
	var up []int32
	for i, m := range g.members {
		if !m.down {
			up = append(up, int32(i))
		}
	}
	return up
}

// cursor hands out the positions 0..size-1 of a cyclic schedule in order, one
// per take, to any number of goroutines at once: one atomic add, no lock.
//
// The counter is reduced with Lemire's fastmod (two multiplications instead of
// a 64-bit division, which costs several times more). Fastmod needs a 32-bit
// dividend, so the goroutine whose add carries the counter across limit, a
// whole number of periods, takes limit back off; positions stay exact meanwhile
// because a counter at or above limit is reduced with an ordinary %.
type cursor struct {
	pad0  [64]byte // the counter gets a cache line of its own: picks write it
	n     atomic.Uint64
	pad1  [56]byte
	size  uint64
	limit uint64 // the largest multiple of size not above 2^32
	m     uint64 // fastmod's constant: ceil(2^64 / size)
	start int    // the first position handed out (Config.Stagger moves it)
}

// newCursor returns a cursor over size positions (1 <= size < 2^32) that
// starts at start % size.
func newCursor(size int, start uint64) *cursor {
	c := &cursor{size: uint64(size)}
	c.limit = (uint64(1) << 32) / c.size * c.size
	c.m = ^uint64(0)/c.size + 1
	c.start = int(start % c.size)
	c.n.Store(uint64(c.start))
	return c
}

// take consumes k consecutive positions and returns the first of them.
// (Balancer.Pick's fast path takes one position with a plain modulo
// instead, which is exact too: the counter only ever loses whole periods.)
func (c *cursor) take(k uint64) int {
	old := c.n.Add(k) - k
	if old+k < c.limit {
		hi, _ := bits.Mul64(c.m*old, c.size)
		return int(hi)
	}
	return c.wrap(old)
}

// wrap is take's rare path, for a take that ended at or beyond limit: the
// one whose add carried the counter across limit takes limit back off.
func (c *cursor) wrap(old uint64) int {
	if old < c.limit {
		c.n.Add(^(c.limit - 1)) // subtracts limit
	}
	return int(old % c.size)
}

// fastrange maps a uniform 64-bit x onto [0, n) by multiplication (Lemire):
// no division, and a bias below n/2^64. lo is the remainder of the product,
// itself uniform, which callers may reuse as a second draw.
func fastrange(x, n uint64) (idx, lo uint64) {
	return bits.Mul64(x, n)
}
