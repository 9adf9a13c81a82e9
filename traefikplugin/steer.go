package traefikplugin

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// Steer mode: the middleware does not proxy. The router's service is a
// Traefik loadBalancer with a sticky cookie over the same servers; the
// middleware picks a server with its strategy, sets the service's sticky
// cookie on the request to that server's value and calls next, so that
// Traefik's own proxy forwards the request (its serversTransport, access
// log, metrics, health checks, streaming, and the middlewares after this
// one). Traefik's balancer honours a cookie that names a server it has up,
// and otherwise picks a server itself and writes its cookie into the
// answer: the middleware reads the answer's status, its time to the first
// byte, and that Set-Cookie, which it removes.

// Cookie formats: how a Traefik version writes a server's sticky cookie.
const (
	// formatSHA256 is Traefik v3.3.4 and later: the first 16 hex digits of
	// the SHA-256 of the server's URL as configured.
	formatSHA256 = "sha256"
	// formatFNV is Traefik v3.0.0 to v3.3.3: the server's name there is the
	// hex FNV-64a of its URL, and the cookie the FNV-64 of that name, in
	// hex without leading zeros.
	formatFNV = "fnv"
)

// cookieValue is the sticky cookie value Traefik gives the server whose
// URL is rawURL, in format.
func cookieValue(format, rawURL string) string {
	if format == formatFNV {
		name := fnv.New64a()
		name.Write([]byte(rawURL))
		h := fnv.New64()
		h.Write([]byte(hex.EncodeToString(name.Sum(nil))))
		return strconv.FormatUint(h.Sum64(), 16)
	}
	return sticky.TraefikValue(rawURL)
}

// parseMode reads mode, cookie and cookieFormat, and in steer mode refuses
// the proxy mode's settings, which Traefik's service and middlewares
// provide there (a setting left at its default is not the user's).
func (s *settings) parseMode(c *Config) error {
	switch c.Mode {
	case "", "proxy":
		if c.Cookie != "" {
			return fmt.Errorf("cookie %q: only in steer mode (mode: steer)", c.Cookie)
		}
		if c.CookieFormat != "" {
			return fmt.Errorf("cookieFormat %q: only in steer mode (mode: steer)", c.CookieFormat)
		}
		return nil
	case "steer":
	default:
		return fmt.Errorf("mode %q: want proxy or steer", c.Mode)
	}
	if c.Cookie == "" {
		return errors.New("cookie: steer mode needs the name of the service's sticky cookie (its loadBalancer.sticky.cookie.name)")
	}
	if err := (&http.Cookie{Name: c.Cookie, Value: "v"}).Valid(); err != nil {
		return fmt.Errorf("cookie %q: not a valid cookie name", c.Cookie)
	}
	switch c.CookieFormat {
	case "":
		s.format = formatSHA256
	case formatSHA256, formatFNV:
		s.format = c.CookieFormat
	default:
		return fmt.Errorf("cookieFormat %q: want sha256 (Traefik v3.3.4 and later) or fnv (Traefik v3.0.0 to v3.3.3)", c.CookieFormat)
	}
	d := CreateConfig()
	for _, o := range []struct {
		key, where string
		set        bool
	}{
		{"retries", "Traefik's retry middleware in front of this one", c.Retries != d.Retries},
		{"maxRetryBody", "the retry middleware's maxRequestBodyBytes", c.MaxRetryBody != d.MaxRetryBody},
		{"connectTimeout", "the service's serversTransport (forwardingTimeouts.dialTimeout)", c.ConnectTimeout != d.ConnectTimeout},
		{"responseTimeout", "the service's serversTransport (forwardingTimeouts.responseHeaderTimeout)", c.ResponseTimeout != d.ResponseTimeout},
		{"healthCheck", "the service's healthCheck", c.HealthCheck.Path != ""},
		{"passHostHeader", "the service's passHostHeader", c.PassHostHeader != d.PassHostHeader},
		{"tls", "the service's serversTransport", c.TLS.ServerName != "" || c.TLS.InsecureSkipVerify || len(c.TLS.RootCAs) > 0 || c.TLS.CertFile != "" || c.TLS.KeyFile != ""},
		{"flushInterval", "the service's responseForwarding.flushInterval", c.FlushInterval != d.FlushInterval},
	} {
		if o.set {
			return fmt.Errorf("%s: proxy mode only; in steer mode Traefik proxies, so set it in %s", o.key, o.where)
		}
	}
	s.steer = true
	s.cookie = c.Cookie
	return nil
}

