// Package traefikplugin is lbpack as a Traefik v3 middleware plugin. A
// Traefik middleware cannot replace Traefik's own load balancer, so the
// plugin proxies by itself: it picks one of its own servers with an lbpack
// strategy and forwards the request there; the router's service is
// noop@internal and next is never called.
//
// Traefik interprets the package with yaegi, so it uses the standard library
// only and keeps the per-request path short: one O(1) pick and a few calls.
package traefikplugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lbpack/lbpack/core"
)

// Plugin is the middleware: a balancer over its servers and one reverse
// proxy per server.
type Plugin struct {
	name     string
	s        *settings
	bal      atomic.Value // *core.Balancer; replaced when active health changes
	proxies  []http.Handler
	tr       *http.Transport
	track    bool           // Start and Done on every request (the balancer uses them)
	timed    bool           // Done needs the request's latency (fair)
	checks   sync.WaitGroup // the health checkers running
	mu       sync.Mutex     // serialises health changes
	unhealth []bool         // by server, under mu
}

// attemptKey is the context key under which a request carries its attempt.
var attemptKey = new(int)

// attempt is what one proxied request learns from its reverse proxy.
type attempt struct {
	err   error  // the transport error of the last try, if any
	tried []bool // servers already tried; made on the first retry
}

// untried is the availability predicate for a retry: a request never goes
// to the same server twice.
func (a *attempt) untried(i int) bool { return !a.tried[i] }

// New builds the middleware from cfg. Traefik calls it for each router that
// uses the middleware and again on every configuration reload; ctx ends
// when the middleware is replaced, which stops health checks and closes idle
// connections.
func New(ctx context.Context, next http.Handler, cfg *Config, name string) (http.Handler, error) {
	s, err := parse(cfg)
	if err != nil {
		return nil, fmt.Errorf("lbpack middleware %q: %v", name, err)
	}
	b, err := core.New(s.balancer)
	if err != nil {
		return nil, fmt.Errorf("lbpack middleware %q: %v", name, err)
	}
	p := &Plugin{
		name:     name,
		s:        s,
		tr:       newTransport(s),
		track:    s.tracked(),
		timed:    s.balancer.Strategy == core.Fair,
		unhealth: make([]bool, len(s.targets)),
	}
	p.bal.Store(b)
	for _, t := range s.targets {
		p.proxies = append(p.proxies, p.newProxy(t))
	}
	if s.healthPath != "" {
		p.startHealthChecks(ctx)
	}
	go p.closeOnDone(ctx)
	return p, nil
}

// closeOnDone releases idle connections once the middleware is replaced,
// after the health checkers have stopped (a check finishing later would
// return its connection to the pool).
func (p *Plugin) closeOnDone(ctx context.Context) {
	<-ctx.Done()
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

// newProxy builds server target's reverse proxy. It is a function of its
// own so that each proxy's closure captures its own target (yaegi shares
// loop variables between closures).
//
// The director is the standard library's (compiled, so it costs the
// interpreter nothing): it joins the target's path, keeps the client's Host,
// and the proxy appends the peer to X-Forwarded-For. Traefik's entry point
// has already set X-Forwarded-Proto, -Host, -Port and X-Real-Ip on the
// request, and they pass through.
func (p *Plugin) newProxy(target *url.URL) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = p.tr
	rp.ErrorHandler = proxyError
	if !p.s.passHost {
		direct := rp.Director
		rp.Director = func(r *http.Request) {
			direct(r)
			r.Host = "" // the target's host:port, from the URL
		}
	}
	return rp
}

// proxyError hands a transport error to the request's attempt instead of
// answering, so that ServeHTTP can move on to another server.
func proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if a, ok := r.Context().Value(attemptKey).(*attempt); ok {
		a.err = err
		return
	}
	w.WriteHeader(http.StatusBadGateway)
}

