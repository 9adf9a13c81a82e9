package core

import (
	"hash/crc32"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
)

// What Traefik's interpreter (yaegi) needs of this package lives in this
// file. Interpreted, every function call costs as much as a compiled pick,
// each value a called function computes costs an allocation (whichever
// branch runs), a deferred call to interpreted code several microseconds,
// and a loop over a key's bytes a microsecond per few bytes. So:
//
//   - Take is Pick for an interpreted caller: three plain results (a struct
//     would cost a value per field), the table's read inline, and the
//     request's count handed back so that the caller can count it down
//     with a deferred call into compiled code;
//   - least_conn and fair, which have no table that answers alone, read
//     their flat arrays under the table's guard in one function each
//     (pickLeastSteady, pickTwoSteady, pickFairSteady), where the full pick
//     costs a request value, its dispatch and a call per member;
//   - hashing a key calls the standard library's compiled checksum and
//     address parser where compiled code runs its own loops (crcString,
//     ipHashFirst);
//   - across the package, the pick path's helpers are functions with one
//     result, not methods (a method call costs several function calls, a
//     second result more); rare work is in functions of its own, so that
//     the common path's frames do not carry its values; tables are flat
//     arrays (nested ones index several times slower); hashString's
//     rotations are written out (bits.RotateLeft64 would be a call each);
//     sorts take no comparison callbacks.
//
// Two defects of yaegi v0.16.1 shape code elsewhere: it misreads the
// element type of crc32.IEEETable (so crcTable is computed, in url_hash.go),
// and a tuple assignment of two struct fields can leave the second 0
// (fairBest assigns them one by one).
//
// Every function here makes the choice of the full pick it stands for:
// TestSteadyMatchesFullPick holds each strategy to it choice for choice,
// and the yaegi suite runs them interpreted.

// interpreted is true when this package runs under an interpreter such as
// Traefik's (yaegi), whose types have no names in package reflect. Only the
// cost of a computation depends on it, never its result.
var interpreted bool = reflect.TypeOf(nameProbe{}).Name() == ""

type nameProbe struct{}

// Take is Pick with no filter, for a caller that an interpreter runs and
// that ends its requests with a deferred call (under an interpreter a
// deferred call into compiled code costs a fraction of a deferred call to
// Done). It returns the backend's index (-1 when none is available), its
// count of requests in flight when the pick counted the request there, and
// the request's ticket.
//
// When the count is not nil, the caller counts the request down itself
// with Add(-1) on it (deferred, so that a handler's panic still ends the
// request), and the ticket then says only whether Done must hear of the
// request even when it succeeds (0: it need not); Done with it counts the
// backend's count down no further. A balancer that also counts requests
// over all its backends (least_conn from nine backends, url_hash's bounded
// mode) gives a ticket that Done takes off that count: a request whose
// handler panics before its Done leaves that count one high, which costs
// least_conn its O(1) pick while nothing is in flight (the scan then finds
// every backend tied and makes the same choice), never a choice.
//
// Take knows no sticky id: a request that carries one goes through Pick
// with Filter.Sticky.
func Take(b *Balancer, key string) (int, *atomic.Int64, Ticket) {
	g := b.primary
	switch g.table {
	case tableSchedule:
		if g.gate.Load() == 1 && g.watch.Load() == 0 { // pickTable's read, inline
			return int(g.look[(g.cur.n.Add(1)-1)%g.cur.size]), nil, 0
		}
	case tableLeast, tableTwo:
		return takeLeast(b, g, key)
	case tableFair:
		return takeFair(b, g, key)
	case tableCRC:
		return takeCRC(b, g, key)
	case tableMaglev:
		return takeMaglev(b, g, key)
	case tableIPHash:
		return takeIPHash(b, g, key)
	}
	return takeAny(b, key)
}

// takeCRC, takeMaglev and takeIPHash are Take under url_hash's ketama and
// modulo modes, its maglev mode and ip_hash: pickTable's read, inline, a
// function each (the hashing too, as crcString and ipHashFirst do it
// interpreted), with a ticket of 0 (these count nothing, and a steady
// group has no backend with failures to clear).
func takeCRC(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if key != "" && g.gate.Load()>>modeBits == 0 && g.watch.Load() == 0 { // steady, inline
		if i := g.look[crcString(key)>>g.lookShift]; i >= 0 {
			return int(i), nil, 0
		}
	}
	return takeAny(b, key)
}