// unread checks readAnswers false against the settings that need the
// answers, and turns off steer mode's default failStatus, which no answer
// read can apply.
func (s *settings) unread(c *Config, traits core.Traits) error {
	switch {
	case !s.steer:
		return errors.New("readAnswers false: steer mode only (in proxy mode the plugin is the proxy, and every answer goes through it)")
	case traits.Times:
		return fmt.Errorf("readAnswers false: strategy %s times every answer, which needs reading it", c.Strategy)
	case len(c.FailStatus) > 0:
		return fmt.Errorf("failStatus %q: needs readAnswers (each answer's status)", strings.Join(c.FailStatus, ","))
	case s.sticky != nil:
		return errors.New("sticky: needs readAnswers (the cookie goes on the answer, naming the server that gave it)")
	}
	s.failStatus = nil
	s.unreadAnswers = true
	return nil
}

// steerer is the middleware in steer mode.
type steerer struct {
	p     *Plugin
	next  http.Handler
	plain bool // requests have no key and are not counted in flight: ServeHTTP's short way
	quiet bool // a success tells the balancer nothing, until a failure (see steerDone)
	reads bool // every answer's headers are read (answered): for fair, or sticky sessions
	// learnsAtEnd: sticky learn learns at the request's end (steerEnded).
	learnsAtEnd bool
	prefix      string   // the cookie's name and "="
	pairs       []string // by server: the cookie as the request carries it, "name=value"
	// The server of each cookie value, in the configured format (own) and
	// in the other one (other), which shows a misconfigured cookieFormat.
	own, other map[string]int
	// Servers a request's earlier passes went to, by the request's
	// ctx.Done(), which Traefik's retry middleware keeps across its
	// attempts (each attempt's context is a value context of the
	// request's); retried counts them, so that a request finds out with
	// one atomic load whether there may be any.
	tried   sync.Map
	retried *atomic.Int64
	// What has been logged, once each; and what the service's cookies
	// showed of its servers, for the log.
	logMu  sync.Mutex
	logged map[string]bool
	seen   []string
}

func newSteerer(p *Plugin, next http.Handler) *steerer {
	s := p.s
	learnsAtEnd := p.sticky != nil && p.sticky.learns() && !p.sticky.header
	st := &steerer{
		p:           p,
		next:        next,
		plain:       p.keyKind == keyNone && !p.track,
		quiet:       !p.track && !p.timed && !learnsAtEnd,
		reads:       p.timed || p.sticky != nil,
		learnsAtEnd: learnsAtEnd,
		prefix:      s.cookie + "=",
		own:         map[string]int{},
		other:       map[string]int{},
		retried:     new(atomic.Int64),
		logged:      map[string]bool{},
	}
	for i, v := range s.cookieValues {
		st.pairs = append(st.pairs, st.prefix+v)
		st.own[v] = i
	}
	for i, raw := range s.rawURLs {
		for _, f := range []string{formatSHA256, formatFNV} {
			if v := cookieValue(f, raw); v != s.cookieValues[i] {
				st.other[v] = i
			}
		}
	}
	return st
}

