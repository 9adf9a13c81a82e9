package caddyplugin

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// What a policy remembers of a request lives in the request's variables
// (Caddy keeps one map per request, shared by all its tries) under the
// policy's attemptVar, when the reverse proxy may retry (policy.retries):
//   - nothing: Select has not seen this request, so this is its first try;
//   - a *reverseproxy.Upstream: the first try of a policy that does not track
//     attempts went there (stored as is, so that the common case allocates
//     nothing);
//   - an *attempt: a try of a tracking policy, or a retry.
//
// A second Select for one request is Caddy retrying (lb_retries,
// lb_try_duration): the previous try failed. The retry then goes to an
// upstream this request has not tried, as nginx's proxy_next_upstream does.

// attempt is one try of a request against one upstream. For the policies
// that track attempts (policy.track), and for any try whose ticket is not
// 0 (core.Pick), it also reports the try's end to the balancer: core.Done,
// exactly once.
//
// What is measured: Caddy hands a selection policy neither the end of a try
// nor its outcome, so a try ends at whichever comes first:
//   - the next Select for the same request: Caddy is retrying, so the try
//     failed (a transport error, or an answer lb_retry_match refused);
//   - the end of the request (its context is done when Caddy's handler
//     chain returns, or when the client goes away).
//
// Its latency is Caddy's own upstream latency, the time to the upstream's
// response headers ({http.reverse_proxy.upstream.latency}), not the life of
// the client's request (which includes streaming the body to a slow
// client). A try the upstream answered is a success unless its status is
// one of the policy's fail_status ({http.reverse_proxy.status_code}, which
// Caddy sets with the latency). One that got no answer is a failure when Caddy
// retried it or ended the request with an error (Caddy's server records
// every handler error as {http.error}); without either, the request was
// cancelled before the upstream answered (the client went away): that says
// nothing about the upstream and is not a failure.
type attempt struct {
	dial   string   // the upstream tried
	tried  []string // the upstreams of the request's earlier tries, in order
	cookie string   // the sticky Set-Cookie value this try set, "" none

	// The rest is set for the attempts that hear of their end (stop !=
	// nil): e for tracking policies, learn for sticky learn.
	e     *poolEntry
	i     int
	t     core.Ticket
	fail  []int // the policy's failStatus
	learn *learning
	start time.Time
	repl  *caddy.Replacer
	lat0  time.Duration // the upstream latency placeholder before this try
	had   struct{ lat, err bool }
	// mu is held while the try ends, so that a caller that finds it
	// ending waits until it has (see connTries); ended says it has.
	mu    sync.Mutex
	ended bool
	stop  func() bool // unregisters the context callback
	// ctx is the request's context; remote its connection's address, by
	// which conns knows the try (see connTries).
	ctx    context.Context
	remote string
	conns  *connTries
}

// learning is what sticky learn needs at a try's end: where the session's
// id is, the session the request looked up, and the upstream's sticky id.
type learning struct {
	sessions *sticky.Sessions
	create   []sticky.Source
	r        *http.Request // what the request sources of create read
	session  string
	id       string
}

// Tries in flight, by connection. A request's context is done before its
// connection reads the next request, but the callback that ends its try
// runs on a goroutine of its own: the next request on the connection
// could be picked while the last one still counts in flight, or before a
// session it created is learnt. So a Select first ends the try of its
// connection's previous request if that request is over: requests one
// after another see the earlier ones ended, as in nginx. (Requests of
// other connections see a try end when its callback runs.)
//
// The latest try of each connection is kept in a slot chosen by a hash of
// the connection's remote address, without allocating; two connections in
// one slot take turns, and the one whose try was replaced sees its tries
// end when their callbacks run, as if it were not kept.
type connTries struct {
	slots [connSlots]atomic.Pointer[attempt]
}

// connSlots is the number of connections whose latest tries are kept at
// once, at most.
const connSlots = 256

// slot returns the slot of the connection with remote address remote.
func (c *connTries) slot(remote string) *atomic.Pointer[attempt] {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(remote); i++ {
		h = (h ^ uint32(remote[i])) * 16777619
	}
	return &c.slots[h%connSlots]
}

// settle ends the try of r's connection's previous request, if that
// request is over.
func (c *connTries) settle(r *http.Request) {
	if a := c.slot(r.RemoteAddr).Load(); a != nil && a.remote == r.RemoteAddr && a.ctx.Err() != nil {
		a.stop()
		a.finish(false)
	}
}

// add records a as the latest try of its connection.
func (c *connTries) add(a *attempt) {
	a.conns = c
	c.slot(a.remote).Store(a)
}

// done forgets a, unless a later try replaced it.
func (c *connTries) done(a *attempt) { c.slot(a.remote).CompareAndSwap(a, nil) }

// learn binds the session of a try the upstream answered to its upstream,
// as nginx does when a request ends.
func (l *learning) learn(repl *caddy.Replacer) {
	get := func(string) (any, bool) { return nil, false }
	if repl != nil {
		get = repl.Get
	}
	create := sticky.First(l.create, l.r, upstreamHeader(l.create, get))
	l.sessions.Learn(create, l.session, l.id, time.Now())
}

// learnRequest is what create's request sources read of r, copied at
// Select so that nothing reads r at the request's end.
func learnRequest(create []sticky.Source, r *http.Request) *http.Request {
	for _, s := range create {
		if !s.Upstream() {
			u := *r.URL
			return &http.Request{URL: &u, Header: r.Header.Clone()}
		}
	}
	return &http.Request{URL: &url.URL{}, Header: http.Header{}}
}

// setCookie returns the Set-Cookie value the try set, "" for none (or nil).
func (a *attempt) setCookie() string {
	if a == nil {
		return ""
	}
	return a.cookie
}

