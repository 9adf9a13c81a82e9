package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

// env is an Env over n servers of the given weights (1 if none), with a
// clock the test moves.
func env(clock *time.Duration, weights ...int) Env {
	s := servers(len(weights), 1, nil)
	for i, w := range weights {
		s[i].Backend.Weight = w
	}
	return Env{Servers: s, Now: func() time.Duration { return *clock }, Rand: rand.New(rand.NewPCG(3, 3))}
}

func build(t *testing.T, c Contender, e Env) Policy {
	t.Helper()
	p, err := c.New(e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// picks counts n picks, starting none of them.
func picks(p Policy, n int) map[int]int {
	seen := map[int]int{}
	for k := 0; k < n; k++ {
		seen[p.Pick("")]++
	}
	return seen
}

// Traefik's leasttime: the lowest mean x (1 + in flight) / weight; means are
// whole milliseconds of the last 100 samples; ties by earliest deadline.
func TestTraefikLeastTimeRule(t *testing.T) {
	var now time.Duration
	p := build(t, TraefikLeastTime(), env(&now, 1, 1))
	// No samples: both score 0; deadlines start at 1 and 2, and the first
	// of equal deadlines wins.
	var got []int
	for k := 0; k < 7; k++ {
		got = append(got, p.Pick(""))
	}
	if fmt.Sprint(got) != "[0 0 1 0 1 0 1]" {
		t.Fatalf("cold ties: %v, want [0 0 1 0 1 0 1]", got)
	}
	p.Start(0)
	p.Done(0, 900*time.Microsecond, false) // counts as 0 ms
	p.Start(1)
	p.Done(1, 5*time.Millisecond, false)
	if seen := picks(p, 10); seen[0] != 10 {
		t.Fatalf("picks %v: backend 0 scores 0 and must win every time", seen)
	}
	// 0 ms times anything is 0: in flight does not matter while the mean is 0.
	p.Start(0)
	p.Start(0)
	if seen := picks(p, 10); seen[0] != 10 {
		t.Fatalf("picks %v: backend 0 still scores 0", seen)
	}
	// An error answer is timed like any other: a fast 5xx makes a server win.
	q := build(t, TraefikLeastTime(), env(&now, 1, 1))
	q.Start(0)
	q.Done(0, 10*time.Millisecond, false)
	q.Start(1)
	q.Done(1, 1*time.Millisecond, true)
	if seen := picks(q, 10); seen[1] != 10 {
		t.Fatalf("picks %v: the fast failing server scores 1 against 10", seen)
	}
	// The mean is of the last 100 samples.
	for k := 0; k < 100; k++ {
		q.Start(1)
		q.Done(1, 20*time.Millisecond, false)
	}
	if seen := picks(q, 10); seen[0] != 10 {
		t.Fatalf("picks %v: 100 samples of 20 ms replace the 1 ms one", seen)
	}
}

// Caddy's least_conn: ties broken at random among the least loaded only.
func TestCaddyLeastConnRule(t *testing.T) {
	var now time.Duration
	p := build(t, CaddyLeastConn(), env(&now, 1, 1, 1, 1))
	p.Start(0)
	p.Start(2)
	seen := picks(p, 400)
	if seen[0] != 0 || seen[2] != 0 || seen[1] < 150 || seen[3] < 150 {
		t.Fatalf("picks %v: want only 1 and 3, about evenly", seen)
	}
}

// Caddy's random_choose 2 over four upstreams with 1, 1, 0 and 4 requests
// in flight: the idle one wins whenever it is drawn (3 of the 6 pairs); the
// busiest never does; 0 and 1 share the rest.
func TestCaddyRandomChooseRule(t *testing.T) {
	var now time.Duration
	p := build(t, CaddyRandomChoose(2), env(&now, 1, 1, 1, 1))
	for _, i := range []int{0, 1, 3, 3, 3, 3} {
		p.Start(i)
	}
	const n = 12000
	seen := picks(p, n)
	// Binomial standard deviations: 55 for 1/2, 47 for 1/4; allow 4.
	if seen[3] != 0 || math.Abs(float64(seen[2])-n/2) > 220 || math.Abs(float64(seen[0])-n/4) > 190 || math.Abs(float64(seen[1])-n/4) > 190 {
		t.Fatalf("picks %v of %d: want about 1/4, 1/4, 1/2, 0", seen, n)
	}
}

// HAProxy's leastconn: idle servers key 0; otherwise (in flight + 1) per
// weight; equal keys go to the server re-queued first.
func TestHAProxyLeastConnRule(t *testing.T) {
	var now time.Duration
	p := build(t, HAProxyLeastConn(), env(&now, 1, 1, 1))
	if got := p.Pick(""); got != 0 {
		t.Fatalf("all idle: picked %d, want 0 (queued first)", got)
	}
	for _, i := range []int{0, 0, 1, 2} {
		p.Start(i)
	}
	if got := p.Pick(""); got != 1 {
		t.Fatalf("in flight 2, 1, 1: picked %d, want 1 (re-queued before 2)", got)
	}
	p.Done(2, 0, false) // 2 is idle now: key 0
	if got := p.Pick(""); got != 2 {
		t.Fatalf("in flight 2, 1, 0: picked %d, want 2", got)
	}
	// Weights 2 and 1 with 3 and 1 in flight: keys 4/2 and 2/1 tie; the
	// server re-queued first wins.
	w := build(t, HAProxyLeastConn(), env(&now, 2, 1))
	for _, i := range []int{1, 0, 0, 0} {
		w.Start(i)
	}
	if got := w.Pick(""); got != 1 {
		t.Fatalf("weighted tie: picked %d, want 1", got)
	}
	w.Start(0) // 0 re-queued last again, key 5*4096/32 = 640 > 512
	w.Done(0, 0, false)
	w.Start(1)
	w.Done(1, 0, false) // both re-queued; 0 first now
	if got := w.Pick(""); got != 0 {
		t.Fatalf("weighted tie after re-queueing: picked %d, want 0", got)
	}
}

// Envoy's LEAST_REQUEST: with equal weights, two draws with replacement and
// the fewer active requests (the first drawn on a tie); with unequal
// weights, an EDF schedule of weight / (active + 1).
func TestEnvoyLeastRequestRule(t *testing.T) {
	var now time.Duration
	p := build(t, EnvoyLeastRequest(), env(&now, 1, 1))
	for k := 0; k < 5; k++ {
		p.Start(0)
	}
	const n = 8000
	// The busy host wins only when both draws are it: 1/4 (sd 39; allow 4).
	if seen := picks(p, n); math.Abs(float64(seen[0])-n/4) > 160 {
		t.Fatalf("picks %v: want host 0 in a quarter", seen)
	}
	w := build(t, EnvoyLeastRequest(), env(&now, 2, 1))
	var got []int
	for k := 0; k < 9; k++ {
		got = append(got, w.Pick(""))
	}
	// Deadlines 0.5 and 1; each pick moves the picked host 1/weight past
	// the pick's deadline, ties to the earlier insertion.
	if fmt.Sprint(got) != "[0 1 0 0 1 0 0 1 0]" {
		t.Fatalf("EDF with weights 2, 1: %v", got)
	}
	// Active requests lower the weight the host is re-added with: host 0
	// with 3 active, picked at 0.5, is re-added at weight 2/4, deadline
	// 2.5; host 1 goes at 1 and again at 2 first.
	e := build(t, EnvoyLeastRequest(), env(&now, 2, 1))
	for k := 0; k < 3; k++ {
		e.Start(0)
	}
	got = got[:0]
	for k := 0; k < 4; k++ {
		got = append(got, e.Pick(""))
	}
	if fmt.Sprint(got) != "[0 1 1 0]" {
		t.Fatalf("EDF with host 0 busy: %v", got)
	}
}

// Finagle's peak EWMA: a sample above the cost replaces it, a lower one
// blends in by exp(-elapsed/10s), and every read decays it; a node with
// requests pending and no history is penalised; p2c takes the lower load
// of two distinct nodes; five failures in a row mark a node dead for 5 s.
func TestFinaglePeakEWMARule(t *testing.T) {
	var now time.Duration
	p := build(t, FinaglePeakEWMA(), env(&now, 1, 1)).(*finaglePeakEWMA)
	p.Start(0)
	if l := p.load(0); l != finaglePenalty+1 {
		t.Fatalf("pending, no history: load %v, want the penalty", l)
	}
	now = 10 * time.Millisecond
	p.Done(0, 10*time.Millisecond, false)
	if c := p.node[0].cost; c != 10e6 {
		t.Fatalf("peak: cost %v, want 10ms", c)
	}
	now += 10 * time.Second
	p.Start(0)
	// One decay time later: the read decays the cost to 10ms/e; load x 2.
	if l, want := p.load(0), 2*10e6/math.E; math.Abs(l/want-1) > 1e-12 {
		t.Fatalf("decayed load %v, want %v", l, want)
	}
	p.Done(0, 0, false)
	// Two nodes, loads 0 and positive: the idle, cheap one wins every pick.
	if seen := picks(p, 20); seen[1] != 20 {
		t.Fatalf("picks %v: node 1 (cost 0, idle) must win", seen)
	}
	// Five failures in a row: node 1 is dead for 5 s and loses every pick.
	for k := 0; k < 5; k++ {
		p.Start(1)
		p.Done(1, 0, true)
	}
	if seen := picks(p, 20); seen[0] != 20 {
		t.Fatalf("picks %v: node 1 is dead", seen)
	}
	now += 5 * time.Second
	if seen := picks(p, 20); seen[1] != 20 {
		t.Fatalf("picks %v: node 1's backoff is over", seen)
	}
}

// nginx's least_conn is core's, and a 5xx is not a failure by default: a
// backend with max_fails 1 stays in after error answers.
func TestNginxLeastConnRule(t *testing.T) {
	var now time.Duration
	e := env(&now, 1, 1)
	for i := range e.Servers {
		e.Servers[i].Backend.MaxFails = 1
	}
	p := build(t, NginxLeastConn(), e)
	for k := 0; k < 10; k++ {
		i := p.Pick("")
		p.Start(i)
		p.Done(i, time.Millisecond, i == 1)
	}
	if seen := picks(p, 10); seen[1] != 5 {
		t.Fatalf("picks %v: backend 1's 5xx answers must not take it out", seen)
	}
	l := build(t, Lbpack("least_conn", core.LeastConn), e)
	l.Start(1)
	l.Done(1, time.Millisecond, true)
	if seen := picks(l, 10); seen[1] != 0 {
		t.Fatalf("picks %v: lbpack is told of the failure, and max_fails 1 takes backend 1 out", seen)
	}
}

// The oracle sends each request where the expected delay is lowest, ties
// at random.
func TestOracleRule(t *testing.T) {
	var now time.Duration
	e := env(&now, 1, 1, 1)
	delays := []time.Duration{5, 3, 3}
	e.Delay = func(i int) time.Duration { return delays[i] }
	p := build(t, Oracle(), e)
	seen := picks(p, 400)
	if seen[0] != 0 || seen[1] < 150 || seen[2] < 150 {
		t.Fatalf("picks %v: want 1 and 2 only, about evenly", seen)
	}
}

// The oracle's expected delay: queued work ahead over the workers, then a
// mean service; a server failing everything is worth nothing.
func TestOracleDelay(t *testing.T) {
	s := oneServer(2, constDist(10*ms))
	w := &world{servers: []*server{{Server: s[0]}}, meanCost: 1, now: 0}
	if d := w.delay(0); d != 10*ms {
		t.Fatalf("idle: %v, want 10ms", d)
	}
	// Both workers busy until 4 and 8 ms, one request queued: it takes the
	// first free worker (4 -> 14 ms); the new request starts at 8 ms.
	w.servers[0].serving = []*request{{ends: int64(4 * ms)}, {ends: int64(8 * ms)}}
	w.servers[0].queue = []*request{{cost: 1}}
	if d := w.delay(0); d != 18*ms {
		t.Fatalf("busy: %v, want 18ms", d)
	}
	w.servers[0].FailRate = 1
	if d := w.delay(0); d != time.Duration(math.MaxInt64) {
		t.Fatalf("failing: %v, want the maximum", d)
	}
}