// ServeHTTP picks a server, steers the request to it with the service's
// sticky cookie, and lets the service proxy it; the answer goes back
// through a steerWriter, which learns how it went. As in the proxy mode,
// the common case is kept to few calls and few values (the interpreter
// charges for each): a request the balancer does not count in flight, with
// no key to hash, not a retried one, has no deferred end (a response that
// breaks off midway leaves nothing to account).
func (st *steerer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !st.plain || st.retried.Load() != 0 || r.Header["Upgrade"] != nil {
		steerOther(w, r, st, "")
		return
	}
	b := st.p.bal.Load().(*balancer)
	i, _, t := core.Take(b.Balancer, "") // plain: the balancer counts nothing, so Take hands back no count
	if i < 0 {
		noServer(w, false)
		return
	}
	steerCookie(r, st, i)
	sw := &steerWriter{ResponseWriter: w, st: st, r: r, b: b, i: i, t: t, served: i}
	st.next.ServeHTTP(sw, r)
	steerEnd(sw)
}

// steerOther serves the requests ServeHTTP does not: with a key to hash,
// counted in flight, retried, or switching protocols. A first pass that
// does not switch protocols is picked by core.Take, which reads the
// strategy's table or steady arrays where Pick would make the full pick,
// and leaves a request it counts in flight to the end to count down
// (steerEnded: sw.n).
func steerOther(w http.ResponseWriter, r *http.Request, st *steerer, key string) {
	if st.p.keyKind != keyNone {
		key = requestKey(st.p.s, r)
	}
	var tried []bool
	if st.retried.Load() != 0 {
		tried = st.triedBy(r)
	}
	b := st.p.bal.Load().(*balancer)
	var i int
	var n *atomic.Int64
	var t core.Ticket
	if tried == nil && r.Header["Upgrade"] == nil {
		i, n, t = core.Take(b.Balancer, key)
	} else {
		i, t = steerPick(b, key, tried)
	}
	if i < 0 {
		noServer(w, tried != nil)
		return
	}
	steerCookie(r, st, i)
	if r.Header["Upgrade"] != nil {
		steerUpgrade(w, r, st, b, i, t)
		return
	}
	sw := &steerWriter{ResponseWriter: w, st: st, r: r, b: b, i: i, n: n, t: t, served: i}
	if st.p.timed {
		sw.start = time.Now()
	}
	// Deferred: Traefik's proxy aborts a response that breaks off midway
	// with a panic (http.ErrAbortHandler), and the request must still end.
	defer steerEnd(sw)
	st.next.ServeHTTP(sw, r)
}

// stickyServe passes a steered request with sticky sessions to the
// service, picked for server i of b with ticket t, and ends it, as
// steerOther does (inline there: under the interpreter the call would cost
// its requests a few allocations); the writer's start is the pick's time,
// from which the sticky cookie's expires counts (the answer's Date is the
// server's).
func stickyServe(w http.ResponseWriter, r *http.Request, st *steerer, b *balancer, i int, t core.Ticket) {
	sw := &steerWriter{ResponseWriter: w, st: st, r: r, b: b, i: i, t: t, served: i, start: time.Now()}
	// Deferred: Traefik's proxy aborts a response that breaks off midway
	// with a panic (http.ErrAbortHandler), and the request must still end.
	defer steerEnd(sw)
	st.next.ServeHTTP(sw, r)
}

// stickySteerer is the middleware in steer mode with sticky sessions on:
// a type of its own, so that the other requests' functions (which the
// interpreter allocates whole on every call) hold nothing of sticky's.
type stickySteerer struct{ st *steerer }

