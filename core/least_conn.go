package core

func init() {
	register(LeastConn, strategyInfo{build: buildLeastConn})
}

// leastConn is nginx's weighted least connections
// (ngx_http_upstream_least_conn_module): the eligible member with the fewest
// requests in flight per unit of weight, compared by cross-multiplication so
// that no division rounds; the first such member in configuration order
// wins, and when several tie, nginx's smooth weighted round robin runs among
// the tied members only. Weights are slow-start weights, in thousandths so
// that a ramping backend of weight 1 ramps too.
//
// The exact scan is O(n) and lock-free; only a tie takes the group's smooth
// lock. With Config.TwoChoices it compares two random members instead
// (power of two choices): O(1), lock-free, and within a small factor of the
// exact choice's balance on large pools.
type leastConn struct {
	twoChoices bool
}

func buildLeastConn(g *group, c *Config) (strategy, error) {
	g.smooth.tied = make([]int, 0, len(g.members))
	return &leastConn{twoChoices: c.TwoChoices}, nil
}

func (lc *leastConn) pick(g *group, r request) int {
	if lc.twoChoices && len(g.members) > 2 {
		if p := twoLeast(g, &r); p >= 0 {
			return p
		}
	}
	return exactLeast(g, &r)
}

// exactLeast is nginx's choice.
func exactLeast(g *group, r *request) int {
	best, many := -1, false
	var bc, bw int64
	for i, m := range g.members {
		if !r.ok(m) {
			continue
		}
		c, w := m.state.inflight.Load(), r.milliWeight(m)
		if best < 0 || c*bw < bc*w {
			best, bc, bw, many = i, c, w, false
		} else if c*bw == bc*w {
			many = true
		}
	}
	if !many {
		return best // also -1: nothing eligible
	}
	// nginx shares ties out by smooth weighted round robin among the tied
	// members, which all come at or after best.
	s := g.smooth
	s.mu.Lock()
	tied := s.tied[:0]
	for i := best; i < len(g.members); i++ {
		m := g.members[i]
		if r.ok(m) && m.state.inflight.Load()*bw == bc*r.milliWeight(m) {
			tied = append(tied, i)
		}
	}
	s.tied = tied
	p := best
	if len(tied) > 0 {
		p = s.pass(g, r, tied)
	}
	s.mu.Unlock()
	if p < 0 {
		return best // the tied members changed meanwhile; best was eligible
	}
	return p
}

// twoLeast is the power of two choices: two distinct members drawn at random,
// the one with fewer requests in flight per weight wins (the first drawn on a
// tie). It returns -1 when neither is eligible, and the caller scans.
func twoLeast(g *group, r *request) int {
	n := uint64(len(g.members))
	x := r.b.rand()
	i := int((x & 0xffffffff) % n)
	j := int((x >> 32) % (n - 1))
	if j >= i {
		j++
	}
	mi, mj := g.members[i], g.members[j]
	oki, okj := r.ok(mi), r.ok(mj)
	switch {
	case oki && okj:
		if mj.state.inflight.Load()*r.milliWeight(mi) < mi.state.inflight.Load()*r.milliWeight(mj) {
			return j
		}
		return i
	case oki:
		return i
	case okj:
		return j
	}
	return -1
}
