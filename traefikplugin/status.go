package traefikplugin

import (
	"context"
	"net/http"
)

// statusCheck is server i's reverse proxy's ModifyResponse, when some
// statuses count as the server's failure (failStatus) or sticky sessions
// read or write the answer. An answer with a failStatus status is marked
// for its request, which ServeHTTP takes after the proxy returns
// (failedStatus), as it takes a transport error; the answer itself goes to
// the client unchanged. Any other answer costs one look at the table, and
// teaches learn's table when it learns from the header (nginx learns from
// no failed try). The sticky cookie goes into every answer, before the
// server's own cookies: here, and not on the response writer before the
// try, since the proxy clears the writer's headers after passing on an
// informational answer (100 Continue).
func statusCheck(p *Plugin, i int) func(*http.Response) error {
	fail := p.s.failStatus
	ss := p.sticky
	learns := ss != nil && ss.learns() && ss.header
	return func(res *http.Response) error {
		if c := res.StatusCode; c >= 0 && c < len(fail) && fail[c] {
			markStatus(p, res.Request.Context())
		} else if learns {
			learn(ss, p.sessions, res.Request, res.Header, p.bal.Load().(*balancer).Balancer, i)
		}
		if ss != nil && ss.rule.Cookie != nil {
			if a, ok := res.Request.Context().Value(attemptKey{}).(*attempt); ok {
				setStickyCookie(res.Header, ss.rule.Cookie, a.b.Balancer, i, a.picked)
			}
		}
		return nil
	}
}

// markStatus marks the request whose context is ctx as answered with a
// failing status. The mark is keyed by the context's Done channel: the
// reverse proxy hands ModifyResponse the incoming request's own context
// whenever that can be cancelled (every request a server receives), and a
// context Traefik derives from it shares the channel. A request without one
// cannot be marked, and its answer counts as it did before failStatus. The
// mark goes when the request ends, in case the proxy's copy of the body
// broke off (a panic) before ServeHTTP could take it.
func markStatus(p *Plugin, ctx context.Context) {
	done := ctx.Done()
	if done == nil {
		return
	}
	p.errs.Store(done, true)
	p.pending.Add(1)
	context.AfterFunc(ctx, func() { dropStatus(p, done) })
}

// failedStatus takes the mark markStatus left for request r's try, and
// reports whether there was one.
func failedStatus(p *Plugin, r *http.Request) bool {
	if p.pending.Load() == 0 {
		return false
	}
	done := r.Context().Done()
	if done == nil {
		return false
	}
	return dropStatus(p, done)
}

// dropStatus removes the mark keyed by done, reporting whether there was one.
func dropStatus(p *Plugin, done <-chan struct{}) bool {
	if _, ok := p.errs.LoadAndDelete(done); ok {
		p.pending.Add(-1)
		return true
	}
	return false
}