func takeMaglev(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if key != "" && g.gate.Load()>>modeBits == 0 && g.watch.Load() == 0 { // steady, inline
		if i := g.look[(uint64(crcString(key))*hashP1>>32)*g.lookSize>>32]; i >= 0 { // slot(g, maglevKey(key))
			return int(i), nil, 0
		}
	}
	return takeAny(b, key)
}

func takeIPHash(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if g.gate.Load()>>modeBits == 0 && g.watch.Load() == 0 { // steady, inline
		if i := g.look[ipHashFirst(key)]; i >= 0 {
			return int(i), nil, 0
		}
	}
	return takeAny(b, key)
}

// takeLeast is Take under least_conn: its steady read (exact, or two
// choices'), the request counted on the backend alone, inline. A steady
// group has no backend with failures to clear (see steady), so the
// ticket is 0.
func takeLeast(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if gate := g.gate.Load(); gate>>modeBits == 0 && g.watch.Load() == 0 { // steady(g, gate), inline
		i := noAnswer
		if g.table == tableLeast {
			i = pickLeastSteady(b, g, gate)
		} else {
			i = pickTwoSteady(b, g)
		}
		if i >= 0 {
			n := b.counts[i]
			n.Add(1)
			b.requests[i].Add(1)
			if b.inflight != nil {
				b.inflight.Add(1)
				return i, n, ticketTotal
			}
			return i, n, 0
		}
	}
	return takeAny(b, key)
}

// takeFair is Take under fair: its steady read at the pick's clock
// reading, which the ticket carries, and the count as takeLeast's.
func takeFair(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if gate := g.gate.Load(); gate>>modeBits == 0 && g.watch.Load() == 0 { // steady(g, gate), inline
		now := clockEpoch + int64(b.since(clockBase)) // clockNano, inline
		i := pickFairSteady(b, g, now)
		n := b.counts[i]
		n.Add(1)
		b.requests[i].Add(1)
		return i, n, Ticket(now &^ ticketFlags)
	}
	return takeAny(b, key)
}

// takeAny is Take as Pick makes it: the table's read or the full pick, and
// begin; the backend's count handed back.
func takeAny(b *Balancer, key string) (int, *atomic.Int64, Ticket) {
	i, t := Pick(b, key, Filter{})
	if t&ticketCount == 0 {
		return i, nil, t
	}
	if b.inflight != nil {
		t |= ticketTotal
	}
	return i, b.counts[i], t &^ ticketCount
}

// crcString is the CRC-32 (IEEE) checksum of s: nginx's ngx_crc32_long.
// Compiled, crcUpdate's loop allocates nothing (the standard library's
// checksum takes a []byte, which would copy s); interpreted, that loop
// costs about a microsecond per 8 bytes, and the standard library's
// compiled checksum one call.
func crcString(s string) uint32 {
	if interpreted {
		return crc32.ChecksumIEEE([]byte(s))
	}
	return ^crcUpdate(0xffffffff, s)
}

// ipHashFirst returns nginx's first ip_hash hash of the client address key,
// the index of ip_hash's table entry for it, or ipHashNone for a key the
// table does not read. Compiled, it reads IPv4 addresses only (the full
// pick reads the rest as cheaply). Interpreted, where a loop over the
// characters costs microseconds and the standard library's parser one call,
// it reads any address net.ParseIP reads: dotted IPv4 text as parseIPv4
// reads it (no leading zeros, no zone), given in 16 bytes as
// "::ffff:a.b.c.d" is, which is IPv6 text to nginx; IPv6 text has a ':',
// IPv4 text none.
func ipHashFirst(key string) int {
	if !interpreted {
		return ipv4Hash(key)
	}
	ip := net.ParseIP(key)
	if len(ip) != net.IPv6len {
		return ipHashNone
	}
	if strings.IndexByte(key, ':') < 0 {
		return ipv4Hi[ip[12]] + ipv4Mid[ip[13]] + int(ip[14]) // ipv4Hash's, before its modulo
	}
	return ipv6Hash(ip)
}

