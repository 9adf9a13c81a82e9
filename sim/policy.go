package sim

import (
	"math/rand/v2"
	"time"

	"github.com/lbpack/lbpack/core"
)

// Policy is a balancer under simulation. Pick returns a server index, or -1
// when it has none; every Pick that returns a server is followed by Start and,
// once answered, Done with the request's latency and whether it failed (an
// error answer, such as a 5xx).
type Policy interface {
	Pick(key string) int
	Start(i int)
	Done(i int, latency time.Duration, failed bool)
}

// Kind says what a contender is.
type Kind int

// The kinds of contender.
const (
	// KindLbpack is one of lbpack's strategies, run through core.
	KindLbpack Kind = iota
	// KindPeer is a model of another balancer's policy.
	KindPeer
	// KindOracle knows every queue: the limit of what a balancer can do.
	KindOracle
)

func (k Kind) String() string {
	switch k {
	case KindLbpack:
		return "lbpack"
	case KindPeer:
		return "peer"
	case KindOracle:
		return "oracle"
	}
	return "?"
}

// Env is what a contender's New gets: the servers, lbpack's options, the
// simulated clock, a seeded random source of its own, and (for the oracle
// only, a balancer cannot know it) each server's expected delay now.
type Env struct {
	Servers []Server
	Config  core.Config
	Now     func() time.Duration
	Rand    *rand.Rand
	Delay   func(i int) time.Duration
}

// Weights returns the servers' weights (0 read as 1).
func (e Env) Weights() []int {
	w := make([]int, len(e.Servers))
	for i, s := range e.Servers {
		w[i] = s.Backend.Weight
		if w[i] < 1 {
			w[i] = 1
		}
	}
	return w
}

// Contender is a named way to build a policy: one per balancer of a run.
type Contender struct {
	Name string
	Kind Kind
	// Note says what the model follows (for peers: the source file and
	// function) or how lbpack's strategy is configured.
	Note string
	New  func(Env) (Policy, error)
}

// lbpack drives a core.Balancer as a proxy does: Pick begins the request,
// Done ends it with its latency. A request's ticket waits in open, by
// backend, for its Done: with the latency given, any ticket of a backend's
// requests ends any of them alike.
type lbpack struct {
	b    *core.Balancer
	open [][]core.Ticket
}

func newLbpack(b *core.Balancer) *lbpack {
	return &lbpack{b: b, open: make([][]core.Ticket, b.Len())}
}

// Pick picks with no filter, as the plugins do when every upstream is
// healthy.
func (p *lbpack) Pick(key string) int {
	i, t := core.Pick(p.b, key, core.Filter{})
	if i >= 0 {
		p.open[i] = append(p.open[i], t)
	}
	return i
}

// Start does nothing: Pick began the request.
func (p *lbpack) Start(i int) {}

// Done ends a request to backend i, whatever its ticket says: a success
// after failures clears them as a proxy's report does.
func (p *lbpack) Done(i int, latency time.Duration, failed bool) {
	var t core.Ticket
	if n := len(p.open[i]); n > 0 {
		t = p.open[i][n-1]
		p.open[i] = p.open[i][:n-1]
	}
	core.Done(p.b, i, t, latency, failed)
}

// coreConfig is the core.Config of strategy over env's servers, on the
// simulated clock (as a time.Time from epoch) with env's random source.
func coreConfig(env Env, strategy string) core.Config {
	cfg := env.Config
	cfg.Strategy = strategy
	cfg.Backends = make([]core.Backend, len(env.Servers))
	for i, s := range env.Servers {
		cfg.Backends[i] = s.Backend
		if cfg.Backends[i].Weight == 0 {
			cfg.Backends[i].Weight = 1
		}
	}
	cfg.Now = func() time.Time { return epoch.Add(env.Now()) }
	cfg.Rand = env.Rand.Uint64
	return cfg
}

// Lbpack is lbpack's strategy, named name, with the scenario's options. An
// error answer is reported to core as a failure (as a plugin does when it
// counts 5xx answers as failures).
func Lbpack(name, strategy string) Contender {
	return LbpackWith(name, strategy, "", nil)
}

// LbpackWith is Lbpack with the options changed by set.
func LbpackWith(name, strategy, note string, set func(*core.Config)) Contender {
	return Contender{Name: name, Kind: KindLbpack, Note: note, New: func(env Env) (Policy, error) {
		cfg := coreConfig(env, strategy)
		if set != nil {
			set(&cfg)
		}
		b, err := core.New(cfg)
		if err != nil {
			return nil, err
		}
		return newLbpack(b), nil
	}}
}

// Contenders are every policy compared in the scenarios: lbpack's
// strategies, the peers' models, and the oracle.
func Contenders() []Contender {
	return []Contender{
		Lbpack("lbpack fair", core.Fair),
		Lbpack("lbpack least_conn", core.LeastConn),
		LbpackWith("lbpack least_conn two_choices", core.LeastConn, "least_conn with two_choices", func(c *core.Config) { c.TwoChoices = true }),
		Lbpack("lbpack smooth_wrr", core.SmoothWRR),
		Lbpack("lbpack random", core.Random),
		TraefikLeastTime(),
		CaddyLeastConn(),
		CaddyRandomChoose(2),
		NginxLeastConn(),
		NginxLeastTime(false),
		NginxLeastTime(true),
		HAProxyLeastConn(),
		EnvoyLeastRequest(),
		FinaglePeakEWMA(),
		Oracle(),
	}
}

// FindContender returns the contender of that name.
func FindContender(name string) (Contender, bool) {
	for _, c := range Contenders() {
		if c.Name == name {
			return c, true
		}
	}
	return Contender{}, false
}
