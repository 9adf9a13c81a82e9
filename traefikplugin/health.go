package traefikplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lbpack/lbpack/core"
)

// startHealthChecks starts one checker per server; each stops when ctx ends.
func (p *Plugin) startHealthChecks(ctx context.Context) {
	client := &http.Client{Transport: p.tr, Timeout: p.s.healthTimeout}
	if !p.s.health.follow {
		client = &http.Client{Transport: p.tr, Timeout: p.s.healthTimeout, CheckRedirect: redirectAnswers}
	}
	for i, t := range p.s.targets {
		p.checks.Add(1)
		go p.watch(ctx, client, i, healthURL(t, &p.s.health))
	}
}

// redirectAnswers is a health check's CheckRedirect without
// followRedirects: a redirect is an answer, and the server is up. (A
// function literal assigned to the field after the client is built fails
// under yaegi v0.16.1 when the client calls it.)
func redirectAnswers(req *http.Request, via []*http.Request) error { return http.ErrUseLastResponse }

// healthURL is the URL that checks the server at base: its path with the
// check's path and query appended, its scheme and port unless the check
// has its own.
func healthURL(base *url.URL, h *healthSettings) string {
	u := *base
	u.Path = trimSlash(u.Path) + h.path.Path
	u.RawPath = ""
	u.RawQuery = h.path.RawQuery
	if h.scheme != "" {
		u.Scheme = h.scheme
	}
	if h.port != "" {
		u.Host = net.JoinHostPort(u.Hostname(), h.port)
	}
	return u.String()
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// watch checks server i at once, then every interval (unhealthyInterval
// while it is down), until ctx ends (noticed within a tenth of a second).
func (p *Plugin) watch(ctx context.Context, client *http.Client, i int, target string) {
	defer p.checks.Done()
	h := &p.s.health
	for {
		healthy, why := probe(ctx, client, target, h)
		if ctx.Err() != nil {
			return // the middleware is gone; its verdict no longer matters
		}
		p.setHealth(i, healthy, why)
		wait := h.interval
		if !healthy {
			wait = h.unhealthy
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// sleep waits for d, in steps of at most a tenth of a second, and reports
// false as soon as ctx ends. Not a select on a timer and ctx.Done():
// yaegi v0.16.1 keeps a select statement's cases in the statement, shared
// by every goroutine running it, so the watchers of all servers would wait
// on each other's timers.
func sleep(ctx context.Context, d time.Duration) bool {
	end := time.Now().Add(d)
	for ctx.Err() == nil {
		left := time.Until(end)
		if left <= 0 {
			return true
		}
		if left > 100*time.Millisecond {
			left = 100 * time.Millisecond
		}
		time.Sleep(left)
	}
	return false
}

// probe reports whether one request for target, as h says, answers with
// a healthy status in time, and why not, or the status it got: "status
// 503", "connection refused", "timeout".
func probe(ctx context.Context, client *http.Client, target string, h *healthSettings) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, h.method, target, nil)
	if err != nil {
		return false, err.Error()
	}
	for k, v := range h.header {
		req.Header[k] = v
	}
	if h.hostname != "" {
		req.Host = h.hostname
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, probeError(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	resp.Body.Close()
	c := resp.StatusCode
	healthy := c >= 200 && c < 400
	if h.status != 0 {
		healthy = c == h.status
	}
	return healthy, fmt.Sprintf("status %d", c)
}

// probeError says briefly why a check or a request got no answer: the
// kind of network error, or the TLS error (an x509 error says what is wrong
// with the server's certificate, which is what its user has to fix).
func probeError(err error) string {
	var ne net.Error
	msg := err.Error()
	switch {
	case strings.Contains(msg, "x509: "):
		return msg[strings.Index(msg, "x509: "):]
	case strings.Contains(msg, "tls: "):
		return msg[strings.Index(msg, "tls: "):]
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "connection reset"):
		return "connection reset"
	}
	return err.Error()
}

// events is where health transitions are logged: one line each, with no
// timestamp of its own. Traefik gives a plugin two levels, DEBUG (its
// standard output) and ERROR (the log package, whose writer the interpreter
// points at Traefik's error log); transitions go to ERROR, the one Traefik
// shows by default, so that "down" and "up" are seen alike.
var events = log.New(log.Writer(), "", 0)

// setHealth records server i's health; a change rebuilds the balancer with
// the unhealthy servers marked down (so hash keys of the others stay put),
// keeping every server's runtime state, and is logged with why.
func (p *Plugin) setHealth(i int, healthy bool, why string) {
	sh := p.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.unhealth[i] == !healthy {
		return
	}
	sh.unhealth[i] = !healthy
	backends := make([]core.Backend, len(p.s.balancer.Backends))
	copy(backends, p.s.balancer.Backends)
	for k := range backends {
		if sh.unhealth[k] {
			backends[k].Down = true
		}
	}
	old := p.bal.Load().(*balancer)
	b, err := old.Update(backends)
	if err != nil {
		// Cannot happen: only Down changed, and New accepted the rest.
		events.Printf("lbpack middleware %q: health update: %v", p.name, err)
		return
	}
	p.bal.Store(bind(b, old.failed))
	state := "down"
	if healthy {
		// Back from down: a server with a slow start ramps up again.
		b.Recover(i)
		state = "up"
	}
	events.Printf("lbpack middleware %q: server %s is %s (%s)", p.name, p.s.targets[i].Redacted(), state, why)
	if healthy {
		rearmFailures(sh, i)
	}
}

// logFailure logs, at ERROR, a request to server i that got no answer
// because of err: once per server and cause (see probeError), again after
// the health check has found the server up. A request the client gave up
// on says nothing about the server.
func logFailure(p *Plugin, i int, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	why := probeError(err)
	if _, seen := p.sh.logged.LoadOrStore(failureKey{i, why}, true); seen {
		return
	}
	events.Printf("lbpack middleware %q: server %s: no answer: %v", p.name, p.s.targets[i].Redacted(), err)
}

// failureKey is a logged failure: a server's and its cause.
type failureKey struct {
	server int
	why    string
}

// rearmFailures forgets the failures logged for server i.
func rearmFailures(sh *shared, i int) {
	sh.logged.Range(rearm(sh, i))
}

// rearm returns the Range function that drops server i's keys.
func rearm(sh *shared, i int) func(k, v interface{}) bool {
	return func(k, v interface{}) bool {
		if k.(failureKey).server == i {
			sh.logged.Delete(k)
		}
		return true
	}
}