// ServeHTTP picks a server and proxies the request to it. The common case,
// one successful try, is kept to a few calls: the interpreter charges
// for each.
func (p *Plugin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b := p.bal.Load().(*core.Balancer)
	key := ""
	if p.s.keyKind != keyNone {
		key = p.key(r)
	}
	i, err := b.Pick(key)
	if err != nil {
		unavailable(w)
		return
	}
	a := &attempt{}
	req := r.WithContext(context.WithValue(r.Context(), attemptKey, a))
	if p.s.retries > 0 && r.Body != nil && r.Body != http.NoBody {
		p.serveBody(w, req, b, key, i, a)
		return
	}
	if !p.try(w, req, b, i, a) {
		p.retry(w, req, b, key, i, a, nil)
	}
}

// try proxies the request to server i once and reports whether it got an
// answer; a transport error is left in a.err.
func (p *Plugin) try(w http.ResponseWriter, req *http.Request, b *core.Balancer, i int, a *attempt) bool {
	if !p.track {
		p.proxies[i].ServeHTTP(w, req)
		if a.err == nil {
			return true
		}
		b.Start(i) // the failure still counts toward maxFails
		b.Done(i, 0, req.Context().Err() == nil)
		return false
	}
	var start time.Time
	if p.timed {
		start = time.Now()
	}
	b.Start(i)
	// Deferred: the reverse proxy aborts a response that breaks off midway
	// with a panic (http.ErrAbortHandler), and the request must still end.
	defer p.done(b, i, start, a, req)
	p.proxies[i].ServeHTTP(w, req)
	return a.err == nil
}

// done reports the end of a try to the balancer. A request the client gave
// up on says nothing about the server.
func (p *Plugin) done(b *core.Balancer, i int, start time.Time, a *attempt, req *http.Request) {
	var took time.Duration
	if p.timed {
		took = time.Since(start)
	}
	b.Done(i, took, a.err != nil && req.Context().Err() == nil)
}

// serveBody proxies a request that has a body: kept in memory, up to the
// limit, so that a retry can send it again.
func (p *Plugin) serveBody(w http.ResponseWriter, req *http.Request, b *core.Balancer, key string, i int, a *attempt) {
	body, err := p.bufferBody(req)
	if err != nil {
		p.try(w, req, b, i, a) // too large to replay, or unreadable: one try
		if a.err != nil {
			badGateway(w, a.err)
		}
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if !p.try(w, req, b, i, a) {
		p.retry(w, req, b, key, i, a, body)
	}
}

// retry follows nginx's proxy_next_upstream after server i failed: other
// servers, each at most once, up to the configured number of retries.
func (p *Plugin) retry(w http.ResponseWriter, req *http.Request, b *core.Balancer, key string, i int, a *attempt, body []byte) {
	a.tried = make([]bool, b.Len())
	for n := 0; ; n++ {
		if n >= p.s.retries || req.Context().Err() != nil || !retryable(req.Method, a.err) {
			badGateway(w, a.err)
			return
		}
		a.tried[i] = true
		next, err := b.PickFunc(key, a.untried)
		if err != nil {
			badGateway(w, a.err)
			return
		}
		i = next
		a.err = nil
		if body != nil {
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		if p.try(w, req, b, i, a) {
			return
		}
	}
}

// bufferBody reads the request body into memory for replay, up to the
// limit. Beyond it the body is restored as it was and an error returned.
func (p *Plugin) bufferBody(req *http.Request) ([]byte, error) {
	limit := p.s.maxRetryBody
	if req.ContentLength > limit {
		return nil, errors.New("body too large to retry")
	}
	buf, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil || int64(len(buf)) > limit {
		req.Body = readCloser{io.MultiReader(bytes.NewReader(buf), req.Body), req.Body}
		if err == nil {
			err = errors.New("body too large to retry")
		}
		return nil, err
	}
	req.Body.Close()
	return buf, nil
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (rc readCloser) Close() error { return rc.c.Close() }

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

func badGateway(w http.ResponseWriter, err error) {
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		http.Error(w, "backend timed out", http.StatusGatewayTimeout)
		return
	}
	http.Error(w, "bad gateway", http.StatusBadGateway)
}
