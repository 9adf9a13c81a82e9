// Package hold keeps requests waiting at the stand-in backends of the
// conformance suite and the sticky replays: a test holds an id, and the
// request whose query ends in hold=ID waits at its backend until the test
// releases it (so that nginx, Caddy or the Traefik plugin counts it in
// flight meanwhile).
package hold

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// limit bounds a held request's wait, whatever the test does.
const limit = 30 * time.Second

// Gates holds requests by id. Make one with New.
type Gates struct {
	mu   sync.Mutex
	open map[string]chan struct{} // closed by Release
	came map[string]chan struct{} // closed when the request reaches Wait
}

// New returns Gates that hold nothing yet.
func New() *Gates {
	return &Gates{open: map[string]chan struct{}{}, came: map[string]chan struct{}{}}
}

// Hold makes the request held as id wait in Wait until Release(id), and
// returns a channel closed when that request reaches its backend.
func (g *Gates) Hold(id string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open[id] = make(chan struct{})
	g.came[id] = make(chan struct{})
	return g.came[id]
}

// Release lets the request held as id answer; an id not held is ignored.
func (g *Gates) Release(id string) {
	g.mu.Lock()
	if c := g.open[id]; c != nil {
		close(c)
		delete(g.open, id)
	}
	g.mu.Unlock()
}

// ReleaseAll releases every request still held: a test's cleanup.
func (g *Gates) ReleaseAll() {
	g.mu.Lock()
	for id, c := range g.open {
		close(c)
		delete(g.open, id)
	}
	g.mu.Unlock()
}

// Len is the number of requests held and not released yet.
func (g *Gates) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.open)
}

// Wait keeps request r, held as id, at its backend until the test releases
// it, r's context ends, or 30 seconds pass; arrived, when not nil, is
// called first, once the request is known to be held. It reports false,
// at once, for an id no test holds.
func (g *Gates) Wait(r *http.Request, id string, arrived func()) bool {
	g.mu.Lock()
	open, came := g.open[id], g.came[id]
	delete(g.came, id)
	g.mu.Unlock()
	if open == nil {
		return false
	}
	if came != nil {
		close(came)
	}
	if arrived != nil {
		arrived()
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-open:
	case <-r.Context().Done():
	case <-t.C:
	}
	return true
}

// ID returns the hold= argument that ends target (a request's target or
// raw query), or "" when it has none. The arguments before it need not be
// valid for Go's query parser.
func ID(target string) string {
	i := strings.LastIndex(target, "hold=")
	if i < 0 || i > 0 && target[i-1] != '&' && target[i-1] != '?' {
		return ""
	}
	return target[i+len("hold="):]
}
