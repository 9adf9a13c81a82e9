// Package traefikplugin is lbpack as a Traefik v3 middleware plugin. A
// Traefik middleware cannot replace Traefik's own load balancer; the
// plugin works beside it in one of two modes. In proxy mode (this file) it
// proxies by itself: it picks one of its own servers with an lbpack
// strategy and forwards the request there; the router's service is
// noop@internal and next is never called. In steer mode (steer.go) it picks
// a server and steers the router's own service, a Traefik loadBalancer with
// a sticky cookie, to it, and Traefik proxies.
//
// Traefik interprets the package with yaegi, so it uses the standard library
// only and keeps the per-request path short: one O(1) pick and a few calls.
package traefikplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// Plugin is the middleware: a balancer over its servers and one reverse
// proxy per server.
//
// Traefik interprets it, and under the interpreter a method call costs
// about four plain function calls, so the request path below is made of
// functions, and of the few methods the balancer's API has.
type Plugin struct {
	name    string
	s       *settings
	sh      *shared       // the balancer, its health, and what survives reloads
	bal     *atomic.Value // sh.bal: *balancer; replaced when active health changes
	proxies []http.Handler
	tr      *http.Transport
	buffers *bufferPool // the proxies' copy buffers, shared
	// What the request path reads of the settings, flat.
	keyKind  int
	table    bool           // no key to read: serveTable serves (the counted strategies go to serveCounted first)
	keepBody bool           // retries are allowed: a request's body is kept for them
	track    bool           // Done on every request (the balancer counts requests in flight or times them)
	failures bool           // servers have maxFails: failures and the successes after them go to Done
	timed    bool           // Done needs the request's latency (fair)
	counted  bool           // track with no key, which serveCounted serves (not url_hash's bounded mode, which counts over all servers and hashes)
	checks   sync.WaitGroup // the health checkers running
	// The transport errors the proxies' error handlers report, by response
	// writer (see writerKey), until their ServeHTTP takes them. pending
	// counts them, so that a request finds out whether its try failed with
	// one atomic load (a pointer: under the interpreter, the address of a
	// field costs an allocation on every use).
	errs    sync.Map
	pending *atomic.Int64
	// Sticky sessions (sticky.go): the settings, nil when off, and learn's
	// session table, which outlives reloads with the balancer's state.
	sticky   *stickySettings
	sessions *sticky.Sessions
}

// balancer is the balancer of the moment, and what the request path knows
// of it. A request calls core's plain functions on it (core.Take, Pick,
// Done): under the interpreter a method call costs several function calls,
// a call through a bound method value about half a method call.
type balancer struct {
	*core.Balancer
	fails func(i int) int64 // bound: settle's rare look costs less so
	// failed is true once a failure has gone to Done. Until then no server
	// can have failures (the balancer is this middleware's own), so a
	// success needs no look at the server's failure count. Kept here, the
	// flag costs the request path no atomic load of its own.
	failed bool
}

func bind(b *core.Balancer, failed bool) *balancer {
	return &balancer{Balancer: b, fails: b.Fails, failed: failed}
}

// markFailed records that a failure has gone to Done.
func (p *Plugin) markFailed() {
	p.sh.mu.Lock()
	if b := p.bal.Load().(*balancer); !b.failed {
		p.bal.Store(bind(b.Balancer, true))
	}
	p.sh.mu.Unlock()
}

// attempt is one proxied request: what it goes through, and what it learns
// from its reverse proxy.
type attempt struct {
	p     *Plugin
	b     *balancer
	req   *http.Request // the request as proxied
	key   string        // the hash key, for a retry's pick
	i     int           // the server of the current try
	n     *atomic.Int64 // the try's count in flight, when its pick handed it back (core.Take)
	t     core.Ticket   // the try's ticket
	err   error         // the transport error of the last try, if any
	bad   bool          // the last try's answer has a failStatus status
	tried []bool        // servers already tried; made on the first retry
	id    string        // the request's sticky id, for every pick
	// picked is when the try's server was picked: the sticky cookie's
	// expires counts from it, as nginx's from its choice of the peer (the
	// answer's Date may be the server's, which Traefik passes on).
	picked time.Time
}

// attemptKey keys a sticky request's attempt in the context of the
// request the proxy sends, for statusCheck.
type attemptKey struct{}

