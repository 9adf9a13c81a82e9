package sim

import (
	"fmt"
	"testing"
	"time"
)

// ngx_http_upstream_response_time_avg: (ngx_msec_t) (0.5 + v*0.05 +
// avg*0.95), the first value taken as it is; each row worked by hand.
func TestNginxAverage(t *testing.T) {
	for _, c := range []struct{ avg, v, want uint64 }{
		{0, 37, 37},     // no average yet: v
		{10, 20, 11},    // 0.5 + 1 + 9.5 = 11
		{11, 30, 12},    // 0.5 + 1.5 + 10.45 = 12.45
		{12, 40, 13},    // 0.5 + 2 + 11.4 = 13.9
		{13, 0, 12},     // 0.5 + 0 + 12.35 = 12.85
		{11, 100, 15},   // 0.5 + 5 + 10.45 = 15.95
		{20, 10, 20},    // 0.5 + 0.5 + 19 = 20.0 exactly: 10 ms less moves nothing
		{20, 9, 19},     // 0.5 + 0.45 + 19 = 19.95
		{30, 40, 31},    // 0.5 + 2 + 28.5 = 31.0
		{11, 20, 11},    // 0.5 + 1 + 10.45 = 11.95
		{11, 21, 12},    // 0.5 + 1.05 + 10.45 = 12.0
		{10, 0, 10},     // 0.5 + 9.5 = 10.0
		{11, 0, 10},     // 0.5 + 10.45 = 10.95
		{1, 0, 1},       // 0.5 + 0.95 = 1.45: an average never falls from 1 to 0
		{18, 1000, 67},  // 0.5 + 50 + 17.1 = 67.6
		{5000, 0, 4750}, // 0.5 + 4750 = 4750.5
	} {
		if got := nginxAverage(c.avg, c.v); got != c.want {
			t.Errorf("avg %d, v %d: %d, want %d", c.avg, c.v, got, c.want)
		}
	}
}

// ltModel builds the least_time model over servers of the given weights,
// on a clock the test moves.
func ltModel(t *testing.T, inflight bool, clock *time.Duration, weights ...int) *nginxLeastTime {
	t.Helper()
	return build(t, NginxLeastTime(inflight), env(clock, weights...)).(*nginxLeastTime)
}

// answer sends one request to server i at the current time and answers it
// after d, moving the clock.
func answer(m *nginxLeastTime, clock *time.Duration, i int, d time.Duration) {
	m.Start(i)
	*clock += d
	m.Done(i, d, false)
}

// Answers average as nginx averages them, in milliseconds of its clock:
// the difference of two whole-millisecond readings, errors included.
func TestNginxLeastTimeMeasures(t *testing.T) {
	var now time.Duration
	m := ltModel(t, false, &now, 1, 1)
	var got []uint64
	for _, d := range []time.Duration{10, 20, 30, 40, 0, 0, 100, 100, 5, 1000} {
		answer(m, &now, 0, d*ms)
		got = append(got, m.peer[0].time)
	}
	// 10, then 0.5 + 1 + 9.5, 0.5 + 1.5 + 10.45, 0.5 + 2 + 11.4, 0.5 + 12.35,
	// 0.5 + 11.4, 0.5 + 5 + 10.45, 0.5 + 5 + 14.25, 0.5 + 0.25 + 18.05,
	// 0.5 + 50 + 17.1, each rounded down.
	if fmt.Sprint(got) != "[10 11 12 13 12 11 15 19 18 67]" {
		t.Errorf("averages %v, want [10 11 12 13 12 11 15 19 18 67]", got)
	}
	// nginx's clock ticks in whole milliseconds: 0.9 ms from 0.5 ms to 1.4 ms
	// reads 1 - 0 = 1; from 1.05 ms to 1.95 ms it reads 0.
	for _, c := range []struct {
		from, d time.Duration
		want    uint64
	}{{500 * time.Microsecond, 900 * time.Microsecond, 1}, {1050 * time.Microsecond, 900 * time.Microsecond, 0}} {
		now = c.from
		n := ltModel(t, false, &now, 1, 1)
		answer(n, &now, 1, c.d)
		if n.peer[1].time != c.want {
			t.Errorf("%v from %v: time %d, want %d", c.d, c.from, n.peer[1].time, c.want)
		}
	}
	// A 5xx is averaged like a success: proxy_next_upstream's default does not
	// list it, so it is no failure.
	now = 0
	f := ltModel(t, false, &now, 1, 1)
	f.Start(1)
	now += 3 * ms
	f.Done(1, 3*ms, true)
	if f.peer[1].time != 3 {
		t.Errorf("error answer: time %d, want 3", f.peer[1].time)
	}
}

