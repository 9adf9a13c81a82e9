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
//     (pickLeastSteady, pickTwoSteady, pickFairSteady), which for Take also
//     counts the request (takeCounted); pickTable counts it itself
//     (countIn): one frame where the full pick costs a request value, its
//     dispatch and a call per member;
//   - hashing a key calls the standard library's compiled checksum and
//     address parser where compiled code runs its own loops (crcString,
//     ipHashParsed);
//   - across the package, the pick path's helpers are functions with one
//     result, not methods (a method call costs several function calls, a
//     second result more); rare work is in functions of its own, so that
//     the common path's frames do not carry its values; tables are flat
//     arrays (nested ones index several times slower); hashString's
//     rotations are written out (bits.RotateLeft64 would be a call each);
//     sorts take no comparison callbacks;
//   - on the pick path, conditions are nested rather than joined with &&
//     (each && is a value of its own), a variable is assigned alone (a
//     tuple assignment allocates each time it runs, so a loop's costs as
//     many times), and a return statement gives variables, not constants
//     (each constant there allocates each time: noCount, noTicket).
//
// Two defects of yaegi v0.16.1 shape code elsewhere: it misreads the
// element type of crc32.IEEETable (so crcTable is computed, in url_hash.go),
// and a tuple assignment of two struct fields can leave the second 0
// (fairBest assigns them one by one).
//
// Every function here makes the choice of the full pick it stands for:
// TestSteadyMatchesFullPick holds each strategy to it choice for choice,
// TestTakeMatchesPick holds Take to Pick, and the yaegi suite runs them
// interpreted.

// interpreted is true when this package runs under an interpreter such as
// Traefik's (yaegi), whose types have no names in package reflect. Only the
// cost of a computation depends on it, never its result.
var interpreted bool = reflect.TypeOf(nameProbe{}).Name() == ""

// noCount and noTicket are the results nil and 0 of Take's paths (see
// above: a constant in a return statement costs an allocation each time
// it runs, a variable's value none).
var (
	noCount  *atomic.Int64
	noTicket Ticket
)

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
	switch g.table { // each case tried costs the interpreter a value
	case tableSchedule:
		return takeSchedule(b, g, key)
	case tableIPHash:
		return takeIPHash(b, g, key)
	case tableCRC:
		return takeCRC(b, g, key)
	case tableLeast:
		return pickLeastSteady(b, g, true)
	case tableTwo:
		return pickTwoSteady(b, g, true)
	case tableFair:
		return pickFairSteady(b, g, true)
	case tableDraw:
		return takeDraw(b, g, key)
	case tableMaglev:
		return takeMaglev(b, g, key)
	}
	return takeAny(b, key)
}

// takeDraw is Take under random and weighted_random: pickTable's draw,
// inline, with a ticket of 0 (these count nothing, and a steady group has
// no backend with failures to clear).
// takeSchedule is Take for a schedule (smooth_wrr, gcd_wrr, round_robin):
// pickTable's read, inline; a function of its own, so that the other
// kinds' calls of Take do not pay for its values.
func takeSchedule(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if g.gate.Load() == 1 {
		if g.watch.Load() == 0 {
			return int(g.look[(g.cur.n.Add(1)-1)%g.lookLen]), noCount, noTicket
		}
	}
	return takeAny(b, key)
}

func takeDraw(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if g.gate.Load() < 1<<modeBits { // steady, inline: the gate is never negative
		if g.watch.Load() == 0 {
			return int(g.look[b.rand()%g.lookLen]), noCount, noTicket
		}
	}
	return takeAny(b, key)
}

// takeCRC, takeMaglev and takeIPHash are Take under url_hash's ketama and
// modulo modes, its maglev mode and ip_hash: pickTable's read, inline, a
// function each (the hashing too, as crcString and ipHashParsed do it
// interpreted), with a ticket of 0 (these count nothing, and a steady
// group has no backend with failures to clear). The guard is
// hashSteady's.
func takeCRC(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if key != "" {
		if g.watch.Load() == 0 {
			if i := int(g.look[crcString(key)>>g.lookShift]); i >= 0 {
				return i, noCount, noTicket
			}
		}
	}
	return takeAny(b, key)
}

func takeMaglev(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if key != "" {
		if g.watch.Load() == 0 {
			if i := int(g.look[(uint64(crcString(key))*hashP1>>32)*g.lookSize>>32]); i >= 0 { // slot(g, maglevKey(key))
				return i, noCount, noTicket
			}
		}
	}
	return takeAny(b, key)
}

func takeIPHash(b *Balancer, g *group, key string) (int, *atomic.Int64, Ticket) {
	if g.watch.Load() == 0 {
		if i := int(g.look[ipHashParsed(key)]); i >= 0 {
			return i, noCount, noTicket
		}
	}
	return takeAny(b, key)
}