// ServeHTTP is steerOther for a request with sticky sessions: its sticky
// id, read before its cookies change, goes to the pick, and the cookie to
// an upgrade's answer (the others' get it in stickyAnswer).
func (ss *stickySteerer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := ss.st
	key := ""
	if st.p.keyKind != keyNone {
		key = requestKey(st.p.s, r)
	}
	id, _ := sticky.RequestID(&st.p.sticky.rule, r, st.p.sessions, time.Now())
	var tried []bool
	if st.retried.Load() != 0 {
		tried = st.triedBy(r)
	}
	b := st.p.bal.Load().(*balancer)
	i, t := stickyPick(b, key, tried, id)
	if i < 0 {
		noServer(w, tried != nil)
		return
	}
	steerCookie(r, st, i)
	if r.Header["Upgrade"] != nil {
		if st.p.sticky.rule.Cookie != nil {
			setStickyCookie(w.Header(), st.p.sticky.rule.Cookie, b.Balancer, i, time.Now())
		}
		steerUpgrade(w, r, st, b, i, t)
		return
	}
	stickyServe(w, r, st, b, i, t)
}

// blindSteerer is the middleware in steer mode with readAnswers false:
// the service writes the answer straight to the client (its own writer,
// so Traefik flushes, hijacks and streams as without the plugin), and the
// plugin looks at the answer's headers once it is sent. A request that
// Traefik's retry middleware sends again is picked afresh: the plugin
// never learns that its first pass failed, while the service's passive
// health check has marked the server down and moves the request.
type blindSteerer struct {
	st *steerer
	// What the common case reads, flat (each selector costs the
	// interpreter a value): st's plain, next and pairs, and the balancer,
	// which in steer mode is the middleware's for its whole life (no
	// health check of its own replaces it; markFailed rebinds the same).
	plain bool
	b     *core.Balancer
	next  http.Handler
	pairs []string
}

func newBlindSteerer(p *Plugin, next http.Handler) *blindSteerer {
	st := newSteerer(p, next)
	return &blindSteerer{st: st, plain: st.plain, b: p.bal.Load().(*balancer).Balancer, next: next, pairs: st.pairs}
}

// ServeHTTP steers a request without reading its answer; the common case
// (no key, nothing counted) has no deferred end and sets the cookie
// inline, as in steerer.ServeHTTP.
func (bs *blindSteerer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !bs.plain {
		blindOther(w, r, bs.st, bs.b)
		return
	}
	i, _, t := core.Take(bs.b, "")
	if i < 0 {
		noServer(w, false)
		return
	}
	if r.Header["Cookie"] == nil { // steerCookie's common case
		r.Header["Cookie"] = []string{bs.pairs[i]}
	} else {
		addCookie(r, bs.st, i)
	}
	bs.next.ServeHTTP(w, r)
	if t != 0 {
		blindEnd(bs.st, w, i, t)
	} else if w.Header()["Set-Cookie"] != nil {
		blindEnd(bs.st, w, i, t)
	}
}

// blindOther is blindSteerer's way for a request with a key to hash, or
// counted in flight until its end: core.Take hands the count back, and
// the deferred Add counts it down however the service's ServeHTTP ends
// (Traefik's proxy aborts a response that breaks off midway with a
// panic, http.ErrAbortHandler).
func blindOther(w http.ResponseWriter, r *http.Request, st *steerer, b *core.Balancer) {
	key := ""
	if st.p.keyKind != keyNone {
		key = requestKey(st.p.s, r)
	}
	i, n, t := core.Take(b, key)
	if i < 0 {
		noServer(w, false)
		return
	}
	steerCookie(r, st, i)
	if n != nil {
		defer n.Add(-1)
	}
	st.next.ServeHTTP(w, r)
	if t != 0 {
		blindEnd(st, w, i, t)
	} else if w.Header()["Set-Cookie"] != nil {
		blindEnd(st, w, i, t)
	}
}

// blindEnd ends a request steered to server i, whose answer w sent: a
// success of the server that gave it, and, when the service's sticky
// cookie in the answer shows that the service chose another server, a
// failure of the one picked (the service has it down).
func blindEnd(st *steerer, w http.ResponseWriter, i int, t core.Ticket) {
	b := st.p.bal.Load().(*balancer)
	served := i
	if sc := w.Header()["Set-Cookie"]; sc != nil {
		served = servedBy(st, sc, i)
	}
	if served == i {
		steerDone(st.p, b, i, t, 0, false)
		return
	}
	steerDone(st.p, b, i, t, 0, true)
	if served >= 0 {
		steerDone(st.p, b, served, 0, 0, false)
	}
}