// untried is the availability predicate for a retry: a request never goes
// to the same server twice.
func (a *attempt) untried(i int) bool { return !a.tried[i] }

// New builds the middleware from cfg. Traefik calls it for each router that
// uses the middleware and again on every configuration reload; ctx ends
// when the middleware is replaced, which stops health checks and closes idle
// connections. The balancer's runtime state outlives the middleware: the
// next New of the same name takes it over (see keep).
func New(ctx context.Context, next http.Handler, cfg *Config, name string) (http.Handler, error) {
	s, err := parse(cfg)
	if err != nil {
		return nil, fmt.Errorf("lbpack middleware %q: %v", name, err)
	}
	warnReach(name, s)
	sh, err := keep(name, s)
	if err != nil {
		return nil, fmt.Errorf("lbpack middleware %q: %v", name, coreError(err))
	}
	traits, _ := core.TraitsOf(s.balancer.Strategy, s.balancer.HashMode) // parse checked the strategy
	p := &Plugin{
		name:     name,
		s:        s,
		sh:       sh,
		bal:      &sh.bal,
		tr:       newTransport(s),
		buffers:  &bufferPool{free: make(chan []byte, 64)},
		keyKind:  s.keyKind,
		table:    !traits.Key,
		keepBody: s.retries > 0,
		track:    s.tracked(),
		failures: s.balancer.Backends[0].MaxFails > 0,
		timed:    traits.Times,
		counted:  s.tracked() && s.keyKind == keyNone,
		pending:  new(atomic.Int64),
		sticky:   s.sticky,
		sessions: sh.sessions,
	}
	if s.steer {
		go p.closeOnDone(ctx)
		if p.sticky != nil {
			return &stickySteerer{st: newSteerer(p, next)}, nil
		}
		if s.unreadAnswers {
			return newBlindSteerer(p, next), nil
		}
		return newSteerer(p, next), nil
	}
	for i, t := range s.targets {
		p.proxies = append(p.proxies, p.newProxy(i, t))
	}
	if s.healthPath != "" {
		p.startHealthChecks(ctx)
	}
	go p.closeOnDone(ctx)
	if p.sticky != nil {
		return &stickyProxy{p: p}, nil
	}
	return p, nil
}

// stickyProxy is the middleware in proxy mode with sticky sessions on. A
// type of its own, so that the plain ServeHTTP's frame (which the
// interpreter allocates whole on every request) holds nothing of sticky's.
type stickyProxy struct{ p *Plugin }

// ServeHTTP serves a request with its sticky id (see serveSticky).
func (sp *stickyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { serveSticky(w, r, sp.p) }

// closeOnDone gives up the middleware's hold on its name's state (see
// release) and releases idle connections once the middleware is replaced,
// after the health checkers have stopped (a check finishing later would
// return its connection to the pool).
func (p *Plugin) closeOnDone(ctx context.Context) {
	<-ctx.Done()
	release(p.sh)
	p.checks.Wait()
	p.tr.CloseIdleConnections()
}

// newTransport is the one transport all of a middleware's servers share,
// with pools sized for a proxy rather than a client.
func newTransport(s *settings) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // never an outbound proxy from the environment
		DialContext:           dialer(&net.Dialer{Timeout: s.connectTimeout, KeepAlive: 30 * time.Second}),
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   s.connectTimeout,
		ResponseHeaderTimeout: s.responseTimeout,
		TLSClientConfig:       s.tls,
		ExpectContinueTimeout: time.Second,
	}
}

// dialer wraps d.DialContext in a closure: yaegi cannot store a compiled
// type's method value in a struct field.
func dialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
}

// newProxy builds server i's reverse proxy, to target. It is a function of its
// own so that each proxy's closure captures its own target (yaegi shares
// loop variables between closures).
//
// The director is the standard library's (compiled, so it costs the
// interpreter nothing): it joins the target's path, keeps the client's Host,
// and the proxy appends the peer to X-Forwarded-For. Traefik's entry point
// has already set X-Forwarded-Proto, -Host, -Port and X-Real-Ip on the
// request, and they pass through.
func (p *Plugin) newProxy(i int, target *url.URL) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = p.tr
	rp.BufferPool = p.buffers
	rp.FlushInterval = p.s.flushInterval
	rp.ErrorHandler = proxyError(p, i)
	if p.s.failStatus != nil || p.sticky != nil && (p.sticky.rule.Cookie != nil || p.sticky.header) {
		rp.ModifyResponse = statusCheck(p, i)
	}
	if !p.s.passHost {
		direct := rp.Director
		rp.Director = func(r *http.Request) {
			direct(r)
			r.Host = "" // the target's host:port, from the URL
		}
	}
	return rp
}

