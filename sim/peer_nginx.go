package sim

import (
	"time"

	"github.com/lbpack/lbpack/core"
)

// nginxLeastConn is nginx's least_conn (ngx_http_upstream_least_conn_module.c,
// ngx_http_upstream_get_least_conn_peer): the fewest connections per weight,
// ties by smooth weighted round robin. lbpack's least_conn is that function,
// pick for pick (the conformance suite checks it against nginx), so the model
// runs core's least_conn. What differs is what nginx counts as a failure: a
// 500 is not one unless proxy_next_upstream lists http_500, and by default it
// does not, so error answers reach the model as successes.
type nginxLeastConn struct{ *lbpack }

// NginxLeastConn is the model of nginx's least_conn with its defaults.
func NginxLeastConn() Contender {
	return Contender{Name: "nginx least_conn", Kind: KindPeer,
		Note: "nginx src/http/modules/ngx_http_upstream_least_conn_module.c: ngx_http_upstream_get_least_conn_peer (run as core's least_conn, which matches it)",
		New: func(env Env) (Policy, error) {
			cfg := coreConfig(env, core.LeastConn)
			cfg.TwoChoices = false
			b, err := core.New(cfg)
			if err != nil {
				return nil, err
			}
			return nginxLeastConn{newLbpack(b)}, nil
		}}
}

func (n nginxLeastConn) Done(i int, latency time.Duration, _ bool) { n.lbpack.Done(i, latency, false) }

// nginxLeastTime models nginx's least_time (open source since 1.31.0), after
// nginx 1.31.4's src/http/modules/ngx_http_upstream_least_time_module.c
// (ngx_http_upstream_get_least_time_peer, ngx_http_upstream_least_time_eta,
// ngx_http_upstream_least_time_notify, ..._inflight_done,
// ngx_http_upstream_free_least_time_peer) and the averaging macro
// ngx_http_upstream_response_time_avg of ngx_http_upstream_round_robin.h.
//
// Each server keeps an average time in whole milliseconds, nginx's clock's:
// the first answer sets it, each later one v makes it
// (ngx_msec_t) (0.5 + v*0.05 + avg*0.95) in doubles (an average of 0 is
// replaced by the next v). Its estimate (eta) is that time, halved once per
// fail_timeout+1 seconds since the server was last "checked" once more than
// fail_timeout has passed (checked is renewed when a pick finds it older
// than fail_timeout), then capped at 5000 or raised to the next multiple of
// 20 (0 to 19 give 20, 20 gives 40), times 1 + its connections. The lowest
// eta per weight wins (eta*w(best) < best_eta*w(peer)); ties go to nginx's
// smooth weighted round robin among the tied servers, counted from the
// first of them, and compared as nginx compares them: against the first
// one's eta but the current winner's weight.
//
// With inflight, a server with requests in flight also averages, at every
// pick that looks at it, the mean age of those requests into an in-flight
// time, and its estimate is the larger of that and its average; the
// average of an answer is taken at its header.
//
// The simulated answer's header and last byte arrive together, so header
// and last_byte are one model here. An error answer is timed like any
// other: a 5xx is not a failure unless proxy_next_upstream lists it, and
// by default it does not, so nothing counts toward max_fails. The model
// reads the servers' weights and fail_timeout (down, backup and max_conns
// are not modelled: no scenario sets them).
type nginxLeastTime struct {
	now      func() time.Duration
	inflight bool
	peer     []nginxTimedPeer
}

// nginxTimedPeer is the part of ngx_http_upstream_rr_peer_t least_time
// reads and writes. Times are ngx_msec_t: unsigned milliseconds.
type nginxTimedPeer struct {
	weight, effective, current int
	conns                      int
	failTimeout, checked       int64 // seconds (ngx_time)
	time                       uint64
	// In flight (inflight only): the average age of the requests in
	// flight, their summed age when reqs last changed, when that was, and
	// how many there are.
	inflightTime, inflightLast, inflightChanged, inflightReqs uint64
}

// nginxLeastTimeCap is the estimate of every server slower than it: such
// servers are equally bad, and their connections decide.
const nginxLeastTimeCap = 5000

// nginxCluster is the width in milliseconds of the bands in which servers
// count as equally fast.
const nginxCluster = 20