// steerPick picks the server for a steered request, among those it has
// not tried yet when tried is not nil, and begins the request there (see
// core.Pick); -1 when no server is left. It, stickyPick, core.Take in
// ServeHTTP, and steerDone are steer mode's only calls into the balancer.
func steerPick(b *balancer, key string, tried []bool) (int, core.Ticket) {
	if tried == nil {
		return core.Pick(b.Balancer, key, core.Filter{})
	}
	return core.Pick(b.Balancer, key, core.Filter{Allow: triedSet(tried).untried})
}

// stickyPick is steerPick for a request with sticky id id.
func stickyPick(b *balancer, key string, tried []bool, id string) (int, core.Ticket) {
	if tried == nil {
		return core.Pick(b.Balancer, key, core.Filter{Sticky: id})
	}
	return core.Pick(b.Balancer, key, core.Filter{Allow: triedSet(tried).untried, Sticky: id})
}

// noServer answers a request for which no server is left: 503, or 502
// when the request's earlier passes tried every server.
func noServer(w http.ResponseWriter, retried bool) {
	if retried {
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return
	}
	unavailable(w)
}

// steerDone reports the end of a steered request to server i, begun with
// ticket t (0 for a server Traefik used in place of the one picked), after
// took (fair's time to the first byte). A zero ticket's success, while the
// balancer has seen no failure and times nothing, is nothing to report.
func steerDone(p *Plugin, b *balancer, i int, t core.Ticket, took time.Duration, failed bool) {
	if t == 0 && !failed && !p.timed && (!p.failures || !p.bal.Load().(*balancer).failed || b.fails(i) == 0) {
		return
	}
	if failed && p.failures && !b.failed {
		p.markFailed()
	}
	core.Done(b.Balancer, i, t, took, failed)
}

// triedSet is the servers a request went to already.
type triedSet []bool

// untried is the availability predicate for a retried request's pick.
func (t triedSet) untried(i int) bool { return i >= len(t) || !t[i] }

// steerCookie sets the request's sticky cookie to server i's value,
// removing any the client sent: Traefik's balancer reads the first.
func steerCookie(r *http.Request, st *steerer, i int) {
	if r.Header["Cookie"] == nil {
		r.Header["Cookie"] = []string{st.pairs[i]}
		return
	}
	addCookie(r, st, i)
}

// addCookie is steerCookie for a request that has cookies.
func addCookie(r *http.Request, st *steerer, i int) {
	cs := r.Header["Cookie"]
	if len(cs) == 1 && !strings.Contains(cs[0], st.prefix) {
		r.Header["Cookie"] = []string{cs[0] + "; " + st.pairs[i]}
		return
	}
	r.Header["Cookie"] = []string{withoutCookie(cs, st.prefix) + st.pairs[i]}
}

// withoutCookie joins the Cookie headers cs into one, without the cookies
// that start with prefix ("name="), ending in "; " when anything is left.
func withoutCookie(cs []string, prefix string) string {
	var sb strings.Builder
	for _, c := range cs {
		for _, part := range strings.Split(c, ";") {
			part = strings.TrimSpace(part)
			if part == "" || strings.HasPrefix(part, prefix) {
				continue
			}
			sb.WriteString(part)
			sb.WriteString("; ")
		}
	}
	return sb.String()
}

// steerUpgrade lets the service serve a request that asks to switch
// protocols (WebSocket) with Traefik's own response writer: the proxy
// hijacks the connection, which it cannot do through a writer of the
// interpreter's (yaegi hands compiled code a wrapper with the three
// ResponseWriter methods only). So the answer is not read: the request
// ends as a success.
func steerUpgrade(w http.ResponseWriter, r *http.Request, st *steerer, b *balancer, i int, t core.Ticket) {
	defer steerDone(st.p, b, i, t, 0, false)
	st.next.ServeHTTP(w, r)
}