// bufferPool lends the reverse proxies their 32 KiB copy buffers. Without it
// every proxied response allocates one, and in a real Traefik that garbage
// cost more CPU than the whole interpreted pick. A channel (not sync.Pool)
// keeps it plain for the interpreter and caps what it holds: 64 buffers, 2 MiB.
type bufferPool struct {
	free chan []byte
	mu   sync.Mutex // around every send and receive (see Put)
}

// Get returns a free buffer, or a new one.
func (bp *bufferPool) Get() []byte {
	var b []byte
	bp.mu.Lock()
	if len(bp.free) > 0 {
		b = <-bp.free
	}
	bp.mu.Unlock()
	if b == nil {
		b = make([]byte, 32*1024)
	}
	return b
}

// Put returns a buffer to the pool, or drops it when the pool is full.
// Get and Put use no select with a default: yaegi v0.16.1 keeps a select
// statement's cases, the value to send among them, in the statement,
// shared by the goroutines running it, so two Puts at once could both
// send one of their buffers, which two requests would then copy through
// together. Under the lock the length tested is the length at the send or
// receive, which so never blocks.
func (bp *bufferPool) Put(b []byte) {
	bp.mu.Lock()
	if len(bp.free) < cap(bp.free) {
		bp.free <- b
	}
	bp.mu.Unlock()
}

// proxyError returns server i's error handler. It hands a transport error
// back instead of answering, so that ServeHTTP can move on to another
// server: to p.errs under the response writer, where ServeHTTP finds it
// after the proxy returns (the handler runs on ServeHTTP's goroutine). The
// request carries nothing for it: a copy of the request with its attempt in
// the context would cost every request; this costs it one atomic load.
func proxyError(p *Plugin, i int) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		logFailure(p, i, r, err)
		if k := writerKey(w); k != nil {
			p.errs.Store(k, err)
			p.pending.Add(1)
			return
		}
		// A writer with no identity: the try ends here, unretried, and the
		// balancer hears of the failure now. (A tracked try's own end then
		// reports a success, which clears nothing: failures are cleared
		// only after a probe.)
		a := &attempt{p: p, b: p.bal.Load().(*balancer), req: r, i: i, err: err}
		settle(w, a)
		gatewayError(w, a)
	}
}

// writerKey identifies a response writer in p.errs: the writer itself, or,
// when that is not comparable, the writer yaegi's wrapper (a struct of
// funcs) holds for another interpreted plugin. nil when neither is usable.
func writerKey(w http.ResponseWriter) interface{} {
	v := reflect.ValueOf(w)
	if !v.IsValid() || v.Comparable() {
		return w
	}
	if v.Kind() == reflect.Struct && v.NumField() > 0 {
		if f := v.Field(0); f.Kind() == reflect.Interface && !f.IsNil() && f.CanInterface() && f.Elem().Comparable() {
			return f.Elem().Interface()
		}
	}
	return nil
}

// failure takes the transport error the error handler left for writer w,
// if any.
func failure(p *Plugin, w http.ResponseWriter) error {
	if p.pending.Load() == 0 {
		return nil
	}
	if k := writerKey(w); k != nil {
		if err, ok := p.errs.LoadAndDelete(k); ok {
			p.pending.Add(-1)
			return err.(error)
		}
	}
	return nil
}

// ServeHTTP picks a server and proxies the request to it. The interpreter
// allocates a call's room for every value of its function, whichever
// branch runs, so ServeHTTP only chooses among the three common ways, each
// a function of its own: requests the balancer counts in flight with no
// key to hash (least_conn, fair, maxConns), the table strategies'
// (smooth_wrr, gcd_wrr, round_robin), and the others'.
func (p *Plugin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.counted {
		if a := serveCounted(w, r, p); a != nil {
			retry(w, a, nil)
		}
	} else if p.table {
		serveTable(w, r, p)
	} else {
		serveKeyed(w, r, p)
	}
}

