// Package sim is a discrete-event simulation of load balancers in front of
// backends that queue. Each server serves a number of requests at a time
// (its workers) and queues the rest in arrival order; a request's latency is
// its wait in the queue plus its service time. Service times follow a
// distribution, can change over time (a backend that slows down, or flaps),
// depend on the request's cost class (cheap and expensive requests), and a
// server can answer some or all requests with an error.
//
// Load comes from a closed loop (clients that send their next request when
// the last one is answered, as wrk does) or an open loop (Poisson arrivals
// at a fixed rate), through one balancer or several independent ones that
// each see only their own requests.
//
// The balancers are lbpack's strategies, driven through core exactly as a
// proxy drives them (core.New with an injected clock and random source,
// core.Pick, core.Done), models of the peers' policies written from their
// sources, and an oracle that knows every queue. Everything derives from the
// seed: a run is deterministic.
//
// Scenarios holds the named presets behind `lbsim simulate --scenario` and
// docs/simulation.md; Run keeps the simpler interface of one lbpack strategy
// over backends with given latencies.
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

// defaultLatency is the service time of a server with no distribution given.
const defaultLatency = 10 * time.Millisecond

// epoch is the simulated clock's start: a fixed, non-zero instant.
var epoch = time.Unix(1700000000, 0)

// maxWindows bounds a run's simulated time to that many timeline windows
// (Scenario.Limit): the timeline keeps a row per window, and a run longer
// than that (12 days in windows of 1s) says more about its inputs than
// about a balancer.
const maxWindows = 1 << 20

// ErrLimit is the error of a run that would pass its scenario's Limit: a
// service time or an arrival gap that long, or a run that long.
var ErrLimit = errors.New("past the simulation's limit")

// Server is one simulated backend.
type Server struct {
	// Backend is the server as the balancers see it: address and weight
	// (every model reads the weight), and lbpack's per-backend options.
	Backend core.Backend

	// Workers is how many requests the server serves at once; the others
	// wait in its queue, first come first served. 0 means no limit: no
	// queue, every request is served at once.
	Workers int

	// Service is the service time of a request of cost 1; nil means 10ms.
	Service Dist

	// Slowdown, if set, multiplies the service time of a request whose
	// service starts at simulated time t: a server that slows down or
	// flaps. nil means 1.
	Slowdown func(t time.Duration) float64

	// FailRate is the fraction of requests the server answers with an
	// error (a 5xx), drawn at random; FailTime is how long such an answer
	// takes (nil: as long as a success). A failed answer holds a worker
	// like any other.
	FailRate float64
	FailTime Dist
}

// Class is a kind of request: Share of the requests cost Cost times a
// server's service time (Cost 0 means 1).
type Class struct {
	Share float64
	Cost  float64
}

// Goal names a scenario's own target for fair, checked by Targets.
type Goal int

// The scenario-specific targets (see Targets).
const (
	// GoalShareFloor: no backend gets less than half its weighted share.
	GoalShareFloor Goal = iota + 1
	// GoalRecovery: backend Focus, slow until Change, is back to 90% of its
	// weighted share within 2 x decay time of Change.
	GoalRecovery
	// GoalFailing: backend Focus, which fails, gets at most 5% of requests.
	GoalFailing
	// GoalWeights: every backend's share is within 5% (relative) of its
	// weighted share.
	GoalWeights
)