// steerWriter is the response writer the service answers a steered request
// through: it notes the status and the time to it, removes the service's
// sticky cookie from the answer (noting the server it names), and flushes
// what the proxy writes of a response still under way. Through the
// interpreter's wrapper Traefik's proxy sees no Flush of it, so its own
// flushing (responseForwarding.flushInterval, and at once for a response
// of unknown length) cannot reach the client.
//
// The answer's headers come from the embedded writer: the interpreter's
// wrapper then calls Traefik's own Header, where a method of the
// plugin's would cost an interpreted call each time.
type steerWriter struct {
	http.ResponseWriter
	st     *steerer
	r      *http.Request
	b      *balancer
	i      int           // the server picked
	n      *atomic.Int64 // the request's count in flight when core.Take counted it, which the end counts down
	t      core.Ticket   // the pick's ticket
	served int           // the server Traefik used; -1 when not one of the plugin's
	status int           // the answer's status, once known
	left   int           // bytes the answer has declared and not written yet
	start  time.Time     // when the request was picked (fair, sticky sessions)
	took   time.Duration // the time to the answer's status (fair)
}

// WriteHeader notes the answer's status (not an informational one, which
// Traefik's proxy passes on before it) and passes it on.
func (sw *steerWriter) WriteHeader(code int) {
	if sw.status == 0 && code >= 200 {
		answer(sw, code)
	}
	sw.ResponseWriter.WriteHeader(code)
}

// Write passes a part of the answer on, and flushes it unless it is the
// last part of a response of known length (which the server flushes when
// the request ends) or the answer is an error: Traefik's retry middleware
// holds an answer back from the client when it retries, but not a flush,
// which would send the client a 200 of its own.
func (sw *steerWriter) Write(p []byte) (int, error) {
	if sw.status == 0 {
		sw.WriteHeader(http.StatusOK)
	}
	n, err := sw.ResponseWriter.Write(p)
	if sw.left -= n; sw.left != 0 && sw.status < 400 {
		http.NewResponseController(sw.ResponseWriter).Flush()
	}
	return n, err
}

// answer notes the answer's status, and what else of the answer's headers
// the request's end needs (see answered), and the response's declared
// length, for Write (-1: none, which no count of written bytes reaches).
func answer(sw *steerWriter, code int) {
	sw.status = code
	h := sw.ResponseWriter.Header()
	if h["Set-Cookie"] != nil || sw.st.reads {
		answered(sw, h)
	}
	sw.left = declared(h["Content-Length"])
}

// stickyAnswer puts the sticky cookie on a steered answer, once the
// service's own cookie is out of it, naming the server Traefik used (the
// one picked when it used none of the plugin's); and learns from the
// answer's header with learn's header setting.
func stickyAnswer(sw *steerWriter, h http.Header) {
	ss := sw.st.p.sticky
	j := sw.served
	if j < 0 {
		j = sw.i
	}
	if ss.rule.Cookie != nil {
		setStickyCookie(h, ss.rule.Cookie, sw.b.Balancer, j, sw.start)
	} else if ss.learns() && ss.header && sw.served >= 0 && !failing(sw.st.p, sw.status) {
		learn(ss, sw.st.p.sessions, sw.r, h, sw.b.Balancer, j)
	}
}

// steerLearn is sticky learn's learning at a steered request's end (see
// steerEnded), from the answer's headers, unless it failed or never came.
func steerLearn(sw *steerWriter) {
	if sw.status != 0 && sw.served >= 0 && !failing(sw.st.p, sw.status) {
		learn(sw.st.p.sticky, sw.st.p.sessions, sw.r, sw.ResponseWriter.Header(), sw.b.Balancer, sw.served)
	}
}