// serveTable serves a request under a table strategy that the balancer
// does not count in flight. The common case, one successful try, is kept
// to a few calls: the interpreter charges for each, and for each value it
// computes, so what is rare goes to other functions.
func serveTable(w http.ResponseWriter, r *http.Request, p *Plugin) {
	b := p.bal.Load().(*balancer)
	i, _, t := core.Take(b.Balancer, "") // no key: a table strategy, which counts nothing
	// The proxy sends no body when ContentLength is 0, so only then is
	// there none to keep for a retry. The tests are nested: the
	// interpreter computes a value for each part of a joined condition.
	if t == 0 {
		if i >= 0 {
			if r.ContentLength != 0 {
				if p.keepBody {
					serveOther(w, r, p, b, "", i, nil, t)
					return
				}
			}
			// try's untracked case, inline, since the call would cost as
			// much as the rest: a success while no failure was ever
			// reported ends here, with no attempt made (b.failed implies
			// p.failures).
			p.proxies[i].ServeHTTP(w, r)
			if p.pending.Load() != 0 || b.failed {
				end(w, r, p, b, "", i)
			}
			return
		}
	}
	serveOther(w, r, p, b, "", i, nil, t)
}

// serveKeyed is serveTable for the other strategies: the hash strategies,
// whose key it reads, random and weighted_random, and a hash strategy
// whose requests the balancer counts (bounded url_hash, maxConns), which
// go the general way.
func serveKeyed(w http.ResponseWriter, r *http.Request, p *Plugin) {
	b := p.bal.Load().(*balancer)
	key := ""
	if p.keyKind == keyURI && r.RequestURI != "" { // requestKey's common case, inline
		key = r.RequestURI
	} else if p.keyKind != keyNone {
		key = otherKey(p.s, r)
	}
	i, n, t := core.Take(b.Balancer, key)
	if t == 0 { // nested tests, as in serveTable
		if n == nil {
			if i >= 0 {
				if r.ContentLength != 0 {
					if p.keepBody {
						serveOther(w, r, p, b, key, i, n, t)
						return
					}
				}
				p.proxies[i].ServeHTTP(w, r)
				if p.pending.Load() != 0 || b.failed {
					end(w, r, p, b, key, i)
				}
				return
			}
		}
	}
	serveOther(w, r, p, b, key, i, n, t)
}

// serveCounted serves a request the balancer counts in flight under a
// strategy that hashes no key (least_conn, fair, the others with
// maxConns; a hash strategy's counted requests go the general way). Its
// common case (a server, no body to keep), one try, is here: core.Take
// picks the server, counts the request in flight and hands the count back,
// and the request's end, deferred (the reverse proxy aborts a response
// that breaks off midway with a panic, and the request must still end), is
// Add(-1) on that count, a call into compiled code, which costs the
// interpreter a fraction of a deferred call to core.Done. A ticket that is
// not 0 (fair's, which times its answers from the pick) goes to core.Done;
// a try that may have failed, or cleared failures, is reported before the
// end (countedEnd), and one that failed with a transport error comes back
// as an attempt, which ServeHTTP retries once the try has ended. A
// balancer that also counts over all its servers (least_conn from nine)
// hands no count back: its requests go the general way, ended by Done.
func serveCounted(w http.ResponseWriter, r *http.Request, p *Plugin) *attempt {
	b := p.bal.Load().(*balancer)
	i, n, t := core.Take(b.Balancer, "")
	if n == nil || r.ContentLength != 0 && p.keepBody {
		serveOther(w, r, p, b, "", i, n, t)
		return nil
	}
	defer n.Add(-1)
	p.proxies[i].ServeHTTP(w, r)
	if p.pending.Load() == 0 && !b.failed { // failure's first test: its call costs ten times more
		if t != 0 {
			core.Done(b.Balancer, i, t, core.SincePick, false)
		}
		return nil
	}
	return countedEnd(w, r, p, b, i, t)
}

// countedEnd reports the end of a counted try, to server i with ticket t,
// when it may have failed (a transport error, or an answer with a
// failStatus status) or cleared failures, and returns the attempt to retry
// when it failed with a transport error.
func countedEnd(w http.ResponseWriter, r *http.Request, p *Plugin, b *balancer, i int, t core.Ticket) *attempt {
	a := &attempt{p: p, b: b, req: r, i: i, err: failure(p, w)}
	a.bad = a.err == nil && failedStatus(p, r)
	core.Done(b.Balancer, i, t, core.SincePick, verdict(a))
	if a.err == nil {
		return nil
	}
	return a
}

