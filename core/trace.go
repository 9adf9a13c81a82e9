package core

import "fmt"

// TraceStep is one pick of a traced smooth_wrr or gcd_wrr balancer.
//
// Chosen is the picked backend's index in Config.Backends. For smooth_wrr,
// Before and After hold every backend's nginx current weight before and after
// the pick, indexed like Config.Backends; backends outside the traced group
// (down ones, and the backups while a primary is up, or the primaries once
// all of them are down) show 0. For gcd_wrr they hold one value: the LVS
// scheduler's current weight cw.
type TraceStep struct {
	Chosen        int
	Before, After []int
}

// Trace returns the first n picks that a balancer built from cfg makes when
// every backend is available, with the scheduler's state around each pick:
// the step table people learn smooth_wrr and gcd_wrr from. It validates cfg as
// New does and accepts only those two strategies. With Config.Stagger the
// trace starts where the balancer would, at the point drawn from cfg.Rand.
func Trace(cfg Config, n int) ([]TraceStep, error) {
	if n < 0 {
		return nil, fmt.Errorf("lbpack: trace n %d: must not be negative", n)
	}
	b, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Strategy != SmoothWRR && cfg.Strategy != GCDWRR {
		return nil, fmt.Errorf("lbpack: strategy %q: trace shows only %s and %s", cfg.Strategy, SmoothWRR, GCDWRR)
	}
	// The group a pick would come from: the primaries unless all are down.
	g := b.primary
	if len(upPositions(g)) == 0 {
		g = b.backup
	}
	if g == nil || len(upPositions(g)) == 0 {
		return nil, ErrNoBackend
	}
	if s, ok := g.strategy.(*gcdWRR); ok {
		start := 0
		if s.table != nil {
			start = s.cur.start
		}
		return traceLVS(g, start, n), nil
	}
	start := 0
	if s := g.strategy.(*smoothWRR); s.table != nil {
		start = s.cur.start
	}
	return traceSmooth(b, g, start, n), nil
}

// traceSmooth follows the generator that fills smooth_wrr's table and derives
// nginx's current weights from the picks: t picks into a period, member i's
// current weight is t*w_i - W*c_i, c_i being its picks in that period.
func traceSmooth(b *Balancer, g *group, start, n int) []TraceStep {
	gen := newSmoothGen(g)
	total := 0
	for _, m := range g.members {
		if !m.down {
			total += m.weight
		}
	}
	picks := make([]int, len(g.members))
	t := 0
	pick := func() int {
		pos := gen.next()
		picks[pos]++
		t++
		if int64(t) == gen.period {
			t = 0
			for i := range picks {
				picks[i] = 0
			}
		}
		return pos
	}
	weights := func() []int {
		cw := make([]int, len(b.members))
		for i, m := range g.members {
			if !m.down {
				cw[m.index] = t*m.weight - total*picks[i]
			}
		}
		return cw
	}
	for i := 0; i < start; i++ {
		pick()
	}
	steps := make([]TraceStep, n)
	for i := range steps {
		steps[i].Before = weights()
		steps[i].Chosen = g.members[pick()].index
		steps[i].After = weights()
	}
	return steps
}

// traceLVS follows the generator that fills gcd_wrr's table.
func traceLVS(g *group, start, n int) []TraceStep {
	gen := newLVSGen(g)
	for i := 0; i < start; i++ {
		gen.next()
	}
	steps := make([]TraceStep, n)
	for i := range steps {
		before := gen.cw
		pos := gen.next()
		steps[i] = TraceStep{Chosen: g.members[pos].index, Before: []int{int(before)}, After: []int{int(gen.cw)}}
	}
	return steps
}
