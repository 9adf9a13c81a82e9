package sim

import (
	"math/rand/v2"
	"time"
)

// oracle is the limit: it knows every server's queue, the service in
// progress and the server's current speed and error rate, and sends each
// request where its expected latency is lowest (join the shortest expected
// delay), ties broken at random. No balancer can know this much; its row
// shows how far a balancer is from what is possible.
type oracle struct {
	delay func(int) time.Duration
	n     int
	r     *rand.Rand
}

// Oracle is the shortest-expected-delay oracle.
func Oracle() Contender {
	return Contender{Name: "oracle", Kind: KindOracle,
		Note: "knows every queue: join the shortest expected delay",
		New: func(env Env) (Policy, error) {
			return &oracle{delay: env.Delay, n: len(env.Servers), r: env.Rand}, nil
		}}
}

func (o *oracle) Pick(string) int {
	best, ties := -1, 0
	var least time.Duration
	for i := 0; i < o.n; i++ {
		d := o.delay(i)
		switch {
		case best < 0 || d < least:
			best, least, ties = i, d, 1
		case d == least:
			ties++
			if o.r.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}

func (o *oracle) Start(int)                     {}
func (o *oracle) Done(int, time.Duration, bool) {}