// serveSticky serves a request when sticky sessions are on: the pick, and
// a retry's, honours its sticky id; the answer carries the cookie (cookie
// mode: statusCheck puts it in the server's answer, finding the attempt in
// the request's context, and gatewayError in the middleware's own); and
// its end teaches the session table (learn mode).
func serveSticky(w http.ResponseWriter, r *http.Request, p *Plugin) {
	b := p.bal.Load().(*balancer)
	key := ""
	if p.keyKind != keyNone {
		key = requestKey(p.s, r)
	}
	id, _ := sticky.RequestID(&p.sticky.rule, r, p.sessions, time.Now())
	a := &attempt{p: p, b: b, req: r, key: key, id: id}
	a.i, a.t = core.Pick(b.Balancer, key, core.Filter{Sticky: a.id})
	if a.i < 0 {
		unavailable(w)
		return
	}
	a.picked = time.Now()
	if p.sticky.rule.Cookie != nil {
		a.req = r.WithContext(context.WithValue(r.Context(), attemptKey{}, a))
	}
	if p.keepBody && r.Body != nil && r.Body != http.NoBody {
		serveBody(w, a)
	} else if !try(w, a) {
		retry(w, a, nil)
	}
	if p.sticky.learns() && !p.sticky.header && a.err == nil && !a.bad {
		learn(p.sticky, p.sessions, r, w.Header(), a.b.Balancer, a.i)
	}
}

// serveOther answers a request with no server to go to, and proxies the
// others that the common ways leave: one that has a body to keep for
// retries, one whose try must be reported whatever its outcome (its pick
// counted it, or its server has failures to clear). i, n and t are the
// pick's (core.Take).
func serveOther(w http.ResponseWriter, r *http.Request, p *Plugin, b *balancer, key string, i int, n *atomic.Int64, t core.Ticket) {
	if i < 0 {
		unavailable(w)
		return
	}
	a := &attempt{p: p, b: b, req: r, key: key, i: i, n: n, t: t}
	if p.keepBody && r.Body != nil && r.Body != http.NoBody {
		serveBody(w, a)
		return
	}
	if !try(w, a) {
		retry(w, a, nil)
	}
}

// end finishes an untracked first try, to server i, that failed or may
// have cleared failures, and retries a failed one.
func end(w http.ResponseWriter, r *http.Request, p *Plugin, b *balancer, key string, i int) {
	a := &attempt{p: p, b: b, req: r, key: key, i: i}
	a.err = failure(p, w)
	a.bad = a.err == nil && failedStatus(p, r)
	if !settle(w, a) {
		retry(w, a, nil)
	}
}

// try proxies the request to server a.i once and reports whether it got an
// answer; a transport error is left in a.err.
func try(w http.ResponseWriter, a *attempt) bool {
	p := a.p
	if a.n == nil && a.t == 0 {
		return tryUntracked(w, a)
	}
	// Deferred: the reverse proxy aborts a response that breaks off midway
	// with a panic (http.ErrAbortHandler), and the request must still end.
	defer finish(a)
	p.proxies[a.i].ServeHTTP(w, a.req)
	if p.pending.Load() != 0 { // failure's first test: its call costs ten times more
		a.err = failure(p, w) // before the deferred finish reads it
		a.bad = a.err == nil && failedStatus(p, a.req)
	}
	return a.err == nil
}

// tryUntracked is try when nothing about the try needs reporting unless it
// fails, in a frame of its own.
func tryUntracked(w http.ResponseWriter, a *attempt) bool {
	a.p.proxies[a.i].ServeHTTP(w, a.req)
	a.err = failure(a.p, w)
	a.bad = a.err == nil && failedStatus(a.p, a.req)
	return settle(w, a)
}