// ngx_http_upstream_least_time_eta: the average, halved per fail_timeout+1
// seconds unchecked, the in-flight time if larger, capped at 5000 or raised
// to the next multiple of 20, times 1 + connections.
func TestNginxLeastTimeEta(t *testing.T) {
	var now time.Duration
	m := ltModel(t, false, &now, 1)
	base, _ := m.clock()
	for _, c := range []struct {
		name    string
		p       nginxTimedPeer
		elapsed int64 // seconds since checked
		want    uint64
	}{
		{"no answer yet", nginxTimedPeer{}, 0, 20},
		{"19 is the first band", nginxTimedPeer{time: 19}, 0, 20},
		{"20 starts the second", nginxTimedPeer{time: 20}, 0, 40},
		{"39", nginxTimedPeer{time: 39}, 0, 40},
		{"4999", nginxTimedPeer{time: 4999}, 0, 5000},
		{"5000 is not over the cap: raised to 5020", nginxTimedPeer{time: 5000}, 0, 5020},
		{"5001 is capped", nginxTimedPeer{time: 5001}, 0, 5000},
		{"cap times connections", nginxTimedPeer{time: 90000, conns: 2}, 0, 15000},
		{"connections", nginxTimedPeer{time: 45, conns: 3}, 0, 240},
		{"10 s unchecked: not halved", nginxTimedPeer{time: 100}, 10, 120},
		{"11 s: halved", nginxTimedPeer{time: 100}, 11, 60},
		{"21 s: halved once", nginxTimedPeer{time: 100}, 21, 60},
		{"22 s: halved twice", nginxTimedPeer{time: 100}, 22, 40},
		{"33 s: three times", nginxTimedPeer{time: 100}, 33, 20},
		{"fail_timeout 30: 31 s halves", nginxTimedPeer{time: 100, failTimeout: 30}, 31, 60},
		{"fail_timeout 30: 61 s once", nginxTimedPeer{time: 100, failTimeout: 30}, 61, 60},
		{"far past: all bits gone", nginxTimedPeer{time: 100}, 11 * 70, 20},
		{"in-flight time larger", nginxTimedPeer{time: 10, inflightTime: 150, inflightReqs: 1, conns: 1}, 0, 320},
		{"in-flight time smaller", nginxTimedPeer{time: 70, inflightTime: 15, inflightReqs: 1, conns: 1}, 0, 160},
		{"in-flight time without requests in flight", nginxTimedPeer{time: 10, inflightTime: 150}, 0, 20},
		{"halved, then the in-flight time if larger", nginxTimedPeer{time: 100, inflightTime: 70, inflightReqs: 1}, 11, 80},
	} {
		p := c.p
		if p.failTimeout == 0 {
			p.failTimeout = 10
		}
		p.checked = base - c.elapsed
		if got := m.eta(&p, base); got != c.want {
			t.Errorf("%s: eta %d, want %d", c.name, got, c.want)
		}
	}
}

