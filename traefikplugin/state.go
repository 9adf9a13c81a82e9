package traefikplugin

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/lbpack/lbpack/core"
)

// shared is a middleware's balancer with what goes with it, kept across
// New calls of the middleware's name. Traefik calls New again on every
// reload of the dynamic configuration, even of an unrelated router, and
// once per router using the middleware, but it keeps one interpreter per
// plugin: package state lives on, and so the smooth schedule, requests in
// flight, failures, slow starts and fair's estimates do too.
type shared struct {
	opts     string       // the balancer's options, as optionsKey gives them
	full     string       // opts and everything else the balancer is built from
	addrs    []string     // the servers' addresses, by index
	bal      atomic.Value // *balancer
	mu       sync.Mutex   // serialises replacements of bal (health changes, markFailed)
	unhealth []bool       // by server, under mu: failed the active health check
}

// The newest shared state of each middleware name. One entry per name: a
// reload replaces it, and a balancer holds only the servers it has, so
// state of removed servers goes with the balancer that had them.
var (
	keptMu sync.Mutex
	kept   = map[string]*shared{}
)

// keep returns the shared state the middleware called name runs on with
// settings s, and makes it the newest:
//   - the same settings as the newest: that state itself (the smooth
//     schedule goes on, health marks stay);
//   - other servers or per-server settings, with the same strategy and
//     options: the newest balancer's Update, so that every server that
//     remains keeps its counters (in-flight requests of the replaced
//     middleware end on them), and only a server that is new starts its
//     slow start; an unhealthy mark stays with its server while health
//     checks remain on;
//   - another strategy or option, or a new name: a new balancer.
func keep(name string, s *settings) (*shared, error) {
	opts := optionsKey(s.balancer)
	full := fmt.Sprintf("%s|%v|%s", opts, s.balancer.Backends, s.healthPath)
	keptMu.Lock()
	defer keptMu.Unlock()
	old := kept[name]
	if old != nil && old.full == full {
		return old, nil
	}
	sh := &shared{opts: opts, full: full, unhealth: make([]bool, len(s.targets))}
	for _, be := range s.balancer.Backends {
		sh.addrs = append(sh.addrs, be.Address)
	}
	var b *core.Balancer
	var err error
	failed := false
	if old != nil && old.opts == opts {
		backends := make([]core.Backend, len(s.balancer.Backends))
		copy(backends, s.balancer.Backends)
		old.mu.Lock()
		if s.healthPath != "" {
			sh.inherit(old, backends)
		}
		prev := old.bal.Load().(*balancer)
		old.mu.Unlock()
		b, err = prev.Update(backends)
		failed = prev.failed
	} else {
		b, err = core.New(s.balancer)
	}
	if err != nil {
		return nil, err
	}
	sh.bal.Store(bind(b, failed))
	kept[name] = sh
	return sh, nil
}

// inherit takes over old's unhealthy marks for the servers sh has too,
// marking them down in backends. Called with old.mu held.
func (sh *shared) inherit(old *shared, backends []core.Backend) {
	index := make(map[string]int, len(backends))
	for i, be := range backends {
		index[be.Address] = i
	}
	for j, addr := range old.addrs {
		if i, ok := index[addr]; ok && old.unhealth[j] {
			backends[i].Down = true
			sh.unhealth[i] = true
		}
	}
}

// optionsKey is what Update cannot change: the strategy and its options.
func optionsKey(c core.Config) string {
	return fmt.Sprintf("%s|%s|%v|%v|%v|%v", c.Strategy, c.HashMode, c.LoadFactor, c.Stagger, c.TwoChoices, c.DecayTime)
}
