package core

import (
	"crypto/md5"
	"encoding/hex"
)

// Sticky sessions follow nginx's (ngx_http_upstream_get_rr_peer_by_sid
// and its callers): a request names a backend by its id (Filter.Sticky),
// and the named backend takes it if it may, in the tier in use. What the
// id travels in (a cookie, a route, a learned session) is the host's
// business; package sticky has nginx's ways of reading and writing it.

// StickyID returns nginx's sticky id of a server at address ("host:port",
// "[::1]:port"): the lower-case hex MD5 of the address as written. Anyone
// who can try addresses can find the address behind such an id; a host
// that must hide them gives backends a Route of its own.
func StickyID(address string) string {
	sum := md5.Sum([]byte(address))
	return hex.EncodeToString(sum[:])
}

// ID returns backend i's sticky id: its Route, or StickyID of its address
// without one; "" when i is out of range.
func (b *Balancer) ID(i int) string {
	if i < 0 || i >= len(b.ids) {
		return ""
	}
	return b.ids[i]
}

// addID records backend i's sticky id; the first backend with an id keeps
// it, as nginx's lookup stops at the first match.
func addID(b *Balancer, i int, be Backend) {
	id := be.Route
	if id == "" {
		id = StickyID(be.Address)
	}
	b.ids[i] = id
	if _, dup := b.byID[id]; !dup {
		b.byID[id] = i
	}
}

// pickSticky is Pick for a request bound to member m.
func pickSticky(b *Balancer, key string, f Filter, m *member) (int, Ticket) {
	i := pickFrom(b, request{key: key, avail: f.Allow, b: b, version: f.Version, bound: m})
	if i < 0 {
		return -1, 0
	}
	return i, begin(b, i)
}

// pickBound returns the position in g of the member r is bound to when it
// may take the request, after the strategy's accounting of a bound pick
// (boundCounter); -1 otherwise. A bound member in another group is not in
// the tier in use. Draining does not stop a bound request.
func pickBound(g *group, r request) int {
	m := r.bound
	if m.group != g || m.down && !m.drain || !live(&r, m) {
		return -1
	}
	if c, ok := g.strategy.(boundCounter); ok {
		c.countBound(g, r, m.pos)
	}
	return m.pos // pickFrom does chosen's bookkeeping, as for any pick
}

// boundCounter is a strategy whose state a bound request moves.
type boundCounter interface {
	// countBound accounts for a request bound to member pos of g.
	countBound(g *group, r request, pos int)
}

// boundPass is nginx's round robin for a request bound to member pos
// (ngx_http_upstream_get_peer with a hint), on s with s.mu held: when the
// member's current weight is at or below -(total - weight), total being
// every configured weight of the group (down and draining members
// included), nothing changes; otherwise a pass runs over the eligible
// members as for any pick, and the bound member gives up the pass's total
// whether or not it took part (a draining one does not). nginx accounts so
// for only one bound request in a row; a run of them disturbs the unbound
// sequence by about a round.
func boundPass(s *smoothState, g *group, r *request, pos int) bool {
	if s.current[pos] <= -(s.allTotal - s.wunit[pos]) {
		return false
	}
	_, total := smoothAdd(s, g, r, nil)
	s.current[pos] -= total
	return true
}

// countBound counts a bound request in smooth_wrr's weights (boundPass),
// in exact mode: nginx's state leaves the table, and returns to one as
// after any perturbation.
func (s *smoothWRR) countBound(g *group, r request, pos int) {
	sm := g.smooth
	sm.mu.Lock()
	if s.table != nil {
		if k := s.sched.gate.Load() & modeMask; k != 0 {
			leaveTable(s, g, k)
		}
	}
	if boundPass(sm, g, &r, pos) {
		s.rec = 0
	}
	sm.mu.Unlock()
}

// hashBound counts a bound request as nginx's hash methods do: one whose
// key is empty goes to round robin, which counts it (boundPass); one with a
// key leaves every state as it is. (ip_hash's keys are never empty.)
func hashBound(g *group, r request, pos int) {
	if r.key != "" {
		return
	}
	sm := g.smooth
	sm.mu.Lock()
	boundPass(sm, g, &r, pos)
	sm.mu.Unlock()
}

func (s *ketama) countBound(g *group, r request, pos int)     { hashBound(g, r, pos) }
func (s *moduloHash) countBound(g *group, r request, pos int) { hashBound(g, r, pos) }
func (s *maglev) countBound(g *group, r request, pos int)     { hashBound(g, r, pos) }
func (s *bounded) countBound(g *group, r request, pos int)    { hashBound(g, r, pos) }
