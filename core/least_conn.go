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
	// The scan is lock-free and notes the tied members in a buffer on the
	// stack; when more tie than it holds, the scan runs again under the
	// smooth lock into the group's buffer, which holds them all.
	var buf [64]int
	best, n := scanLeast(g, r, buf[:])
	if n < 2 {
		return best // also -1: nothing eligible
	}
	// nginx shares ties out by smooth weighted round robin among the tied
	// members only.
	s := g.smooth
	s.mu.Lock()
	tied := buf[:]
	if n > len(buf) {
		best, n = scanLeast(g, r, s.tied[:cap(s.tied)])
		tied = s.tied[:cap(s.tied)]
	}
	p := best
	if n >= 2 {
		p = s.pass(g, r, tied[:n])
	}
	s.mu.Unlock()
	if p < 0 {
		return best // the tied members changed meanwhile; best was eligible
	}
	return p
}

// scanLeast returns the first eligible member with the fewest requests in
// flight per weight, and how many members tie with it (itself included),
// noting their positions in tied as far as it holds them.
func scanLeast(g *group, r *request, tied []int) (best, n int) {
	simple, ramps := g.scanMode(r)
	best = -1
	var bc, bw int64
	for i := range g.hot {
		h := &g.hot[i]
		c, w := h.state.inflight.Load(), h.milli
		if !simple && !r.ok(g.members[i]) {
			continue
		}
		if ramps {
			w = r.milliWeight(g.members[i])
		}
		if best < 0 || c*bw < bc*w {
			best, bc, bw, n = i, c, w, 0
		} else if c*bw != bc*w {
			continue
		}
		if n < len(tied) {
			tied[n] = i
		}
		n++
	}
	return best, n
}

// twoLeast is the power of two choices: two distinct members drawn at random,
// the one with fewer requests in flight per weight wins (the first drawn on a
// tie). It returns -1 when neither is eligible, and the caller scans.
func twoLeast(g *group, r *request) int {
	i, j := pair(r.b.rand(), len(g.members))
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

// pair turns one random 64-bit value into two distinct positions below n
// (n >= 2): the first from the low half, the second from the high half among
// the n-1 others. The modulo bias is below n/2^32.
func pair(x uint64, n int) (i, j int) {
	i = int((x & 0xffffffff) % uint64(n))
	j = int((x >> 32) % uint64(n-1))
	if j >= i {
		j++
	}
	return i, j
}