// ipv4Hi[q] and ipv4Mid[q] are the terms of nginx's first hash of an IPv4
// address (89*113^3 + q0*113^2 + q1*113 + q2, modulo 6271: see ipv4Hash) for
// a first and a second octet q, each reduced modulo 6271. With the third
// octet added they sum to below ipHashNone, and ip_hash's table repeats
// byHash past 6270, so that no modulo is needed: interpreted, two loads
// cost less than the conversions, products and modulo they replace.
var ipv4Hi, ipv4Mid [256]int

// ipHashNone is the last entry of ip_hash's table, past every sum of
// ipv4Hi, ipv4Mid and an octet: -1, the entry of a key the table does not
// read.
const ipHashNone = 2*(ipHashMod-1) + 255 + 1

func init() {
	for q := 0; q < 256; q++ {
		ipv4Hi[q] = (ipHashInit*ipHashMul*ipHashMul*ipHashMul + q*ipHashMul*ipHashMul) % ipHashMod
		ipv4Mid[q] = q * ipHashMul % ipHashMod
	}
}

// ipv4Hash returns nginx's first hash of key when key is an IPv4 address
// (the hash loop over its first three octets, unrolled), and ipHashNone
// otherwise. It reads the address with parseIPv4, which allocates nothing
// (the standard library's parser allocates its error for a key that is not
// an address). Compiled, the products and the modulo cost less than the
// loads of ipv4Hi and ipv4Mid.
func ipv4Hash(key string) int {
	var q [16]byte
	if !parseIPv4(key, &q, 0) {
		return ipHashNone
	}
	return (ipHashInit*ipHashMul*ipHashMul*ipHashMul + int(q[0])*ipHashMul*ipHashMul + int(q[1])*ipHashMul + int(q[2])) % ipHashMod
}

// ipv6Hash is nginx's first hash of the IPv6 address ip (a function of its
// own, so that ipHashFirst's frame does not carry its values).
func ipv6Hash(ip net.IP) int {
	return (ipHashInit*ipHashPow[net.IPv6len] + ipHashSum(ip)) % ipHashMod
}

// pickLeastSteady is least_conn's read of a steady group (gate is the
// schedule's gate as pickTable read it): while nothing is in flight (for a
// balancer that counts over all backends, see keepsTotal) and the schedule
// follows its canonical table, every member that is not down ties, and
// nginx's pass among them all is smooth_wrr's next step, the table's next
// entry; otherwise, for a group of up to tieBits members all up, one pass
// over the group's counts and weights (in thousandths) finds the member with
// the fewest requests in flight per weight, nginx's choice when it is the
// only one (scanPlain's answer); a tie goes to tiedPass, with a bit per
// tied position. Where neither answers, noAnswer. The scan is inline and
// its conditions few and flat: every call and subexpression costs the
// interpreter allocations.
func pickLeastSteady(b *Balancer, g *group, gate int64) int {
	if b.inflight != nil && gate == 1 {
		if i := leastIdle(b, g); i >= 0 {
			return i
		}
	}
	if g.leastScan {
		// bc/bw starts as 1/0, above any load: the first member takes it.
		milli := g.milli
		best, bc, bw, mask, bit := 0, int64(1), int64(0), uint64(0), uint64(1)
		for i, n := range g.counts {
			c, w := n.Load(), milli[i]
			if lhs, rhs := c*bw, bc*w; lhs < rhs {
				best, bc, bw, mask = i, c, w, bit
			} else if lhs == rhs {
				mask |= bit
			}
			bit <<= 1
		}
		if mask&(mask-1) == 0 { // one bit: best alone
			return g.members[best].index
		}
		if p := tiedPass(b, g, mask, gate); p >= 0 {
			return p
		}
	}
	return noAnswer
}