// Scenario is a simulated situation: servers and load.
type Scenario struct {
	// Name is the preset's name (lbsim simulate --scenario NAME); Title and
	// Note describe it.
	Name, Title, Note string

	Servers []Server

	// Clients runs a closed loop of that many clients; Rate runs an open
	// loop of Poisson arrivals at Rate per second instead. Set one.
	Clients int
	Rate    float64

	// Requests and Duration bound the run: no request is sent once
	// Requests have been sent or the simulated clock has passed Duration
	// (a zero bound does not apply; at least one must be set). The run
	// ends when the last request sent is answered.
	Requests int
	Duration time.Duration

	// Balancers is how many independent balancers share the load (client c
	// goes through balancer c mod Balancers; open-loop arrivals take them
	// in turn). Each sees only its own requests. 0 means 1.
	Balancers int

	// Classes are the request cost classes; none means every request costs 1.
	Classes []Class

	// Config carries lbpack's strategy options (DecayTime, TwoChoices...);
	// its Strategy and Backends are set per run.
	Config core.Config

	// Key returns request i's key for the hash strategies; nil means none.
	Key func(i int, r *rand.Rand) string

	// Window is the width of Result.Timeline's buckets; 0 means 1s.
	Window time.Duration

	// Goals are the scenario's own targets; Focus is the backend they are
	// about and Change the time its behaviour changes (GoalRecovery).
	Goals  []Goal
	Focus  int
	Change time.Duration
}

// Result is what one run measured.
type Result struct {
	// Policy is the contender's name, Kind its kind.
	Policy string
	Kind   Kind

	// Requests answered with success, answered with an error, and requests
	// for which the balancer had no backend.
	Requests, Errors, Rejected int

	// Latency percentiles (nearest rank), mean and maximum of the
	// successful answers.
	P50, P90, P99, Mean, Max time.Duration

	// Elapsed is the simulated time from the first request to the last
	// answer; Throughput is successful answers per simulated second.
	Elapsed    time.Duration
	Throughput float64

	// Backends are the servers in configuration order.
	Backends []BackendResult

	// Latencies are the successful answers' latencies, sorted.
	Latencies []time.Duration

	// Timeline counts the requests sent to each backend per Window of
	// simulated time: Timeline[w][i] is backend i's in window w; a window
	// in which no request was sent is nil.
	Timeline [][]int
	Window   time.Duration
}

// BackendResult is one backend's part of a run.
type BackendResult struct {
	Address  string
	Requests int     // requests it answered, errors included
	Errors   int     // of which errors
	Share    float64 // Requests / all answered requests
}

// request is one request in flight.
type request struct {
	id       int
	client   int // closed loop: the client; -1 in the open loop
	balancer int
	server   int
	sent     int64 // simulated ns
	cost     float64
	fail     bool
	ends     int64 // when its service ends, once started
}