// Picks on scripted cases: the lowest eta per weight; ties by smooth
// weights among the tied, compared as nginx compares them.
func TestNginxLeastTimePicks(t *testing.T) {
	var now time.Duration
	seq := func(m *nginxLeastTime, n int) string {
		var got []int
		for k := 0; k < n; k++ {
			got = append(got, m.Pick(""))
		}
		return fmt.Sprint(got)
	}

	// Cold, equal weights: every eta is 20, smooth round robin.
	if got := seq(ltModel(t, false, &now, 1, 1, 1), 6); got != "[0 1 2 0 1 2]" {
		t.Errorf("cold: %s", got)
	}
	// Cold, weights 5, 3, 2: 20/5 beats 20/3 and 20/2, no tie.
	if got := seq(ltModel(t, false, &now, 5, 3, 2), 3); got != "[0 0 0]" {
		t.Errorf("cold weighted: %s", got)
	}
	// Connections per weight: weights 2 and 1, with 1 and 0 connections:
	// 40 * 1 == 20 * 2, a tie; smooth weights 2, 1 give 0 then 1 then 0.
	m := ltModel(t, false, &now, 2, 1)
	m.Start(0)
	if got := seq(m, 3); got != "[0 1 0]" {
		t.Errorf("weighted tie: %s", got)
	}
	// nginx compares the tied with the first one's eta but the current
	// winner's weight: with weights 1, 2, 1 and etas 20, 40, 20, server 2 is
	// skipped whenever server 1 leads the round.
	q := ltModel(t, false, &now, 1, 2, 1)
	q.peer[1].time = 20 // eta 40, once checked now
	q.peer[1].checked, _ = q.clock()
	// Rounds (current weights before; the tied added in order; winner pays 3
	// when server 2 was skipped, 4 when it counted):
	// (0,0,0): +1 -> 1; +2 -> 2 leads; 2 skipped; 1 wins: (1,-1,0).
	// (1,-1,0): 2; 1; +1 -> 1; 0 wins: (-2,1,1).
	// (-2,1,1): -1; 3 leads; skipped; 1 wins: (-1,0,1).
	// (-1,0,1): 0; 2 leads; skipped; 1 wins: (0,-1,1).
	// (0,-1,1): 1; 1; 2 leads; 2 wins: (1,1,-2).
	// (1,1,-2): 2; 3 leads; skipped; 1 wins: (2,0,-2).
	if got := seq(q, 6); got != "[1 0 1 1 2 1]" {
		t.Errorf("tie over unequal weights: %s", got)
	}

	// Latency: a 30 ms answer puts server 0 in the 20-39 band (eta 40),
	// server 1 is still at 20; with one request on 1 they tie at 40.
	now = 0
	l := ltModel(t, false, &now, 1, 1)
	answer(l, &now, 0, 30*ms)
	if got := seq(l, 2); got != "[1 1]" {
		t.Errorf("faster band: %s", got)
	}
	l.Start(1)
	if got := seq(l, 2); got != "[0 1]" {
		t.Errorf("band x connections tie: %s", got)
	}
	l.Done(1, 0, false)

	// A fast error wins: 1 ms 5xx answers against 15 ms successes put both in
	// the first band, and the failing server, free sooner, wins on
	// connections.
	f := ltModel(t, false, &now, 1, 1)
	answer(f, &now, 0, 15*ms)
	f.Start(1)
	now += ms
	f.Done(1, ms, true)
	f.Start(0)
	if got := seq(f, 3); got != "[1 1 1]" {
		t.Errorf("fast failure: %s", got)
	}
	f.Done(0, 0, false)

	// The slow server's time halves once per 11 s it is not picked, until it
	// shares the band of the fast one; a pick then renews its check.
	now = 0
	h := ltModel(t, false, &now, 1, 1)
	answer(h, &now, 0, 100*ms) // eta 120
	answer(h, &now, 1, 10*ms)  // eta 20
	for _, c := range []struct {
		at   time.Duration
		want string
	}{{10 * time.Second, "[1 1]"}, {11 * time.Second, "[1 1]"}, {22 * time.Second, "[1 1]"}, {33 * time.Second, "[0 1]"}} {
		now = c.at
		if got := seq(h, 2); got != c.want {
			t.Errorf("at %v: %s, want %s", c.at, got, c.want)
		}
	}
	// A request to 0 at 33 s checks it again: its 100 ms count in full.
	answer(h, &now, 0, 100*ms)
	if got := seq(h, 2); got != "[1 1]" {
		t.Errorf("after the pick: %s", got)
	}

	// Over the cap every server is equally bad: connections decide.
	c := ltModel(t, false, &now, 1, 1)
	sec, _ := c.clock()
	for i, v := range []uint64{6000, 90000} {
		c.peer[i].time, c.peer[i].checked = v, sec
	}
	c.Start(0)
	if got := seq(c, 2); got != "[1 1]" {
		t.Errorf("capped: %s", got)
	}
}

// With inflight, the age of the requests in flight counts: a request stuck
// for 100 ms makes a 10 ms server lose to a 50 ms one, which it beats
// without inflight; the sum of ages follows requests in and out.
func TestNginxLeastTimeInflight(t *testing.T) {
	for _, c := range []struct {
		inflight bool
		want     int
	}{{false, 0}, {true, 1}} {
		var now time.Duration
		m := ltModel(t, c.inflight, &now, 1, 1)
		answer(m, &now, 0, 10*ms) // eta 20
		answer(m, &now, 1, 50*ms) // eta 60
		m.Start(0)
		now += 100 * ms
		// inflight: in-flight time 100, eta 120 x 2 against 60.
		if got := m.Pick(""); got != c.want {
			t.Errorf("inflight %v: picked %d, want %d", c.inflight, got, c.want)
		}
	}

	var now time.Duration
	m := ltModel(t, true, &now, 1, 1)
	p := &m.peer[0]
	m.Start(0) // at 0
	now = 40 * ms
	m.Start(0) // ages so far: 40
	if p.inflightLast != 40 || p.inflightReqs != 2 || p.inflightChanged != 40 {
		t.Fatalf("after two starts: %+v", *p)
	}
	now = 100 * ms
	m.Pick("") // mean age (100 + 60) / 2 = 80: the first in-flight time
	if p.inflightTime != 80 {
		t.Fatalf("in-flight time %d, want 80", p.inflightTime)
	}
	m.Done(0, 100*ms, false) // 40 + 60*2 - 100: the other's age, 60
	if p.inflightLast != 60 || p.inflightReqs != 1 || p.inflightChanged != 100 || p.time != 100 {
		t.Fatalf("after one answer: %+v", *p)
	}
	now = 120 * ms
	m.Pick("") // age 60 + 20 = 80 again: 0.5 + 4 + 76 = 80.5
	if p.inflightTime != 80 {
		t.Fatalf("in-flight time %d, want 80", p.inflightTime)
	}
	m.Done(0, 80*ms, false) // the last: the sum starts again from 0
	if p.inflightLast != 0 || p.inflightReqs != 0 || p.time != 99 {
		t.Fatalf("after the last answer: %+v (time: 0.5 + 4 + 95 = 99.5)", *p)
	}
}
