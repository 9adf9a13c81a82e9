// Package sim is a discrete-event simulation of a load balancer in front of
// backends with given latency distributions. It drives a core.Balancer
// exactly as a proxy would (Pick, Start, Done) on a simulated clock, so the
// figures it reports are deterministic for a seed: latency percentiles and
// each backend's share of the requests.
//
// Backends answer independently of their load (each request's latency is a
// fresh sample of its backend's distribution): the simulation measures how
// well a strategy steers requests, not queueing inside a backend.
package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/lbpack/lbpack/core"
)

// defaultLatency is the latency of a backend with no distribution given.
const defaultLatency = 10 * time.Millisecond

// epoch is the simulated clock's start: a fixed, non-zero instant.
var epoch = time.Unix(1700000000, 0)

// Options describe one simulation run.
type Options struct {
	// Config is the balancer: strategy, options and backends. Its Now and
	// Rand are replaced by the simulation's clock and seeded source.
	Config core.Config

	// Latency gives backends their distributions, by address. A backend
	// without one takes Default.
	Latency map[string]Dist

	// Default is the latency of backends missing from Latency, and the base
	// of a "slow:D@P%" distribution written without one; nil means 10ms.
	Default Dist

	// Concurrency runs a closed loop: that many clients, each sending its
	// next request when the previous one ends. Rate runs an open loop
	// instead: requests arrive as a Poisson process of Rate per second.
	// Set one of them; both zero means one client.
	Concurrency int
	Rate        float64

	// Requests is how many requests to send in all; at least 1.
	Requests int

	// Seed makes the run reproducible: the balancer's random source, the
	// latency samples, the arrivals and the keys all derive from it.
	Seed uint64

	// Key returns request i's key for the hash strategies; nil means a
	// random IPv4 address (a valid key for ip_hash and url_hash alike).
	Key func(i int, r *rand.Rand) string
}

// Result is what a run measured.
type Result struct {
	// Requests completed, and requests for which the balancer had no backend.
	Requests, Rejected int
	// Latency percentiles (nearest rank), mean and maximum over the
	// completed requests.
	P50, P90, P99, Mean, Max time.Duration
	// Elapsed is the simulated time from the first request to the last answer.
	Elapsed time.Duration
	// Backends are the backends in configuration order.
	Backends []BackendResult
}

// BackendResult is one backend's part of a run.
type BackendResult struct {
	Address  string
	Requests int     // requests it answered
	Share    float64 // Requests / Result.Requests
}

