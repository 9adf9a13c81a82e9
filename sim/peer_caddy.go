package sim

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// caddyLeastConn models Caddy 2.11's least_conn, after
// modules/caddyhttp/reverseproxy/selectionpolicies.go (LeastConnSelection.Select):
// the fewest requests in flight wins, weights are not read, and ties are
// broken uniformly by reservoir sampling over the pool. Caddy counts no
// error answer against an upstream unless passive health checks are set up.
type caddyLeastConn struct {
	inflight []int
	r        *rand.Rand
}

// CaddyLeastConn is the model of Caddy's least_conn.
func CaddyLeastConn() Contender {
	return Contender{Name: "Caddy least_conn", Kind: KindPeer,
		Note: "caddyserver/caddy modules/caddyhttp/reverseproxy/selectionpolicies.go: LeastConnSelection.Select",
		New: func(env Env) (Policy, error) {
			return &caddyLeastConn{inflight: make([]int, len(env.Servers)), r: env.Rand}, nil
		}}
}

func (c *caddyLeastConn) Pick(string) int {
	best, count, least := -1, 0, -1
	for i, n := range c.inflight {
		if least == -1 || n < least {
			least, count = n, 0
		}
		if n == least {
			count++
			if count == 1 || c.r.IntN(count) == 0 {
				best = i
			}
		}
	}
	return best
}
func (c *caddyLeastConn) Start(i int)                         { c.inflight[i]++ }
func (c *caddyLeastConn) Done(i int, _ time.Duration, _ bool) { c.inflight[i]-- }

// caddyRandomChoose models Caddy 2.11's random_choose N, after
// selectionpolicies.go (RandomChoiceSelection.Select, leastRequests): a
// reservoir sample (Algorithm R) of N distinct upstreams, then the first
// of them with no request in flight, else the fewest in flight with ties
// broken at random. Weights are not read.
type caddyRandomChoose struct {
	caddyLeastConn
	k       int
	choices []int
	best    []int
}

// CaddyRandomChoose is the model of Caddy's random_choose k.
func CaddyRandomChoose(k int) Contender {
	return Contender{Name: "Caddy random_choose " + strconv.Itoa(k), Kind: KindPeer,
		Note: "caddyserver/caddy modules/caddyhttp/reverseproxy/selectionpolicies.go: RandomChoiceSelection.Select, leastRequests",
		New: func(env Env) (Policy, error) {
			return &caddyRandomChoose{caddyLeastConn: caddyLeastConn{inflight: make([]int, len(env.Servers)), r: env.Rand}, k: k}, nil
		}}
}

func (c *caddyRandomChoose) Pick(string) int {
	k := c.k
	if k > len(c.inflight) {
		k = len(c.inflight)
	}
	c.choices = c.choices[:0]
	for i := range c.inflight {
		if len(c.choices) < k {
			c.choices = append(c.choices, i)
			continue
		}
		if j := c.r.IntN(i + 1); j < k {
			c.choices[j] = i
		}
	}
	c.best = c.best[:0]
	least := -1
	for _, i := range c.choices {
		n := c.inflight[i]
		if n == 0 {
			return i
		}
		if least == -1 || n < least {
			least, c.best = n, append(c.best[:0], i)
		} else if n == least {
			c.best = append(c.best, i)
		}
	}
	if len(c.best) == 1 {
		return c.best[0]
	}
	return c.best[c.r.IntN(len(c.best))]
}
