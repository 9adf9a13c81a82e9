package sim

import "time"

// haproxyLeastConn models HAProxy's leastconn, after src/lb_fwlc.c
// (fwlc_queue_srv, fwlc_srv_reposition, fwlc_get_next_server): each server
// sits in a tree keyed by (inflight+1) * SRV_EWGHT_MAX / eweight, or 0 while
// it has nothing in flight, and is re-queued at the end of its key's list
// whenever it takes or drops a request; the pick is the first server of the
// smallest key. So idle servers go first, then the fewest in flight per
// weight, and among equals the one that has waited longest: the order of
// HAProxy up to 3.1 (Debian's is 2.6), whose tree keeps equal keys in
// insertion order; 3.2 spreads the servers of one key over several lists
// and starts at a random one, which breaks such ties at random. HAProxy
// does not look at status codes unless "observe layer7" is set.
type haproxyLeastConn struct {
	eweight  []int
	inflight []int
	queued   []uint64 // when each server was last re-queued
	clock    uint64
}

// SRV_EWGHT_MAX and BE_WEIGHT_SCALE, from HAProxy's include/haproxy/server-t.h
// and backend-t.h: a weight w is held as w*16, keys scale by 16*256.
const (
	haproxyWeightScale = 16
	haproxyEweightMax  = 256 * haproxyWeightScale
)

// HAProxyLeastConn is the model of HAProxy's leastconn.
func HAProxyLeastConn() Contender {
	return Contender{Name: "HAProxy leastconn", Kind: KindPeer,
		Note: "haproxy/haproxy src/lb_fwlc.c: fwlc_queue_srv, fwlc_srv_reposition, fwlc_get_next_server",
		New: func(env Env) (Policy, error) {
			w := env.Weights()
			h := &haproxyLeastConn{eweight: make([]int, len(w)), inflight: make([]int, len(w)), queued: make([]uint64, len(w))}
			for i := range w {
				h.eweight[i] = w[i] * haproxyWeightScale
				h.requeue(i) // fwlc_init_server_tree queues them in order
			}
			return h, nil
		}}
}

func (h *haproxyLeastConn) key(i int) int {
	if h.inflight[i] == 0 {
		return 0
	}
	return (h.inflight[i] + 1) * haproxyEweightMax / h.eweight[i]
}

func (h *haproxyLeastConn) requeue(i int) {
	h.clock++
	h.queued[i] = h.clock
}

func (h *haproxyLeastConn) Pick(string) int {
	best := -1
	for i := range h.inflight {
		if best < 0 || h.key(i) < h.key(best) || (h.key(i) == h.key(best) && h.queued[i] < h.queued[best]) {
			best = i
		}
	}
	return best
}

func (h *haproxyLeastConn) Start(i int) { h.inflight[i]++; h.requeue(i) }

func (h *haproxyLeastConn) Done(i int, _ time.Duration, _ bool) { h.inflight[i]--; h.requeue(i) }