// event is a request's answer, or an arrival in the open loop (backend -1).
type event struct {
	at      int64 // simulated ns
	seq     uint64
	backend int
	start   int64
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	return e[i].at < e[j].at || (e[i].at == e[j].at && e[i].seq < e[j].seq)
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any     { old := *e; x := old[len(old)-1]; *e = old[:len(old)-1]; return x }
func (e *events) add(ev event) { heap.Push(e, ev) }
func (e *events) next() event  { return heap.Pop(e).(event) }

// run is one simulation's state.
type run struct {
	opt      Options
	b        *core.Balancer
	dists    []Dist
	now      int64
	seq      uint64
	q        events
	issued   int
	waiting  int // closed-loop clients that found no backend
	lat      []int64
	answered []int
	rejected int
	keyed    bool
	rng      struct{ lat, arrive, key *rand.Rand }
}

// Run simulates opt and returns the figures.
func Run(opt Options) (Result, error) {
	if opt.Requests < 1 {
		return Result{}, fmt.Errorf("sim: requests %d: must be at least 1", opt.Requests)
	}
	if opt.Concurrency < 0 {
		return Result{}, fmt.Errorf("sim: concurrency %d: must not be negative", opt.Concurrency)
	}
	if opt.Rate < 0 || math.IsNaN(opt.Rate) || math.IsInf(opt.Rate, 0) {
		return Result{}, fmt.Errorf("sim: rate %v: must be a positive number", opt.Rate)
	}
	if opt.Concurrency > 0 && opt.Rate > 0 {
		return Result{}, errors.New("sim: concurrency and rate: set one, not both")
	}
	if opt.Concurrency == 0 && opt.Rate == 0 {
		opt.Concurrency = 1
	}
	r := &run{opt: opt}
	r.rng.lat = rand.New(rand.NewPCG(opt.Seed, 1))
	r.rng.arrive = rand.New(rand.NewPCG(opt.Seed, 2))
	r.rng.key = rand.New(rand.NewPCG(opt.Seed, 3))
	balancerRand := rand.New(rand.NewPCG(opt.Seed, 4))
	cfg := opt.Config
	cfg.Now = func() time.Time { return epoch.Add(time.Duration(r.now)) }
	cfg.Rand = balancerRand.Uint64
	b, err := core.New(cfg)
	if err != nil {
		return Result{}, err
	}
	r.b = b
	r.keyed = cfg.Strategy == core.IPHash || cfg.Strategy == core.URLHash
	if err := r.bindDists(); err != nil {
		return Result{}, err
	}
	r.answered = make([]int, b.Len())
	r.lat = make([]int64, 0, opt.Requests)

	if opt.Concurrency > 0 {
		for c := 0; c < opt.Concurrency && r.issued < opt.Requests; c++ {
			r.send()
		}
	} else {
		r.q.add(event{at: 0, seq: r.tick(), backend: -1})
	}
	for r.q.Len() > 0 {
		ev := r.q.next()
		r.now = ev.at
		if ev.backend < 0 { // an arrival
			r.send()
			if r.issued < opt.Requests {
				gap := int64(r.rng.arrive.ExpFloat64() / opt.Rate * 1e9)
				r.q.add(event{at: r.now + gap, seq: r.tick(), backend: -1})
			}
			continue
		}
		d := r.now - ev.start
		r.b.Done(ev.backend, time.Duration(d), false)
		r.lat = append(r.lat, d)
		r.answered[ev.backend]++
		if opt.Concurrency > 0 {
			// This client sends its next request, and clients that found
			// no backend try once more now that one has freed up; send
			// parks again those that still find none.
			n := r.waiting + 1
			r.waiting = 0
			for ; n > 0 && r.issued < opt.Requests; n-- {
				r.send()
			}
		}
	}
	return r.result(), nil
}

func (r *run) tick() uint64 { r.seq++; return r.seq }

// bindDists resolves each backend's distribution.
func (r *run) bindDists() error {
	def := r.opt.Default
	if def == nil {
		def = constDist(defaultLatency)
	}
	for addr := range r.opt.Latency {
		if r.b.Index(addr) < 0 {
			return fmt.Errorf("sim: latency for %q: no such backend", addr)
		}
	}
	r.dists = make([]Dist, r.b.Len())
	for i := range r.dists {
		d, ok := r.opt.Latency[r.b.Backend(i).Address]
		if !ok || d == nil {
			d = def
		}
		r.dists[i] = withBase(d, def)
	}
	return nil
}

// send issues one request at the current time.
func (r *run) send() {
	i := r.issued
	r.issued++
	key := ""
	if r.keyed {
		if r.opt.Key != nil {
			key = r.opt.Key(i, r.rng.key)
		} else {
			key = randomIPv4(r.rng.key)
		}
	}
	j, err := r.b.Pick(key)
	if err != nil {
		r.rejected++
		if r.opt.Concurrency > 0 {
			r.waiting++
		}
		return
	}
	r.b.Start(j)
	d := int64(r.dists[j].Sample(r.rng.lat))
	r.q.add(event{at: r.now + d, seq: r.tick(), backend: j, start: r.now})
}

func randomIPv4(g *rand.Rand) string {
	x := g.Uint32()
	return strconv.Itoa(int(x>>24)) + "." + strconv.Itoa(int(x>>16&0xff)) + "." +
		strconv.Itoa(int(x>>8&0xff)) + "." + strconv.Itoa(int(x&0xff))
}

func (r *run) result() Result {
	res := Result{Requests: len(r.lat), Rejected: r.rejected, Elapsed: time.Duration(r.now)}
	for i, n := range r.answered {
		br := BackendResult{Address: r.b.Backend(i).Address, Requests: n}
		if len(r.lat) > 0 {
			br.Share = float64(n) / float64(len(r.lat))
		}
		res.Backends = append(res.Backends, br)
	}
	if len(r.lat) == 0 {
		return res
	}
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	var sum float64
	for _, d := range r.lat {
		sum += float64(d)
	}
	res.P50 = percentile(r.lat, 0.50)
	res.P90 = percentile(r.lat, 0.90)
	res.P99 = percentile(r.lat, 0.99)
	res.Mean = time.Duration(sum / float64(len(r.lat)))
	res.Max = time.Duration(r.lat[len(r.lat)-1])
	return res
}

// percentile is the nearest-rank p-quantile of sorted: the smallest value
// with at least p of the values at or below it.
func percentile(sorted []int64, p float64) time.Duration {
	k := int(math.Ceil(p*float64(len(sorted)))) - 1
	if k < 0 {
		k = 0
	}
	return time.Duration(sorted[k])
}