// pickLeastSteady is least_conn's read of a steady group, for Take (take
// true) and for pickTable (take false). While nothing is in flight (for a
// balancer that counts over all backends, see keepsTotal) and the schedule
// follows its canonical table, every member that is not down ties, and
// nginx's pass among them all is smooth_wrr's next step, the table's next
// entry (pickTable reads it before calling here); otherwise, for a group
// of up to tieBits members all up, one pass over the group's counts and
// weights (in thousandths) finds the member with the fewest requests in
// flight per weight, nginx's choice when it is the only one (scanPlain's
// answer); a tie goes to tiedAll or tiedPass, with a bit per tied position. Where neither answers, or the group is not
// steady, the answer is noAnswer: pickTable's, and Take's takeAny. Take's
// pick goes to takeCounted. The guard and the scan are inline (Take's
// frame and this one are all a pick costs) and their conditions flat.
func pickLeastSteady(b *Balancer, g *group, take bool) (int, *atomic.Int64, Ticket) {
	i := noAnswer
	if gate := g.gate.Load(); gate < 1<<modeBits { // steady, inline: the gate is never negative
		if g.watch.Load() == 0 {
			if b.inflight != nil {
				i = leastIdle(b, g, gate)
			}
			if i < 0 {
				if g.leastScan {
					// bc/bw starts as 1/0, above any load: the first member takes it.
					best, bc, bw, mask, bit, tied := 0, int64(1), int64(0), uint64(0), uint64(1), false
					for k, n := range g.counts {
						c, w := n.Load(), g.milli[k]
						if lhs, rhs := c*bw, bc*w; lhs < rhs {
							best = k
							bc = c
							bw = w
							mask = bit
							tied = false
						} else if lhs == rhs {
							mask |= bit
							tied = true
						}
						bit <<= 1
					}
					if tied {
						if mask == g.allMask {
							i = tiedAll(b, g, gate)
						} else {
							i = tiedPass(b, g, mask, gate)
						}
					} else {
						i = g.members[best].index
					}
				}
			}
		}
	}
	if take {
		return takeCounted(b, i, noTicket)
	}
	return i, noCount, noTicket
}

// takeCounted ends the Take of a steady read that chose backend i (or
// noAnswer: then it is takeAny's) with ticket t: it counts the request on
// the backend and hands the backend's count back (takeTotal counts it over
// all backends too, where the balancer keeps that count). A steady group
// has no backend with failures to clear (see table.go), so t says nothing of
// failures. least_conn and fair ignore the key.
func takeCounted(b *Balancer, i int, t Ticket) (int, *atomic.Int64, Ticket) {
	if i < 0 {
		return takeAny(b, "")
	}
	n := b.counts[i]
	n.Add(1)
	b.requests[i].Add(1)
	if b.inflight != nil {
		return takeTotal(b, i, n, t)
	}
	return i, n, t
}

// takeTotal is takeCounted's end for a balancer that counts requests over
// all backends: the request counted there too, and ticketTotal in its
// ticket, so that Done takes it off.
func takeTotal(b *Balancer, i int, n *atomic.Int64, t Ticket) (int, *atomic.Int64, Ticket) {
	b.inflight.Add(1)
	return i, n, t | ticketTotal
}