// failing reports whether an answer's status is one of failStatus's.
func failing(p *Plugin, code int) bool {
	return code < len(p.s.failStatus) && p.s.failStatus[code]
}

// answered notes, for fair, the time to the answer, and takes the
// service's sticky cookie out of the answer's headers, which tells that
// the service sent the request to a server of its own choosing; then
// sticky sessions have their say (stickyAnswer).
func answered(sw *steerWriter, h http.Header) {
	if sw.st.p.timed {
		sw.took = time.Since(sw.start)
	}
	if sc := h["Set-Cookie"]; sc != nil {
		sw.served = stripCookie(sw.st, h, sc, sw.i)
	}
	if sw.st.p.sticky != nil {
		stickyAnswer(sw, h)
	}
}

// declared reads a response's Content-Length header, -1 when it is not
// one length.
func declared(v []string) int {
	if len(v) == 1 {
		if n, err := strconv.Atoi(v[0]); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

// stripCookie removes the service's sticky cookie from the Set-Cookie
// headers sc of h, and returns the server it names: picked, when there is
// none (the service honoured the request's cookie), or -1 when it names
// no server of the plugin's.
func stripCookie(st *steerer, h http.Header, sc []string, picked int) int {
	served := picked
	var keep []string
	for k, c := range sc {
		if !strings.HasPrefix(c, st.prefix) {
			if keep != nil {
				keep = append(keep, c)
			}
			continue
		}
		if keep == nil {
			keep = append(make([]string, 0, len(sc)), sc[:k]...)
		}
		served = st.serverOf(steerValue(st, c), picked)
	}
	if keep == nil {
		return picked
	}
	if len(keep) == 0 {
		delete(h, "Set-Cookie")
	} else {
		h["Set-Cookie"] = keep
	}
	return served
}

// servedBy returns the server the service's sticky cookie among the
// Set-Cookie headers sc names: picked when there is none.
func servedBy(st *steerer, sc []string, picked int) int {
	served := picked
	for _, c := range sc {
		if strings.HasPrefix(c, st.prefix) {
			served = st.serverOf(steerValue(st, c), picked)
		}
	}
	return served
}

// steerValue returns the value of c, a Set-Cookie header of the service's
// sticky cookie.
func steerValue(st *steerer, c string) string {
	v := c[len(st.prefix):]
	if j := strings.IndexByte(v, ';'); j >= 0 {
		v = v[:j]
	}
	return v
}

// steerEnd reports a steered request's end: its answer against the server
// Traefik used, and, when that is not the one picked, the picked one as
// failed (Traefik has it down, or does not have it: either way it takes
// no requests). An answer that Traefik's retry middleware may retry (a
// 5xx: its proxy answers 502 or 504 for a network error; or a 429), which
// sends the request through the plugin again, has its servers remembered
// for that pass.
func steerEnd(sw *steerWriter) {
	if sw.status < 429 && sw.served == sw.i && sw.t == 0 && sw.st.quiet && !sw.b.failed {
		return // a success, and nothing to report
	}
	steerEnded(sw)
}

// steerEnded is steerEnd for the requests it does not end itself.
func steerEnded(sw *steerWriter) {
	if sw.n != nil {
		sw.n.Add(-1)
	}
	if sw.st.learnsAtEnd {
		steerLearn(sw)
	}
	p := sw.st.p
	code := sw.status
	failed := code < len(p.s.failStatus) && p.s.failStatus[code] && sw.r.Context().Err() == nil
	took := sw.took
	if p.timed && code == 0 {
		took = time.Since(sw.start)
	}
	if sw.served == sw.i {
		steerDone(p, sw.b, sw.i, sw.t, took, failed)
	} else {
		steerDone(p, sw.b, sw.i, sw.t, 0, true)
		if sw.served >= 0 {
			steerDone(p, sw.b, sw.served, 0, took, failed)
		}
	}
	if code >= 500 || code == http.StatusTooManyRequests {
		sw.st.remember(sw.r, sw.i, sw.served)
	}
}

// remember records that request r went to servers i and j (if not -1),
// for a retried pass of it; the record goes when the request ends.
func (st *steerer) remember(r *http.Request, i, j int) {
	ctx := r.Context()
	done := ctx.Done()
	if done == nil {
		return
	}
	var t []bool
	if v, ok := st.tried.Load(done); ok {
		t = v.([]bool)
	} else {
		t = make([]bool, len(st.pairs))
		st.tried.Store(done, t)
		st.retried.Add(1)
		context.AfterFunc(ctx, forgetTried(st, done))
	}
	t[i] = true
	if j >= 0 {
		t[j] = true
	}
}

// forgetTried returns the function that drops a request's record of tried
// servers when the request ends.
func forgetTried(st *steerer, done <-chan struct{}) func() {
	return func() {
		if _, ok := st.tried.LoadAndDelete(done); ok {
			st.retried.Add(-1)
		}
	}
}

// triedBy returns the servers request r's earlier passes went to, or nil.
func (st *steerer) triedBy(r *http.Request) []bool {
	done := r.Context().Done()
	if done == nil {
		return nil
	}
	if v, ok := st.tried.Load(done); ok {
		return v.([]bool)
	}
	return nil
}

// serverOf returns the server whose sticky cookie value is v, in the
// service's answer to a request steered to picked, or -1; and logs, once
// each, what the value shows wrong: a server of the service's that the
// plugin does not have, a cookieFormat that is not the service's, or a
// picked server that the service did not use.
func (st *steerer) serverOf(v string, picked int) int {
	j, ok := st.own[v]
	if !ok {
		if j, ok = st.other[v]; ok {
			st.logOnce("format", "cookieFormat %q: the service writes server %s's sticky cookie as %s, not %s: set the cookieFormat of its Traefik version",
				st.p.s.format, st.p.s.rawURLs[j], v, st.p.s.cookieValues[j])
		}
	}
	st.saw(v, j, ok)
	if !ok {
		st.logOnce("unknown "+v, "the service sent a request to a server that is none of the plugin's (its sticky cookie: %s%s): %s", st.prefix, v, st.lists())
		j = -1
	}
	if j != picked {
		st.logOnce(fmt.Sprint("over ", picked), "the service did not send a request to server %s: it has it down (its health check), or it is not one of the service's servers: %s", st.p.s.rawURLs[picked], st.lists())
	}
	return j
}

// saw records a server the service's sticky cookie named, for the log.
func (st *steerer) saw(v string, j int, known bool) {
	name := v
	if known {
		name = st.p.s.rawURLs[j]
	} else {
		name = "(not the plugin's) " + st.prefix + v
	}
	st.logMu.Lock()
	defer st.logMu.Unlock()
	for _, s := range st.seen {
		if s == name {
			return
		}
	}
	if len(st.seen) < 64 {
		st.seen = append(st.seen, name)
	}
}

// lists names the plugin's servers and the service's as its cookies showed
// them so far.
func (st *steerer) lists() string {
	st.logMu.Lock()
	defer st.logMu.Unlock()
	return fmt.Sprintf("the plugin's servers are %s, the service's seen so far %s; they must be the same, each URL written as in the service",
		strings.Join(st.p.s.rawURLs, " "), strings.Join(st.seen, " "))
}

// logOnce logs a problem the first time key is seen, at ERROR (see events).
func (st *steerer) logOnce(key, format string, args ...interface{}) {
	st.logMu.Lock()
	seen := st.logged[key]
	st.logged[key] = true
	st.logMu.Unlock()
	if !seen {
		events.Printf("lbpack middleware %q: "+format, append([]interface{}{st.p.name}, args...)...)
	}
}
