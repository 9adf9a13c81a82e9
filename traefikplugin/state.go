package traefikplugin

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
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
	logged   sync.Map     // failureKey: the failures logged (see logFailure)
	use      *nameUse     // the name's use, shared by every state the name has had
	// sticky learn's session table, and what it was made with
	// (sessionsKey): kept by every state of the name that keeps that.
	sessions *sticky.Sessions
	sessKey  string
}

// nameUse counts the middlewares built for a name whose ctx has not ended,
// under keptMu.
type nameUse struct {
	live int
	idle time.Time // when live last fell to 0
}

// The newest shared state of each middleware name. One entry per name: a
// reload replaces it, and a balancer holds only the servers it has, so
// state of removed servers goes with the balancer that had them. A name
// none of whose middlewares is in use any more (each one's ctx has ended)
// and which no New has asked for within idleGrace is dropped (see sweep),
// so that the registry holds the names of the configuration, not every
// name ever configured.
var (
	keptMu sync.Mutex
	kept   = map[string]*shared{}
	// idleGrace is how long the state of a name outlives its last
	// middleware. Traefik cancels the previous configuration's ctx before
	// it builds the next one, so every reload leaves each name unused for
	// a moment: the state must wait for the New that follows.
	idleGrace = 30 * time.Second
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
//
// sticky learn's session table goes with the name as long as learn's
// timeout and maxSessions stay the same, whatever else changes.
func keep(name string, s *settings) (*shared, error) {
	opts := optionsKey(s.balancer)
	skey := sessionsKey(s.sticky)
	full := fmt.Sprintf("%s|%v|%s|%s", opts, s.balancer.Backends, s.healthPath, skey)
	keptMu.Lock()
	defer keptMu.Unlock()
	sweep(time.Now())
	old := kept[name]
	if old != nil && old.full == full {
		old.use.live++
		return old, nil
	}
	sh := &shared{opts: opts, full: full, unhealth: make([]bool, len(s.targets)), use: &nameUse{}, sessKey: skey}
	if old != nil {
		sh.use = old.use
	}
	if old != nil && skey != "" && old.sessKey == skey {
		sh.sessions = old.sessions
	} else if skey != "" {
		sh.sessions = sticky.NewSessions(s.sticky.timeout, s.sticky.max)
	}
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
	sh.use.live++
	return sh, nil
}

// release records that a middleware built on sh has ended (its ctx is
// done), and drops the name's state idleGrace later if no New asked for it
// meanwhile.
func release(sh *shared) {
	keptMu.Lock()
	defer keptMu.Unlock()
	sh.use.live--
	if sh.use.live == 0 {
		sh.use.idle = time.Now()
		time.AfterFunc(idleGrace, sweepKept)
	}
}

// sweepKept is sweep under keptMu.
func sweepKept() {
	keptMu.Lock()
	sweep(time.Now())
	keptMu.Unlock()
}

// sweep drops the state of every name unused for idleGrace. Called with
// keptMu held.
func sweep(now time.Time) {
	var gone []string
	for name, sh := range kept {
		if sh.use.live == 0 && !sh.use.idle.IsZero() && now.Sub(sh.use.idle) >= idleGrace {
			gone = append(gone, name)
		}
	}
	for _, name := range gone {
		delete(kept, name)
	}
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