// NginxLeastTime is the model of nginx's `least_time header` (or
// last_byte), with inflight when inflight is set.
func NginxLeastTime(inflight bool) Contender {
	name, note := "nginx least_time", "least_time header or last_byte"
	if inflight {
		name, note = "nginx least_time inflight", "least_time header inflight (or last_byte inflight)"
	}
	return Contender{Name: name, Kind: KindPeer,
		Note: "nginx 1.31 src/http/modules/ngx_http_upstream_least_time_module.c, " + note +
			": ngx_http_upstream_get_least_time_peer, ngx_http_upstream_least_time_eta, ngx_http_upstream_free_least_time_peer",
		New: func(env Env) (Policy, error) {
			n := &nginxLeastTime{now: env.Now, inflight: inflight, peer: make([]nginxTimedPeer, len(env.Servers))}
			for i, w := range env.Weights() {
				ft := env.Servers[i].Backend.FailTimeout
				if ft == 0 {
					ft = core.DefaultFailTimeout
				}
				n.peer[i] = nginxTimedPeer{weight: w, effective: w, failTimeout: int64(ft / time.Second)}
			}
			return n, nil
		}}
}

// clock is nginx's two clocks on the simulated one: ngx_time() in seconds
// and ngx_current_msec.
func (n *nginxLeastTime) clock() (sec int64, msec uint64) {
	t := n.now()
	return epoch.Unix() + int64(t/time.Second), uint64(t / time.Millisecond)
}

// nginxAverage is ngx_http_upstream_response_time_avg. The conversions
// round each product as C does: Go may otherwise fuse a multiply and add.
func nginxAverage(avg, v uint64) uint64 {
	if avg == 0 {
		return v
	}
	return uint64(0.5 + (float64(float64(v)*0.05) + float64(float64(avg)*0.95)))
}

// eta is ngx_http_upstream_least_time_eta at second now.
func (n *nginxLeastTime) eta(p *nginxTimedPeer, now int64) uint64 {
	rt := p.time
	if since := now - p.checked; since > p.failTimeout {
		// Shifting by 64 or more is undefined in C; every bit is gone by then.
		if k := since / (p.failTimeout + 1); k < 64 {
			rt >>= uint(k)
		} else {
			rt = 0
		}
	}
	if p.inflightReqs > 0 && p.inflightTime > rt {
		rt = p.inflightTime
	}
	if rt > nginxLeastTimeCap {
		rt = nginxLeastTimeCap
	} else {
		rt += nginxCluster - rt%nginxCluster
	}
	return rt * uint64(1+p.conns)
}

func (n *nginxLeastTime) Pick(string) int {
	if len(n.peer) == 1 {
		return 0 // nginx hands a single server to round robin
	}
	now, msec := n.clock()
	best, many := -1, false
	var bestEta uint64
	for i := range n.peer {
		p := &n.peer[i]
		if p.inflightReqs > 0 {
			p.inflightTime = nginxAverage(p.inflightTime, p.inflightLast/p.inflightReqs+(msec-p.inflightChanged))
		}
		eta := n.eta(p, now)
		switch {
		case best < 0 || eta*uint64(n.peer[best].weight) < bestEta*uint64(p.weight):
			best, bestEta, many = i, eta, false
		case eta*uint64(n.peer[best].weight) == bestEta*uint64(p.weight):
			many = true
		}
	}
	if !many {
		return best
	}
	total, first := 0, best
	for i := first; i < len(n.peer); i++ {
		p := &n.peer[i]
		if n.eta(p, now)*uint64(n.peer[best].weight) != bestEta*uint64(p.weight) {
			continue
		}
		p.current += p.effective
		total += p.effective
		if p.effective < p.weight {
			p.effective++
		}
		if p.current > n.peer[best].current {
			best = i
		}
	}
	n.peer[best].current -= total
	return best
}

// Start is what the end of ngx_http_upstream_get_least_time_peer does to
// the chosen server.
func (n *nginxLeastTime) Start(i int) {
	p := &n.peer[i]
	now, msec := n.clock()
	if n.inflight {
		if p.inflightReqs > 0 {
			p.inflightLast += (msec - p.inflightChanged) * p.inflightReqs
		}
		p.inflightChanged = msec
		p.inflightReqs++
	}
	if now-p.checked > p.failTimeout {
		p.checked = now
	}
	p.conns++
}

// Done takes an answer's time as nginx measures it, between two readings of
// its millisecond clock, and averages it in whether it is an error or not.
func (n *nginxLeastTime) Done(i int, latency time.Duration, _ bool) {
	p := &n.peer[i]
	_, msec := n.clock()
	last := msec - uint64((n.now()-latency)/time.Millisecond)
	if n.inflight {
		if p.inflightReqs == 1 {
			p.inflightLast = 0
		} else {
			p.inflightLast += (msec-p.inflightChanged)*p.inflightReqs - last
			p.inflightChanged = msec
		}
		p.inflightReqs--
	}
	p.time = nginxAverage(p.time, last)
	p.conns--
}
