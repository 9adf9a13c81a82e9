package caddyplugin

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// attempt is one try of a request against one upstream, from Select to its
// end. Every attempt calls the balancer's Start once and Done exactly once.
//
// What is measured: Caddy hands a selection policy neither the end of an
// attempt nor its duration, so the attempt ends at whichever comes first:
//   - the next Select for the same request (Caddy is retrying: this attempt
//     failed, and its duration includes lb_try_interval's wait), or
//   - the end of the request (its context is cancelled when Caddy's handler
//     chain returns): the duration runs from the pick to the last byte
//     written to the client, so it includes the upstream's connect, its time
//     to first byte and the streaming of the response body. The attempt
//     counts as failed when Caddy recorded no upstream status code for it.
type attempt struct {
	e     *poolEntry
	i     int
	start time.Time
	repl  *caddy.Replacer
	done  atomic.Bool
	stop  func() bool // unregisters the context callback
}

// endPrevious ends the request's previous attempt, if any: a second Select
// for one request is Caddy retrying after that attempt failed. It runs
// before the pick, so that the retry sees the failed attempt gone.
func (p *policy) endPrevious(r *http.Request) {
	if prev, ok := caddyhttp.GetVar(r.Context(), p.attemptVar).(*attempt); ok {
		prev.stop()
		prev.finish(true)
	}
}

// startAttempt reports a pick to the balancer and arranges for its end.
func (p *policy) startAttempt(e *poolEntry, i int, r *http.Request) {
	ctx := r.Context()
	a := &attempt{e: e, i: i, start: time.Now()}
	a.repl, _ = ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	e.bal.Start(i)
	caddyhttp.SetVar(ctx, p.attemptVar, a)
	a.stop = context.AfterFunc(ctx, a.ended)
}

// ended runs when the request's context is done.
func (a *attempt) ended() {
	failed := false
	if a.repl != nil {
		_, responded := a.repl.Get("http.reverse_proxy.status_code")
		failed = !responded
	}
	a.finish(failed)
}

// finish reports the attempt's end once, however many paths reach it.
func (a *attempt) finish(failed bool) {
	if !a.done.CompareAndSwap(false, true) {
		return
	}
	d := time.Since(a.start)
	a.e.bal.Done(a.i, d, failed)
	if failed {
		a.e.stats[a.i].failures.Add(1)
	} else {
		a.e.stats[a.i].observe(d)
	}
}