// event is a request's answer, or an open-loop arrival (req nil).
type event struct {
	at  int64
	seq uint64
	req *request
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	return e[i].at < e[j].at || (e[i].at == e[j].at && e[i].seq < e[j].seq)
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// server is a Server's running state.
type server struct {
	Server
	serving []*request // in service
	queue   []*request // waiting, in arrival order
}

// world is one run's state.
type world struct {
	sc       Scenario
	servers  []*server
	pols     []Policy
	now      int64
	seq      uint64
	q        events
	sent     int
	waiting  []int // closed-loop clients that found no backend
	lat      []time.Duration
	answered []int
	errs     []int
	rejected int
	timeline [][]int
	window   int64
	limit    int64 // simulated ns: sc.Limit()
	err      error // why the run stopped early (ErrLimit)
	meanCost float64
	rng      struct{ service, arrive, class, fail, key *rand.Rand }
}

// Simulate runs contender c through scenario sc with the given seed.
func Simulate(sc Scenario, c Contender, seed uint64) (Result, error) {
	if err := sc.check(); err != nil {
		return Result{}, err
	}
	w := &world{sc: sc}
	w.rng.service = rand.New(rand.NewPCG(seed, 1))
	w.rng.arrive = rand.New(rand.NewPCG(seed, 2))
	w.rng.class = rand.New(rand.NewPCG(seed, 3))
	w.rng.fail = rand.New(rand.NewPCG(seed, 5))
	w.rng.key = rand.New(rand.NewPCG(seed, 6))
	w.window = int64(sc.window())
	w.limit = int64(sc.Limit())
	w.meanCost = 1
	if len(sc.Classes) > 0 {
		w.meanCost = 0
		for _, cl := range sc.Classes {
			w.meanCost += cl.Share * cost(cl)
		}
	}
	for _, s := range sc.Servers {
		if s.Service == nil {
			s.Service = constDist(defaultLatency)
		}
		w.servers = append(w.servers, &server{Server: s})
	}
	n := sc.Balancers
	if n < 1 {
		n = 1
	}
	for b := 0; b < n; b++ {
		env := Env{
			Servers: sc.Servers,
			Config:  sc.Config,
			Now:     func() time.Duration { return time.Duration(w.now) },
			Rand:    rand.New(rand.NewPCG(seed, 100+uint64(b))),
			Delay:   w.delay,
		}
		p, err := c.New(env)
		if err != nil {
			return Result{}, fmt.Errorf("sim: %s: %v", c.Name, err)
		}
		w.pols = append(w.pols, p)
	}
	w.answered = make([]int, len(sc.Servers))
	w.errs = make([]int, len(sc.Servers))
	if sc.Requests > 0 {
		w.lat = make([]time.Duration, 0, sc.Requests)
	}

	if sc.Clients > 0 {
		for cl := 0; cl < sc.Clients && w.more() && w.err == nil; cl++ {
			w.send(cl)
		}
	} else {
		w.push(event{at: 0})
	}
	for w.q.Len() > 0 && w.err == nil {
		ev := heap.Pop(&w.q).(event)
		w.now = ev.at
		if ev.req == nil { // an open-loop arrival
			w.send(-1)
			if w.more() {
				if gap, ok := w.after(w.rng.arrive.ExpFloat64()/sc.Rate*1e9, "the next arrival"); ok {
					w.push(event{at: w.now + gap})
				}
			}
			continue
		}
		w.finish(ev.req)
	}
	if w.err != nil {
		return Result{}, w.err
	}
	res := w.result()
	res.Policy, res.Kind = c.Name, c.Kind
	return res, nil
}

// check refuses a scenario that cannot run.
func (sc Scenario) check() error {
	name := sc.Name
	if name == "" {
		name = "scenario"
	}
	switch {
	case len(sc.Servers) == 0:
		return fmt.Errorf("sim: %s: no servers", name)
	case sc.Clients < 0:
		return fmt.Errorf("sim: %s: clients %d: must not be negative", name, sc.Clients)
	case sc.Rate < 0 || math.IsNaN(sc.Rate) || math.IsInf(sc.Rate, 0):
		return fmt.Errorf("sim: %s: rate %v: must be a positive number", name, sc.Rate)
	case sc.Clients > 0 && sc.Rate > 0:
		return fmt.Errorf("sim: %s: clients and rate: set one, not both", name)
	case sc.Clients == 0 && sc.Rate == 0:
		return fmt.Errorf("sim: %s: set clients or rate", name)
	case sc.Requests < 0 || sc.Duration < 0:
		return fmt.Errorf("sim: %s: requests %d, duration %v: must not be negative", name, sc.Requests, sc.Duration)
	case sc.Requests == 0 && sc.Duration == 0:
		return fmt.Errorf("sim: %s: set requests or duration", name)
	}
	for i, s := range sc.Servers {
		if s.Workers < 0 {
			return fmt.Errorf("sim: %s: server %d (%s): workers %d: must not be negative", name, i, s.Backend.Address, s.Workers)
		}
		if !(s.FailRate >= 0 && s.FailRate <= 1) {
			return fmt.Errorf("sim: %s: server %d (%s): fail rate %v: want 0 to 1", name, i, s.Backend.Address, s.FailRate)
		}
	}
	total := 0.0
	for _, cl := range sc.Classes {
		if !(cl.Share > 0) || cl.Cost < 0 {
			return fmt.Errorf("sim: %s: class %+v: share must be positive, cost not negative", name, cl)
		}
		total += cl.Share
	}
	if len(sc.Classes) > 0 && math.Abs(total-1) > 1e-9 {
		return fmt.Errorf("sim: %s: class shares sum to %v, want 1", name, total)
	}
	return nil
}

// window is the width of the timeline's windows.
func (sc Scenario) window() time.Duration {
	if sc.Window <= 0 {
		return time.Second
	}
	return sc.Window
}

// Limit is the longest simulated time a run of sc may reach: a run that
// would pass it (a service time or an arrival gap that long, or that many
// requests after one another) stops with ErrLimit.
func (sc Scenario) Limit() time.Duration {
	return time.Duration(maxWindows) * sc.window()
}

// after checks that a span of d simulated ns from now stays within the
// limit, and returns it; otherwise it stops the run with ErrLimit, saying
// what the span was.
func (w *world) after(d float64, what string) (int64, bool) {
	if d >= 0 && d <= float64(w.limit-w.now) {
		return int64(d), true
	}
	if w.err == nil {
		w.err = fmt.Errorf("sim: %s: %s at %v would take %v: %w (%v, %d windows of %v)", w.name(), what,
			time.Duration(w.now), durationText(d), ErrLimit, time.Duration(w.limit), maxWindows, time.Duration(w.window))
	}
	return 0, false
}

func (w *world) name() string {
	if w.sc.Name == "" {
		return "scenario"
	}
	return w.sc.Name
}

// durationText writes a span of ns that may be past what a Duration holds.
func durationText(d float64) string {
	if d >= 0 && d < math.MaxInt64 {
		return time.Duration(d).String()
	}
	return strconv.FormatFloat(d/1e9, 'g', 4, 64) + "s"
}

func cost(c Class) float64 {
	if c.Cost == 0 {
		return 1
	}
	return c.Cost
}

func (w *world) push(ev event) {
	w.seq++
	ev.seq = w.seq
	heap.Push(&w.q, ev)
}

// more reports whether another request may be sent.
func (w *world) more() bool {
	return (w.sc.Requests == 0 || w.sent < w.sc.Requests) &&
		(w.sc.Duration == 0 || w.now < int64(w.sc.Duration))
}

// send issues one request now, from closed-loop client cl (-1: open loop).
func (w *world) send(cl int) {
	id := w.sent
	w.sent++
	b := id % len(w.pols)
	if cl >= 0 {
		b = cl % len(w.pols)
	}
	key := ""
	if w.sc.Key != nil {
		key = w.sc.Key(id, w.rng.key)
	}
	c := 1.0
	if len(w.sc.Classes) > 0 {
		u := w.rng.class.Float64()
		c = cost(w.sc.Classes[len(w.sc.Classes)-1])
		for _, k := range w.sc.Classes {
			if u < k.Share {
				c = cost(k)
				break
			}
			u -= k.Share
		}
	}
	i := w.pols[b].Pick(key)
	if i < 0 || i >= len(w.servers) {
		w.rejected++
		if cl >= 0 {
			w.waiting = append(w.waiting, cl)
		}
		return
	}
	w.pols[b].Start(i)
	win := int(w.now / w.window)
	for len(w.timeline) < win {
		w.timeline = append(w.timeline, nil) // a window without requests
	}
	if len(w.timeline) == win {
		w.timeline = append(w.timeline, make([]int, len(w.servers)))
	}
	w.timeline[win][i]++
	s := w.servers[i]
	r := &request{id: id, client: cl, balancer: b, server: i, sent: w.now, cost: c}
	r.fail = s.FailRate > 0 && w.rng.fail.Float64() < s.FailRate
	if s.Workers == 0 || len(s.serving) < s.Workers {
		w.serve(s, r)
	} else {
		s.queue = append(s.queue, r)
	}
}

// serve starts r's service at s now.
func (w *world) serve(s *server, r *request) {
	var d float64
	if r.fail && s.FailTime != nil {
		d = float64(s.FailTime.Sample(w.rng.service))
	} else {
		d = float64(s.Service.Sample(w.rng.service)) * r.cost
		if s.Slowdown != nil {
			d *= s.Slowdown(time.Duration(w.now))
		}
	}
	span, ok := w.after(d, fmt.Sprintf("server %d (%s): a service time", r.server, s.Backend.Address))
	if !ok {
		return
	}
	r.ends = w.now + span
	s.serving = append(s.serving, r)
	w.push(event{at: r.ends, req: r})
}

// finish answers r: the balancer learns of it, the server takes its next
// queued request, and r's client sends its next one.
func (w *world) finish(r *request) {
	s := w.servers[r.server]
	for k, x := range s.serving {
		if x == r {
			s.serving = append(s.serving[:k], s.serving[k+1:]...)
			break
		}
	}
	if len(s.queue) > 0 {
		next := s.queue[0]
		s.queue = s.queue[1:]
		w.serve(s, next)
	}
	d := time.Duration(w.now - r.sent)
	w.pols[r.balancer].Done(r.server, d, r.fail)
	w.answered[r.server]++
	if r.fail {
		w.errs[r.server]++
	} else {
		w.lat = append(w.lat, d)
	}
	if r.client < 0 {
		return
	}
	// This client sends its next request, and clients that found no
	// backend try once more now that one has freed up; send parks again
	// those that still find none.
	retry := append([]int{r.client}, w.waiting...)
	w.waiting = w.waiting[:0]
	for _, cl := range retry {
		if !w.more() {
			break
		}
		w.send(cl)
	}
}

// delay is the oracle's view: the expected latency of a request sent to
// server i now. It knows the queue and the service in progress: the request
// waits until a worker is free after everything queued before it (each
// queued request expected to take its mean), then takes the mean service
// time at the server's current speed. A server that fails every request
// is worth nothing (+Inf); one that fails a fraction p costs 1/(1-p) tries.
func (w *world) delay(i int) time.Duration {
	s := w.servers[i]
	if s.FailRate >= 1 {
		return time.Duration(math.MaxInt64)
	}
	speed := 1.0
	if s.Slowdown != nil {
		speed = s.Slowdown(time.Duration(w.now))
	}
	mean := float64(s.Service.Mean()) * speed
	wait := 0.0
	if s.Workers > 0 && len(s.serving) >= s.Workers {
		free := make([]float64, 0, len(s.serving))
		for _, r := range s.serving {
			free = append(free, float64(r.ends-w.now))
		}
		for _, r := range s.queue {
			k := minIndex(free)
			free[k] += mean * r.cost
		}
		wait = free[minIndex(free)]
	}
	d := (wait + mean*w.meanCost) / (1 - s.FailRate)
	return time.Duration(d)
}

func minIndex(x []float64) int {
	k := 0
	for j := range x {
		if x[j] < x[k] {
			k = j
		}
	}
	return k
}

func (w *world) result() Result {
	total := 0
	for _, n := range w.answered {
		total += n
	}
	res := Result{Requests: len(w.lat), Rejected: w.rejected, Elapsed: time.Duration(w.now),
		Timeline: w.timeline, Window: time.Duration(w.window)}
	for i, n := range w.answered {
		br := BackendResult{Address: w.servers[i].Backend.Address, Requests: n, Errors: w.errs[i]}
		if total > 0 {
			br.Share = float64(n) / float64(total)
		}
		res.Errors += w.errs[i]
		res.Backends = append(res.Backends, br)
	}
	if w.now > 0 {
		res.Throughput = float64(len(w.lat)) / time.Duration(w.now).Seconds()
	}
	sort.Slice(w.lat, func(i, j int) bool { return w.lat[i] < w.lat[j] })
	res.Latencies = w.lat
	if len(w.lat) == 0 {
		return res
	}
	var sum float64
	for _, d := range w.lat {
		sum += float64(d)
	}
	res.P50 = Percentile(w.lat, 0.50)
	res.P90 = Percentile(w.lat, 0.90)
	res.P99 = Percentile(w.lat, 0.99)
	res.Mean = time.Duration(sum / float64(len(w.lat)))
	res.Max = w.lat[len(w.lat)-1]
	return res
}

// Percentile is the nearest-rank p-quantile of sorted: the smallest value
// with at least p of the values at or below it (0 for no values).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p*float64(len(sorted)))) - 1
	if k < 0 {
		k = 0
	}
	return sorted[k]
}