// leastIdle is pickLeastSteady's answer while nothing is in flight: the
// table's next entry. It returns -1 while something is in flight. A
// function of its own, so that a group below nine members (which keeps no
// count over all of them) does not pay for its values.
func leastIdle(b *Balancer, g *group) int {
	if b.inflight.Load() == 0 {
		return int(g.look[(g.cur.n.Add(1)-1)%g.cur.size])
	}
	return -1
}

// tiedPass is least_conn's tie under load, for the members in mask as the
// scan found them tied, gate the schedule's gate as read before the scan:
// nginx's smooth pass among the tied, as exactLeast makes it, in one
// function over the flat arrays. When every member ties it is smooth_wrr's
// pass over them all: the table's next entry while the schedule follows it,
// smooth_wrr's own pick while it follows an orbit it learnt. Otherwise it
// is exactPass's, inline: leaving the table first if the schedule follows
// one, smoothPass, and follow's part. It returns the backend index, or -1
// where the full pick must answer (a member unsteady at the pass, or, at a
// tie among every member, the schedule back on a table meanwhile).
func tiedPass(b *Balancer, g *group, mask uint64, gate int64) int {
	all := mask == g.allMask
	if all && gate != 0 {
		return tiedAll(b, g, gate)
	}
	sm := g.smooth
	sm.mu.Lock()
	if gate = g.gate.Load(); gate != 0 && !tiedLeave(g, gate, all) {
		sm.mu.Unlock()
		return -1
	}
	cur, wu, tag := sm.current, sm.wunit, sm.tag
	best, top, total, set := -1, int64(0), int64(0), uint64(0)
	for i, bit := 0, uint64(1); i < len(cur); i, bit = i+1, bit<<1 {
		if mask&bit != 0 {
			c := cur[i] + wu[i]
			cur[i] = c
			total += wu[i]
			set ^= tag[i]
			if best < 0 || c > top { // ties go to the earlier member, as in nginx
				best, top = i, c
			}
		}
	}
	cur[best] -= total
	sm.clean, sm.set, sm.partTotal = true, set, total
	if g.ties.table != nil { // follow's part (beyond the bound there is no table)
		if all {
			tiedFollow(b, g, best)
		} else if cur[best] == 0 && allZero(cur) {
			g.ties.resume()
		} else {
			g.ties.rec = 0
		}
	}
	sm.mu.Unlock()
	return g.members[best].index
}

// tiedLeave is tiedPass's first step when the schedule's gate, read under
// the smooth lock, is not 0: exactPass's, leaving the table the schedule
// follows, unless the full pick must answer (it reports false): a member is
// unsteady (exactPass adjusts its weight), or every member ties and the
// schedule is back on a table.
func tiedLeave(g *group, gate int64, all bool) bool {
	if gate>>modeBits != 0 || all {
		return false
	}
	leaveTable(g.ties, g, gate&modeMask)
	return true
}

// tiedFollow is follow after tiedPass's pass among every member, which
// picked best: it may record the pass towards a learnt orbit.
func tiedFollow(b *Balancer, g *group, best int) {
	r := request{b: b}
	follow(g.ties, g, &r, best, false)
}

// tiedAll is tiedPass's pass when every member ties while the schedule
// follows a table (gate is 1, the canonical one: its next entry) or an
// orbit smooth_wrr learnt (its pick), in a function of its own so that
// tiedPass's frame has neither.
func tiedAll(b *Balancer, g *group, gate int64) int {
	if gate == 1 {
		return int(g.look[(g.cur.n.Add(1)-1)%g.cur.size])
	}
	r := request{b: b}
	return g.members[g.ties.pick(g, r)].index
}

// pickTwoSteady is two choices' read of a steady group: two draws in
// proportion to weight from look (fairPair's, inline: its two results
// would cost a call's worth), and the one with fewer requests in flight per
// weight, the first on a tie.
func pickTwoSteady(b *Balancer, g *group) int {
	n := g.lookLen
	x := b.rand()
	i, j := g.look[(x&0xffffffff)%n], g.look[(x>>32)%n]
	if i == j {
		j = redraw(b, g.look, i)
	}
	mi, mj := b.members[i], b.members[j]
	if mj.state.inflight.Load()*int64(mi.weight) < mi.state.inflight.Load()*int64(mj.weight) {
		return int(j)
	}
	return int(i)
}