// settle ends an untracked try and reports whether it got an answer.
// Nothing counts requests in flight, so the balancer hears of the try only
// when it failed, or succeeded after failures (which clears them, as nginx
// does after a probe).
func settle(w http.ResponseWriter, a *attempt) bool {
	p := a.p
	if a.err == nil && !a.bad && (!p.failures || !p.bal.Load().(*balancer).failed || a.b.fails(a.i) == 0) {
		return true
	}
	if a.err == nil && !a.bad && writerKey(w) == nil {
		// The error handler could not hand this try's error back, if it
		// had one, and then settled it itself: report nothing.
		return true
	}
	finish(a)
	return a.err == nil
}

// finish reports the end of a try to the balancer: the common end, a
// success with no latency to report, here; the others in ended (the
// interpreter gives a call room for every value of its function).
func finish(a *attempt) {
	if a.n != nil {
		a.n.Add(-1)
	}
	if a.err == nil && !a.bad && !a.p.timed {
		if a.t != 0 {
			core.Done(a.b.Balancer, a.i, a.t, 0, false)
		}
		return
	}
	ended(a)
}

// ended is finish for a try that failed or whose latency counts, timed
// from its pick (a try with no ticket, which the error handler settles
// itself, has none to time). A request the client gave up on says nothing
// about the server, unless the server answered it with a failStatus status.
func ended(a *attempt) {
	lat := core.SincePick
	if a.t == 0 {
		lat = 0
	}
	core.Done(a.b.Balancer, a.i, a.t, lat, verdict(a))
}

// verdict reports whether a's try counts as a failure, and records the
// balancer's first failure (see markFailed).
func verdict(a *attempt) bool {
	failed := a.bad || a.err != nil && a.req.Context().Err() == nil
	if failed && a.p.failures && !a.b.failed {
		a.p.markFailed()
	}
	return failed
}

// serveBody proxies a request that has a body: streamed to the server as
// it arrives, with a copy of what has been read of it, up to the limit, so
// that a retry can send it again (see replay).
func serveBody(w http.ResponseWriter, a *attempt) {
	a.req = a.req.WithContext(a.req.Context()) // a copy, whose Body is ours to replace
	body := newReplay(a.req.Body, replayLimit(a.p.s, a.req.Method))
	a.req.Body = body.view()
	if !try(w, a) {
		retry(w, a, body)
	}
}

// retry follows nginx's proxy_next_upstream after server a.i failed: other
// servers, each at most once, up to the configured number of retries.
func retry(w http.ResponseWriter, a *attempt, body *replay) {
	req := a.req
	a.tried = make([]bool, a.b.Len())
	for n := 0; ; n++ {
		if n >= a.p.s.retries || req.Context().Err() != nil || !retryable(req.Method, a.err) {
			gatewayError(w, a)
			return
		}
		if body != nil && !body.replayable() {
			gatewayError(w, a) // read past what was kept of it
			return
		}
		a.tried[a.i] = true
		next, t := core.Pick(a.b.Balancer, a.key, core.Filter{Allow: a.untried, Sticky: a.id})
		if next < 0 {
			gatewayError(w, a)
			return
		}
		a.i, a.t = next, t
		a.n = nil // not in the tuple: yaegi cannot assign an untyped nil there
		a.err = nil
		if a.p.sticky != nil {
			a.picked = time.Now()
		}
		if body != nil {
			req.Body = body.view()
		}
		if try(w, a) {
			return
		}
	}
}

// retryable follows nginx's proxy_next_upstream: an error or timeout moves
// the request on, but POST, PATCH and LOCK only while the request has not
// reached the server (the connection was never made).
func retryable(method string, err error) bool {
	switch method {
	case http.MethodPost, http.MethodPatch, "LOCK":
		var op *net.OpError
		return errors.As(err, &op) && op.Op == "dial"
	}
	return true
}

func unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "no backend available", http.StatusServiceUnavailable)
}

// gatewayError answers a request whose last try, to server a.i, failed:
// with the sticky cookie naming that server, as nginx's 502 has it.
func gatewayError(w http.ResponseWriter, a *attempt) {
	if ss := a.p.sticky; ss != nil && ss.rule.Cookie != nil {
		setStickyCookie(w.Header(), ss.rule.Cookie, a.b.Balancer, a.i, a.picked)
	}
	badGateway(w, a.err)
}

func badGateway(w http.ResponseWriter, err error) {
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		http.Error(w, "backend timed out", http.StatusGatewayTimeout)
		return
	}
	http.Error(w, "bad gateway", http.StatusBadGateway)
}