// Options describe one run of Run: one lbpack strategy over backends whose
// service times are given per address.
type Options struct {
	// Config is the balancer: strategy, options and backends. Its Now and
	// Rand are replaced by the simulation's clock and seeded source.
	Config core.Config

	// Latency gives backends their service time distributions, by address.
	// A backend without one takes Default.
	Latency map[string]Dist

	// Default is the service time of backends missing from Latency, and the
	// base of a "slow:D@P%" distribution written without one; nil means 10ms.
	Default Dist

	// Workers is every backend's number of workers (see Server.Workers);
	// 0 means no queue: every answer takes a fresh sample, whatever the load.
	Workers int

	// Concurrency runs a closed loop of that many clients; Rate runs an
	// open loop of Poisson arrivals at Rate per second instead. Set one of
	// them; both zero means one client.
	Concurrency int
	Rate        float64

	// Requests is how many requests to send in all; at least 1.
	Requests int

	// Seed makes the run reproducible.
	Seed uint64

	// Key returns request i's key for the hash strategies; nil means a
	// random IPv4 address (a valid key for ip_hash and url_hash alike).
	Key func(i int, r *rand.Rand) string
}

// Run simulates opt: one lbpack strategy through package sim's engine.
func Run(opt Options) (Result, error) {
	sc, err := opt.Scenario()
	if err != nil {
		return Result{}, err
	}
	return Simulate(sc, Lbpack(opt.Config.Strategy, opt.Config.Strategy), opt.Seed)
}

