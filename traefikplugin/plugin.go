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
	mu       sync.Mutex // serialises health changes
	unhealth []bool     // by server, under mu
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

// closeOnDone releases idle connections once the middleware is replaced.
func (p *Plugin) closeOnDone(ctx context.Context) {
	<-ctx.Done()
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
// own so that each proxy's closures capture their own target (yaegi shares
// loop variables between closures).
func (p *Plugin) newProxy(target *url.URL) http.Handler {
	passHost := p.s.passHost
	return &httputil.ReverseProxy{
		Transport: p.tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// Keep the chain of proxies before us, then add our peer.
			if prior := pr.In.Header["X-Forwarded-For"]; len(prior) > 0 {
				pr.Out.Header["X-Forwarded-For"] = prior
			}
			pr.SetXForwarded()
			// Traefik's entry point has set these from the original request.
			if v := pr.In.Header.Get("X-Forwarded-Host"); v != "" {
				pr.Out.Header.Set("X-Forwarded-Host", v)
			}
			if v := pr.In.Header.Get("X-Forwarded-Proto"); v != "" {
				pr.Out.Header.Set("X-Forwarded-Proto", v)
			}
			if passHost {
				pr.Out.Host = pr.In.Host
			}
		},
		ErrorHandler: proxyError,
	}
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

// ServeHTTP picks a server and proxies the request to it, moving on to
// other servers after connection errors and timeouts as nginx does.
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
	var body []byte
	retries := p.s.retries
	if retries > 0 && r.Body != nil && r.Body != http.NoBody {
		if body, err = p.bufferBody(req); err != nil {
			retries = 0 // too large to replay, or unreadable: one try only
		}
	}
	for try := 0; ; try++ {
		if body != nil {
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		start := time.Now()
		b.Start(i)
		p.proxies[i].ServeHTTP(w, req)
		failed := a.err != nil && r.Context().Err() == nil
		b.Done(i, time.Since(start), failed)
		if a.err == nil {
			return
		}
		if !failed || try >= retries || !retryable(r.Method, a.err) {
			badGateway(w, a.err)
			return
		}
		if a.tried == nil {
			a.tried = make([]bool, b.Len())
		}
		a.tried[i] = true
		a.err = nil
		if i, err = b.PickFunc(key, a.untried); err != nil {
			badGateway(w, nil)
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
