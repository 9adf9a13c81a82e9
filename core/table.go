package core

// A group's table is what its strategy precomputes at build so that, while
// the group is steady, a pick is one read: the next entry of a schedule
// (smooth_wrr, gcd_wrr, round_robin), a random entry of the weights
// repeated (random, weighted_random), the entry of a key's hash (url_hash,
// ip_hash). The table is immutable once built. Two words say whether it
// applies: the schedule's gate (its low byte the mode of smooth_wrr's
// state, the bits above the count of unsteady members: ramping, or lowered
// by failures) and watch (the count of members with failures, when any
// member has max_fails; a word that stays 0 otherwise). The group is
// steady while the gate's count and watch read 0 (a schedule's table also
// needs the mode that follows it: the gate reads 1); a hash strategy's
// table, which reads no weight of the moment, needs watch alone
// (hashSteady). Anything that makes a member ineligible or weigh other
// than its configured weight moves one of them, and the full pick answers
// until they read 0 again. A group with a member that has max_conns has no
// table: only a look at that member's requests in flight tells whether it
// may be picked; nor has the primary group of a strategy that counts
// nothing when a backup has max_conns (every request is then counted).
//
// least_conn and fair have no table that answers alone (their choice
// depends on requests in flight and on latency); their reads over the flat
// arrays, under the same guard, are in interp.go.

// Table kinds, fixed when the group is built.
const (
	tableNone     = iota
	tableSchedule // the canonical schedule's next entry, while the gate's mode is 1
	tableDraw     // look[rand % len(look)]
	tableCRC      // url_hash ketama and modulo: look[crc >> lookShift]
	tableMaglev   // url_hash maglev: look is the Maglev table
	tableBounded  // url_hash bounded: ketama's bucket, while under its cap
	tableIPHash   // ip_hash: look[nginx's first hash of the address]
	tableLeast    // least_conn (see pickLeastSteady)
	tableTwo      // least_conn two_choices (see pickTwoSteady)
	tableFair     // fair (see pickFairSteady)
)

// noAnswer is what pickTable returns where the table has no answer: the
// full pick decides.
const noAnswer = -2

// hashSteady reports whether a hash strategy's table (tableCRC,
// tableMaglev, tableBounded, tableIPHash) applies now: no member can be out
// for failures. A keyed pick reads no member's weight of the moment, so
// the gate's unsteady members, which under a hash strategy are only
// weights that failures lowered (these strategies refuse slow_start), do
// not hold it back; the empty key's round robin does not read the table.
func hashSteady(g *group) bool {
	return g.watch.Load() == 0
}

// pickTable answers a pick with no caller's filter from the primary
// group's table and begins the request there, returning the backend index
// and the request's ticket, or noAnswer (see the entries of -1: a key
// whose member is down, a ring bucket holding a point) when the full pick
// must decide. A strategy that counts nothing gives a ticket of 0: a
// steady group has no backend with failures to clear, and the balancer
// counts nothing either (see build). Members of a hash strategy are all
// primary, so a position there is a backend index.
func pickTable(b *Balancer, key string) (int, Ticket) {
	g := b.primary
	switch g.table {
	case tableSchedule:
		return scheduleNext(g), 0
	case tableDraw:
		if g.gate.Load()>>modeBits == 0 && g.watch.Load() == 0 {
			return int(g.look[b.rand()%g.lookLen]), 0
		}
	case tableCRC:
		if key != "" && hashSteady(g) {
			return entry(g, uint64(crcString(key)>>g.lookShift)), 0
		}
	case tableMaglev:
		if key != "" && hashSteady(g) {
			return entry(g, slot(g, maglevKey(key))), 0
		}
	case tableBounded:
		if key != "" && hashSteady(g) {
			if i := entry(g, uint64(crcString(key)>>g.lookShift)); i >= 0 && underCap(b, g, i) {
				return i, countIn(b, i)
			}
		}
	case tableIPHash:
		if hashSteady(g) {
			return entry(g, uint64(ipHashFirst(key))), 0
		}
	case tableLeast:
		i := noAnswer
		if b.inflight != nil && b.inflight.Load() == 0 {
			// Nothing in flight: every member that is not down ties, and
			// nginx's pass among them all is the schedule's next step.
			i = scheduleNext(g)
		}
		if i < 0 {
			i, _, _ = pickLeastSteady(b, g, false)
		}
		if i >= 0 {
			return i, countIn(b, i)
		}
	case tableTwo:
		if i, _, _ := pickTwoSteady(b, g, false); i >= 0 {
			return i, countIn(b, i)
		}
	case tableFair:
		if i, _, t := pickFairSteady(b, g, false); i >= 0 {
			return i, countIn(b, i) | t // t holds the pick's clock reading
		}
	}
	return noAnswer, 0
}

// entry is the backend index at position at of the group's table, or
// noAnswer for an entry of -1.
func entry(g *group, at uint64) int {
	if i := g.look[at]; i >= 0 {
		return int(i)
	}
	return noAnswer
}

// scheduleNext is the schedule's next entry while the group is steady in
// the schedule's mode, and noAnswer otherwise: the table strategies' read,
// and least_conn's while nothing is in flight; small enough for the
// compiler to inline.
func scheduleNext(g *group) int {
	if g.gate.Load() == 1 && g.watch.Load() == 0 {
		return int(g.look[(g.cur.n.Add(1)-1)%g.cur.size])
	}
	return noAnswer
}

// underCap reports whether backend i of a bounded group is below its cap,
// as visit compares it.
func underCap(b *Balancer, g *group, i int) bool {
	m := b.members[i]
	return float64(m.state.inflight.Load()) < boundedShare(g, b.inflight.Load())*float64(m.weight)
}

// setTable gives the group a table of kind over look. A group whose members
// have max_conns gets none (see above).
func (g *group) setTable(kind int, look []int32) {
	if g.capped || len(look) == 0 {
		return
	}
	g.table, g.look, g.lookLen = kind, look, uint64(len(look))
}

// setSchedule gives the group the table strategies' table over their
// canonical schedule (member positions) and the schedule's cursor: look
// holds the schedule's backend indices, the same slice when positions are
// indices. (A schedule holds no member that is down.)
func (g *group) setSchedule(table []int32, cur *cursor) {
	if g.capped {
		return
	}
	look := table
	for _, p := range table {
		if g.members[p].index != int(p) {
			look = lookIndices(g, table)
			break
		}
	}
	g.table, g.look, g.lookLen, g.cur = tableSchedule, look, uint64(len(look)), cur
}

// lookIndices returns t with each member position replaced by the member's
// backend index, and by -1 for a member that is down.
func lookIndices(g *group, t []int32) []int32 {
	look := make([]int32, len(t))
	for k, p := range t {
		if m := g.members[p]; m.down {
			look[k] = -1
		} else {
			look[k] = int32(m.index)
		}
	}
	return look
}