// Scenario is opt as a scenario: opt.Config's backends become servers.
func (opt Options) Scenario() (Scenario, error) {
	if opt.Requests < 1 {
		return Scenario{}, fmt.Errorf("sim: requests %d: must be at least 1", opt.Requests)
	}
	if opt.Concurrency < 0 {
		return Scenario{}, fmt.Errorf("sim: concurrency %d: must not be negative", opt.Concurrency)
	}
	if opt.Rate < 0 || math.IsNaN(opt.Rate) || math.IsInf(opt.Rate, 0) {
		return Scenario{}, fmt.Errorf("sim: rate %v: must be a positive number", opt.Rate)
	}
	if opt.Concurrency > 0 && opt.Rate > 0 {
		return Scenario{}, errors.New("sim: concurrency and rate: set one, not both")
	}
	if opt.Workers < 0 {
		return Scenario{}, fmt.Errorf("sim: workers %d: must not be negative", opt.Workers)
	}
	if opt.Concurrency == 0 && opt.Rate == 0 {
		opt.Concurrency = 1
	}
	def := opt.Default
	if def == nil {
		def = constDist(defaultLatency)
	}
	known := map[string]bool{}
	for _, b := range opt.Config.Backends {
		known[b.Address] = true
	}
	for addr := range opt.Latency {
		if !known[addr] {
			return Scenario{}, fmt.Errorf("sim: latency for %q: no such backend", addr)
		}
	}
	sc := Scenario{Clients: opt.Concurrency, Rate: opt.Rate, Requests: opt.Requests, Config: opt.Config, Key: opt.Key}
	sc.Config.Backends = nil
	for _, b := range opt.Config.Backends {
		d, ok := opt.Latency[b.Address]
		if !ok || d == nil {
			d = def
		}
		sc.Servers = append(sc.Servers, Server{Backend: b, Workers: opt.Workers, Service: withBase(d, def)})
	}
	if sc.Key == nil && (opt.Config.Strategy == core.IPHash || opt.Config.Strategy == core.URLHash) {
		sc.Key = func(_ int, r *rand.Rand) string { return randomIPv4(r) }
	}
	return sc, nil
}

func randomIPv4(g *rand.Rand) string {
	x := g.Uint32()
	return strconv.Itoa(int(x>>24)) + "." + strconv.Itoa(int(x>>16&0xff)) + "." +
		strconv.Itoa(int(x>>8&0xff)) + "." + strconv.Itoa(int(x&0xff))
}