// pickFairSteady is fair's read of a steady group (so every member is
// eligible at its configured weight) at clock reading now: pickFair's
// rules, in its order, with nothing to check per member, over member
// positions and the flat arrays.
func pickFairSteady(b *Balancer, g *group, now int64) int {
	x := b.rand()
	p := b.members[g.look[(x&0xffffffff)%g.lookLen]].pos // fairPair's first
	// The probe rule: p keeps the pick if not picked for DecayTime/4.
	if now-g.picks[p].Load() < g.probe {
		if g.fairAll {
			p = fairScanSteady(g, p)
		} else {
			p = fairTwoSteady(b, g, x, p)
		}
	}
	g.picks[p].Store(now) // taken, inline
	return g.members[p].index
}

// fairTwoSteady is the choice in a group too large to score in whole: the
// better of the first candidate, at position p, and the second drawn by x.
func fairTwoSteady(b *Balancer, g *group, x uint64, p int) int {
	m := g.members[p]
	c := b.members[lookSecond(b, g.look, x, m.index)]
	if fairBetter(c, int64(c.weight)*1000, m, int64(m.weight)*1000) {
		return c.pos
	}
	return p
}

// fairScanSteady is fairBest for a steady group, whose members are all
// eligible at their configured weights: one pass over the flat arrays,
// each member's count and estimate read once (the estimates from the
// group's board). The scores are fairCost's and the last comparison
// fairBetter's, inline: a call per member would double the pick's cost.
func fairScanSteady(g *group, first int) int {
	counts, ests, milli := g.counts, g.board.ests.Load().([]*fairEst), g.milli
	fin, fm := counts[first].Load(), milli[first]
	best, bs, bin, bm, be := first, fairInf, int64(0), int64(1), unmeasured
	lb, ls, le := first, fairInf, unmeasured // the best of those less loaded than first
	fs, fe := 0.0, unmeasured
	for c, n := range counts {
		in, x, w := n.Load(), ests[c], milli[c]
		s := fairInf
		if x.e != 0 {
			s = x.e * (float64(w) + float64(in*1000)*x.wait) / float64(w)
		} else if in == 0 {
			s = 0 // unmeasured and idle
		}
		if c == first {
			fs, fe = s, x
		}
		if s < bs {
			best, bs, bin, bm, be = c, s, in, w, x
		}
		if s < ls && in*fm < fin*w {
			lb, ls, le = c, s, x
		}
	}
	// fairBetter for best, then for lb, inline.
	if best != first && best != lb && bs < fs {
		if bin*fm == fin*bm { // as loaded: the larger tie
			t := be.tie
			if fe.tie > t {
				t = fe.tie
			}
			if bs*float64(t) < fs*fairUnit {
				return best
			}
		} else { // more loaded: the smaller near
			t := be.near
			if fe.near < t {
				t = fe.near
			}
			if bs*float64(fairUnit+t) < fs*fairUnit {
				return best
			}
		}
	}
	if lb != first {
		if ls < fs {
			return lb
		}
		t := le.near
		if fe.near < t {
			t = fe.near
		}
		if ls*fairUnit < fs*float64(fairUnit+t) {
			return lb
		}
	}
	return first
}

// fairBoard holds the estimates of a group that fair scores in whole, by
// member position, as one []*fairEst, so that fairScanSteady reads them
// all with one load (interpreted, each load is a call into compiled code).
// Each fold through the group (see fold) stores them anew, read from the
// members' states, under mu. A backend's estimate changed through another
// balancer (one Update built this one from, still ending its requests)
// reaches the board at the next fold through this one.
type fairBoard struct {
	mu   sync.Mutex
	ests atomic.Value
}

// refreshBoard stores the current estimates of g's members on its board.
func refreshBoard(g *group) {
	bd := g.board
	bd.mu.Lock()
	e := make([]*fairEst, len(g.members))
	for i, m := range g.members {
		e[i] = m.state.fair.est.Load().(*fairEst)
	}
	bd.ests.Store(e)
	bd.mu.Unlock()
}