// pickFairSteady is fair's read of a steady group (so every member is
// eligible at its configured weight), for Take (take true) and for Pick
// (take false: pickTable), at the pick's clock reading: pickFair's
// rules, in its order, with nothing to check per member, over member
// positions and the flat arrays. The ticket carries the clock reading
// (Take's pick goes to takeCounted with it; pickTable begins the request
// with it, so that a pick reads the clock once); an unsteady group's answer is noAnswer
// (Take's: takeAny's).
func pickFairSteady(b *Balancer, g *group, take bool) (int, *atomic.Int64, Ticket) {
	if g.gate.Load() < 1<<modeBits { // steady, inline
		if g.watch.Load() == 0 {
			now := clockEpoch + int64(b.since(clockBase)) // clockNano, inline
			if now == 0 {
				now = 1
			}
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
			i := g.members[p].index
			t := Ticket(now &^ ticketFlags)
			if take {
				return takeCounted(b, i, t)
			}
			return i, noCount, t
		}
	}
	if take {
		return takeAny(b, "")
	}
	return noAnswer, noCount, noTicket
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
// table does not read: compiled, ipv4Hash's (IPv4 only: the full pick
// reads the rest as cheaply); interpreted, ipHashParsed's.
func ipHashFirst(key string) int {
	if interpreted {
		return ipHashParsed(key)
	}
	return ipv4Hash(key)
}

// ipHashParsed returns nginx's first ip_hash hash of the client address
// key, the index of ip_hash's table entry for it, or ipHashNone for a key
// the table does not read: ipv4Hash's for the interpreter, where a loop
// over the characters costs microseconds and the standard library's parser
// one call. It reads any address net.ParseIP reads, dotted IPv4 text as
// parseIPv4 reads it (no leading zeros, no zone), given in 16 bytes as
// "::ffff:a.b.c.d" is, which is IPv6 text to nginx; IPv6 text has a ':',
// IPv4 text none.
func ipHashParsed(key string) int {
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
// own, so that ipHashParsed's frame does not carry its values).
func ipv6Hash(ip net.IP) int {
	return (ipHashInit*ipHashPow[net.IPv6len] + ipHashSum(ip)) % ipHashMod
}

// leastIdle is pickLeastSteady's answer while nothing is in flight and the
// schedule follows its canonical table (gate 1): the table's next entry.
// It returns noAnswer otherwise. A function of its own, so that a group below
// nine members (which keeps no count over all of them) does not pay for
// its values.
func leastIdle(b *Balancer, g *group, gate int64) int {
	if gate == 1 && b.inflight.Load() == 0 {
		return int(g.look[(g.cur.n.Add(1)-1)%g.cur.size])
	}
	return noAnswer
}

// tiedPass is least_conn's tie under load, for the members in mask as the
// scan found them tied, gate the schedule's gate as read before the scan:
// nginx's smooth pass among the tied, as exactLeast makes it, in one
// function over the flat arrays (a tie among every member while the
// schedule follows a table or an orbit is tiedAll's). It is exactPass's,
// inline: leaving the table first if the schedule follows one, smoothPass,
// and follow's part. It returns the backend index, or noAnswer where the
// full pick must answer (a member unsteady at the pass, or, at a tie among
// every member, the schedule back on a table meanwhile).
func tiedPass(b *Balancer, g *group, mask uint64, gate int64) int {
	all := mask == g.allMask
	sm := g.smooth
	sm.mu.Lock()
	if gate = g.gate.Load(); gate != 0 && !tiedLeave(g, gate, all) {
		sm.mu.Unlock()
		return noAnswer
	}
	cur, wu, tag := sm.current, sm.wunit, sm.tag
	best, top, total, set := -1, int64(0), int64(0), uint64(0)
	bit := uint64(1)
	for i := 0; i < len(cur); i++ {
		if mask&bit != 0 {
			c := cur[i] + wu[i]
			cur[i] = c
			total += wu[i]
			set ^= tag[i]
			if best < 0 || c > top { // ties go to the earlier member, as in nginx
				best = i
				top = c
			}
		}
		bit <<= 1
	}
	cur[best] -= total
	sm.clean = true
	sm.set = set
	sm.partTotal = total
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

// tiedAll is pickLeastSteady's pass when every member ties: while the schedule
// follows a table (gate is 1, the canonical one) the table's next entry,
// while it follows an orbit smooth_wrr learnt smooth_wrr's own pick, and
// otherwise tiedPass's. A function of its own, so that the scan's frame
// holds neither and a tie among all does not pay for tiedPass's frame.
func tiedAll(b *Balancer, g *group, gate int64) int {
	if gate == 1 {
		return int(g.look[(g.cur.n.Add(1)-1)%g.lookLen])
	}
	if gate != 0 {
		return tiedOrbit(b, g)
	}
	return tiedPass(b, g, g.allMask, gate)
}

// tiedOrbit is tiedAll's pick while the schedule follows an orbit
// smooth_wrr learnt: smooth_wrr's own pick.
func tiedOrbit(b *Balancer, g *group) int {
	r := request{b: b}
	return g.members[g.ties.pick(g, r)].index
}

// pickTwoSteady is two choices' read of a steady group, for Take (take
// true) and pickTable (take false): two draws in proportion to weight from
// look (fairPair's, inline: its two results would cost a call's worth),
// and the one with fewer requests in flight per weight, the first on a
// tie. Take's pick goes to takeCounted; an unsteady group's answer is
// noAnswer (Take's: takeAny's).
func pickTwoSteady(b *Balancer, g *group, take bool) (int, *atomic.Int64, Ticket) {
	i := noAnswer
	if g.gate.Load() < 1<<modeBits { // steady, inline
		if g.watch.Load() == 0 {
			x := b.rand()
			a := g.look[(x&0xffffffff)%g.lookLen]
			c := g.look[(x>>32)%g.lookLen]
			if a == c {
				c = redraw(b, g.look, a)
			}
			i = int(a)
			if b.counts[c].Load()*int64(b.members[a].weight) < b.counts[a].Load()*int64(b.members[c].weight) {
				i = int(c)
			}
		}
	}
	if take {
		return takeCounted(b, i, noTicket)
	}
	return i, noCount, noTicket
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
			fs = s
			fe = x
		}
		if s < bs {
			best = c
			bs = s
			bin = in
			bm = w
			be = x
		}
		if s < ls {
			if in*fm < fin*w {
				lb = c
				ls = s
				le = x
			}
		}
	}
	// fairBetter for best, then for lb, inline (nested conditions and one
	// t: each && and each variable costs the interpreter a value).
	var t int64
	if best != first {
		if best != lb {
			if bs < fs {
				if bin*fm == fin*bm { // as loaded: the larger tie
					t = be.tie
					if fe.tie > t {
						t = fe.tie
					}
					if bs*float64(t) < fs*fairUnit {
						return best
					}
				} else { // more loaded: the smaller near
					t = be.near
					if fe.near < t {
						t = fe.near
					}
					if bs*float64(fairUnit+t) < fs*fairUnit {
						return best
					}
				}
			}
		}
	}
	if lb != first {
		if ls < fs {
			return lb
		}
		t = le.near
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