// Placeholders Caddy sets that tell how a try went.
const (
	latencyPlaceholder = "http.reverse_proxy.upstream.latency"
	statusPlaceholder  = "http.reverse_proxy.status_code"
	errorPlaceholder   = "http.error"
)

// retrying is called for a request the policy has seen before, with what it
// remembered (see above). It ends the previous try as failed and returns the
// dial addresses the request has tried, in order, and the previous try's
// attempt (nil if it kept none).
func retrying(prev any) ([]string, *attempt) {
	switch a := prev.(type) {
	case *reverseproxy.Upstream:
		return []string{a.Dial}, nil
	case *attempt:
		if a.stop != nil {
			a.stop()
			a.finish(true)
		}
		return append(a.tried[:len(a.tried):len(a.tried)], a.dial), a
	}
	return nil, nil
}

// remember records the pick of u (backend i of e) for request r, whose
// variables are vars; tried are the request's earlier tries, b its sticky
// binding. A tracking policy, and one with sticky learn, starts an attempt
// and arranges for its end.
func (p *policy) remember(vars map[string]any, r *http.Request, e *poolEntry, i int, t core.Ticket, u *reverseproxy.Upstream, tried []string, b binding) {
	count := p.track || t != 0
	if !count && p.sessions == nil {
		switch {
		case vars == nil:
			// no retries, or outside Caddy's HTTP server: nothing to remember
		case tried == nil && b.cookie == "":
			vars[p.attemptVar] = u
		default:
			vars[p.attemptVar] = &attempt{dial: u.Dial, tried: tried, cookie: b.cookie}
		}
		return
	}
	ctx := r.Context()
	a := &attempt{dial: u.Dial, tried: tried, cookie: b.cookie, start: time.Now()}
	if count {
		a.e, a.i, a.t, a.fail = e, i, t, p.failStatus
	}
	if p.sessions != nil {
		create := p.opts.sticky.rule.Create
		a.learn = &learning{sessions: p.sessions, create: create, r: learnRequest(create, r), session: b.session, id: e.bal.ID(i)}
	}
	if a.repl, _ = ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer); a.repl != nil {
		a.lat0, a.had.lat = upstreamLatency(a.repl)
		_, a.had.err = a.repl.Get(errorPlaceholder)
	}
	if vars != nil {
		vars[p.attemptVar] = a
	}
	if count {
		e.stats[i].inflight.Add(1)
	}
	a.ctx, a.remote = ctx, r.RemoteAddr
	p.conns.add(a)
	a.stop = context.AfterFunc(ctx, a.end)
}

// upstreamLatency reads Caddy's upstream latency placeholder.
func upstreamLatency(repl *caddy.Replacer) (time.Duration, bool) {
	v, ok := repl.Get(latencyPlaceholder)
	d, isDur := v.(time.Duration)
	return d, ok && isDur
}

// failingStatus reports whether the upstream answered this try with one of
// the policy's fail_status. Caddy sets the status placeholder soon after the
// latency one, before it writes the response or tries again, so once the
// latency is this try's, so is the status (unless the client leaves in the
// microseconds between the two: then the status read is none or an earlier
// try's).
func (a *attempt) failingStatus() bool {
	if len(a.fail) == 0 {
		return false
	}
	v, _ := a.repl.Get(statusPlaceholder)
	code, ok := v.(int)
	if !ok {
		return false
	}
	for _, f := range a.fail {
		if caddyhttp.StatusCodeMatches(code, f) {
			return true
		}
	}
	return false
}

// end runs when the request's context is done.
func (a *attempt) end() { a.finish(false) }

// finish reports the try's end once, however many paths reach it; retried
// says that Caddy is retrying the request.
func (a *attempt) finish(retried bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		return
	}
	a.ended = true
	// Last, when everything below is done: a Select of the connection's
	// next request that finds the try waits for it (see connTries).
	defer a.conns.done(a)
	lat, answered, failedReq := a.outcome(retried)
	if a.learn != nil && answered && !retried {
		a.learn.learn(a.repl)
	}
	if a.e == nil {
		return
	}
	// Last, when the try's outcome is counted: a reader that sees no try
	// in flight sees its outcome.
	defer a.e.stats[a.i].inflight.Add(-1)
	switch {
	case answered:
		failed := retried || a.failingStatus()
		core.Done(a.e.bal, a.i, a.t, lat, failed)
		if failed {
			a.e.stats[a.i].failures.Add(1)
		} else {
			a.e.stats[a.i].observe(lat)
		}
	case retried || failedReq:
		core.Done(a.e.bal, a.i, a.t, time.Since(a.start), true)
		a.e.stats[a.i].failures.Add(1)
	default:
		// Cancelled before an answer: the upstream took at least this
		// long, which lowers no estimate.
		d := time.Since(a.start)
		if est := a.e.bal.Latency(a.i); est > d {
			d = est
		}
		core.Done(a.e.bal, a.i, a.t, d, false)
	}
}

// outcome reads how the try went: its latency and whether the upstream
// answered it, and whether the request ended with an error (see attempt).
func (a *attempt) outcome(retried bool) (lat time.Duration, answered, failedReq bool) {
	if a.repl != nil {
		// A new value of the placeholder is this try's: Caddy sets it
		// when the upstream's response headers arrive.
		if d, ok := upstreamLatency(a.repl); ok && (!a.had.lat || d != a.lat0) {
			lat, answered = d, true
		}
		_, failedReq = a.repl.Get(errorPlaceholder)
		failedReq = failedReq && !a.had.err
	} else {
		lat, answered = time.Since(a.start), !retried
	}
	return lat, answered, failedReq
}
