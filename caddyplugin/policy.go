package caddyplugin

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// maxPoolSets bounds how many distinct upstream sets a policy keeps a
// balancer for. Static upstreams need one; dynamic upstreams whose answers
// flap between a few sets keep their schedules without rebuilding.
const maxPoolSets = 64

// base is embedded in every policy module: the shared options (their JSON
// fields are promoted into the module's) and the shared runtime, with the
// methods that do not differ between policies.
type base struct {
	Options
	p policy
}

// Validate checks the options.
func (b *base) Validate() error {
	if err := b.Options.validate(); err != nil {
		return fmt.Errorf("lb_policy %s: %v", b.policy, err)
	}
	return nil
}

// Cleanup removes the policy from the admin endpoint and the metrics.
func (b *base) Cleanup() error { return b.p.cleanup() }

// Select returns the upstream the policy's strategy picks among those Caddy
// considers available (Upstream.Available), or nil when there is none, which
// Caddy answers with 503 or a retry.
func (b *base) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	return b.p.pick(pool, r, w)
}

// policy is the machinery every lbpack selection policy shares: it turns
// Caddy's upstream pool into a core balancer, keeps that balancer while the
// pool is unchanged, and maps Caddy's view of availability onto it. The
// module types hold one each and differ only in their core.Config and key.
type policy struct {
	name string // module name, e.g. "smooth_wrr"
	id   string // the policy's identity in the admin endpoint and metrics (see identify)
	desc policyDesc
	opts *Options
	cfg  core.Config // strategy and its options; Backends filled per pool

	// key returns what the hash strategies hash; nil for the others.
	key func(*http.Request) string
	// fallback, if set, takes the requests whose key is empty.
	fallback reverseproxy.Selector
	// track makes Select report each attempt's end to the balancer (the
	// strategies whose core.Traits count or time requests, and any policy
	// with max_fails or max_conns).
	track bool
	// available says whether an upstream may take a request now (Caddy's
	// Upstream.Available: healthy and not full); healthy is the health part
	// alone (Upstream.Healthy), which scans record (see seen). clock is
	// monotonic ns (monotonicNow). Tests replace all three.
	available func(*reverseproxy.Upstream) bool
	healthy   func(*reverseproxy.Upstream) bool
	clock     func() int64
	// attemptVar names the request variable holding what this policy
	// remembers of the request (see attempt).
	attemptVar string
	// failStatus are the statuses of an answer that count as the
	// upstream's failure (Options.FailStatus, or fair's default).
	failStatus []int
	// retries says that Caddy may call Select again for a request: the
	// reverse proxy has lb_retries or lb_try_duration (or is not known).
	// Only then does a pick look up and record what the request has tried.
	retries bool
	// rounds lets a request that has tried every upstream start over: set
	// when the reverse proxy has lb_try_duration.
	rounds bool

	logger *zap.Logger

	// sessions is sticky learn's table (shared with the policies of the
	// same identity, see pools.learnTable); nil without sticky learn.
	sessions *sticky.Sessions
	// conns are the tries in flight by connection (see connTries).
	conns connTries

	// cur is the snapshot for the pool Select saw last; the fast path is
	// one atomic load and a comparison of the pool's slice header.
	cur atomic.Pointer[snapshot]

	// pools are the balancers and counters, shared with the policies of
	// the same identity in the configs before and after this one (see
	// acquire); set when the policy registers.
	*pools
	// warned records the warnings given once (see warnSet).
	warned struct{ first, allDown bool }
}

// poolEntry is the balancer for one set of dial addresses.
type poolEntry struct {
	bal    *core.Balancer
	stats  []*upstreamStats // by backend index
	health seen             // Caddy's health of the upstreams, as last seen
	err    error            // why this set cannot be balanced; Select returns nil
}

// snapshot binds one pool slice to its balancer: ups maps the balancer's
// backend indexes back to this pool's *Upstream values.
type snapshot struct {
	pool  reverseproxy.UpstreamPool // kept so that its backing array is not reused
	entry *poolEntry
	ups   []*reverseproxy.Upstream // by backend index
	pred  func(*reverseproxy.Upstream) bool
	// s.availableAt and s.seenHealthy, bound once so picks do not allocate.
	avail, healthy func(int) bool
}

// upstreamStats are the counters of one dial address, kept across pool
// changes for the admin endpoint and the metrics.
type upstreamStats struct {
	picks    atomic.Int64
	failures atomic.Int64 // attempts that failed (policies that track attempts)
	latency  atomic.Int64 // EWMA of attempt durations, ns; 0 before the first
	inflight atomic.Int64 // attempts begun and not yet ended (policies that track attempts)
}

// observe folds one attempt's duration into the latency estimate
// (weight 1/8 for the newest sample, as TCP's SRTT).
func (s *upstreamStats) observe(d time.Duration) {
	for {
		old := s.latency.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)/8
		}
		if s.latency.CompareAndSwap(old, next) {
			return
		}
	}
}

// matches reports whether pool is the very slice this snapshot was built
// for: same backing array, length and end elements. Static upstreams pass
// every time; dynamic ones are fresh slices and take the slow path.
func (s *snapshot) matches(pool reverseproxy.UpstreamPool) bool {
	n := len(pool)
	return n == len(s.pool) && &pool[0] == &s.pool[0] && pool[0] == s.pool[0] && pool[n-1] == s.pool[n-1]
}

// availableAt is the availability predicate handed to core: backend i is
// available when it is not seen unhealthy (see seen) and Caddy says it is
// available now.
func (s *snapshot) availableAt(i int) bool {
	u := s.ups[i]
	return u != nil && !s.entry.health.down[i].Load() && s.pred(u)
}

// seenHealthy is the filter of an ordinary pick while some upstreams are
// seen unhealthy: it leaves those out and asks Caddy nothing.
func (s *snapshot) seenHealthy(i int) bool { return !s.entry.health.down[i].Load() }

// policySeq numbers policy instances for their request variables.
var policySeq atomic.Int64

// setup prepares p for a policy module; it runs from Provision.
func (p *policy) setup(ctx caddy.Context, name string, opts *Options, cfg core.Config) error {
	p.name = name
	p.opts = opts
	p.cfg = cfg
	if p.logger == nil { // tests set their own
		p.logger = ctx.Logger()
	}
	p.attemptVar = "lbpack.attempt." + strconv.FormatInt(policySeq.Add(1), 10)
	if p.available == nil {
		p.available = (*reverseproxy.Upstream).Available
	}
	if p.healthy == nil {
		p.healthy = (*reverseproxy.Upstream).Healthy
	}
	if p.clock == nil {
		p.clock = monotonicNow
	}
	opts.policy = name
	traits, err := core.TraitsOf(cfg.Strategy, cfg.HashMode)
	if err != nil {
		return fmt.Errorf("lb_policy %s: %v", name, err)
	}
	opts.hashed = !traits.SlowStart
	opts.fair = traits.Times
	opts.defaultFail = traits.FailStatus
	p.failStatus = opts.failStatus()
	// The strategy counts or times every try; max_fails counts failed
	// tries and max_conns tries in flight: the balancer must hear of every
	// one.
	p.track = traits.Counts || traits.Times || opts.tracks()
	h := handlerOf(ctx)
	opts.scheme = upstreamScheme(h)
	if err := opts.validate(); err != nil {
		return fmt.Errorf("lb_policy %s: %v", name, err)
	}
	if opts.Sticky != nil && p.fallback != nil {
		return fmt.Errorf("lb_policy %s: sticky and fallback: the fallback policy would pick without the sticky binding; without fallback a request with an empty key goes to nginx's round robin, which keeps it", name)
	}
	// Registered before the first balancer is built: that takes up the
	// state of the same policy in the config being replaced.
	if err := register(p, ctx, h); err != nil {
		return err
	}
	if st := opts.sticky; st != nil && st.learn != nil {
		p.sessions = p.learnTable(st.learn)
		if st.learn.Header {
			p.logger.Warn("sticky learn header: Caddy tells a selection policy of a request's end only, so a session is learnt when the request ends, as without header",
				zap.String("policy", p.id))
		}
	}
	return p.checkAgainstHandler(h)
}

// upstreamScheme is the scheme of the upstreams' URLs: https when the
// reverse proxy's transport speaks TLS.
func upstreamScheme(h *reverseproxy.Handler) string {
	if h != nil {
		if t, ok := h.Transport.(*reverseproxy.HTTPTransport); ok && t.TLS != nil {
			return "https"
		}
	}
	return "http"
}

// handlerOf returns the reverse proxy being provisioned (for url_hash's
// fallback, the one its parent policy serves: Caddy's module lineage holds
// both), nil when the policy is provisioned outside one.
func handlerOf(ctx caddy.Context) *reverseproxy.Handler {
	var h *reverseproxy.Handler
	mods := ctx.Modules()
	for i := len(mods) - 1; i >= 0 && h == nil; i-- {
		h, _ = mods[i].(*reverseproxy.Handler)
	}
	return h
}

// checkAgainstHandler checks the options against the upstreams of h, the
// reverse proxy this policy belongs to, so that a bad weight count or an
// unknown address fails the config load rather than a request. With static
// upstreams it also builds the balancer now. Without a handler (nil), or
// with dynamic upstreams, it checks the options alone.
func (p *policy) checkAgainstHandler(h *reverseproxy.Handler) error {
	var lb *reverseproxy.LoadBalancing
	if h != nil {
		lb = h.LoadBalancing
	}
	// Caddy tries a request again only with one of these (LoadBalancing's
	// tryAgain): without them a Select is always a first try.
	p.retries = h == nil || lb != nil && (lb.Retries > 0 || lb.TryDuration > 0)
	p.rounds = lb != nil && lb.TryDuration > 0
	switch {
	case h != nil && h.DynamicUpstreamsRaw != nil:
		if len(p.opts.Weights) > 0 {
			return errors.New("weights: positional weights need static upstreams; with dynamic upstreams give `weight <address> <n>`")
		}
	case h != nil && len(h.Upstreams) > 0:
		dials := make([]string, len(h.Upstreams))
		for i, u := range h.Upstreams {
			dials[i] = u.Dial
		}
		if err := p.opts.checkStatic(dials); err != nil {
			return fmt.Errorf("lb_policy %s: %v", p.name, err)
		}
		p.mu.Lock()
		e := p.entryFor(dials)
		// State taken up from another config of this identity may hold
		// addresses that these upstreams no longer have: they go.
		p.pruneStats()
		p.mu.Unlock()
		return e.err
	}
	// Options alone: build once over the named addresses (plus one primary
	// if they are all backups) to let core check the strategy options.
	dials := p.opts.addresses()
	if len(dials) == 0 || allBackups(p.opts) {
		dials = append(dials, "lbpack.invalid:1")
	}
	o := *p.opts
	o.Weights = nil // their count is checked against the real pool at Select time
	backends, err := o.backends(dials)
	if err != nil {
		return err
	}
	cfg := p.cfg
	cfg.Backends = backends
	_, err = core.New(cfg)
	return explain(err, dials, p.cfg.Strategy, p.name)
}

func allBackups(o *Options) bool {
	for _, u := range o.Upstreams {
		if !u.Backup {
			return false
		}
	}
	return true
}

// cleanup runs from the module's Cleanup.
func (p *policy) cleanup() error {
	unregister(p)
	return nil
}

// pick is the shared Select: it returns the chosen upstream, or nil (Caddy
// answers 503 or retries) when none is available or the pool cannot be
// balanced. It never returns an upstream that Caddy says is unavailable at
// the moment of the pick, and a retry of a request never gets an upstream
// the request has tried (see attempt): it gets the one nginx would pass the
// request to, or nil once every upstream has been tried. (With
// lb_try_duration, whose point is to wait for an upstream to come back, a
// request that has tried them all starts a new round instead.) w goes to
// the fallback policy, which may set a cookie (Caddy's cookie policy does).
//
// With sticky sessions, the request's sticky id binds it (core.Filter.Sticky)
// and a sticky cookie naming the upstream chosen goes on w: one header per
// request, which a retry rewrites, as nginx's.
func (p *policy) pick(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	if len(pool) == 0 {
		return nil
	}
	s := p.cur.Load()
	if s == nil || !s.matches(pool) {
		s = p.snapshotFor(pool)
	}
	e := s.entry
	if e.err != nil {
		return nil
	}
	var key string
	if p.key != nil {
		if key = p.key(r); key == "" && p.fallback != nil {
			return p.fallback.Select(pool, r, w)
		}
	}
	var vars map[string]any // nil: nothing to remember (see remember)
	var tried []string
	var prev *attempt
	if p.retries {
		vars, _ = r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
		if v := vars[p.attemptVar]; v != nil {
			tried, prev = retrying(v)
		}
	}
	var b binding
	if p.track || p.sessions != nil {
		p.conns.settle(r)
	}
	if st := p.opts.sticky; st != nil {
		b.id, b.session = sticky.RequestID(&st.rule, r, p.sessions, time.Now())
	}
	i, t := p.choose(s, key, b.id, untried(e, tried))
	if i < 0 && tried != nil && p.rounds {
		tried = nil
		i, t = p.choose(s, key, b.id, nil)
	}
	if i < 0 {
		return nil
	}
	u := s.ups[i]
	if st := p.opts.sticky; st != nil && st.rule.Cookie != nil && w != nil {
		b.cookie = st.rule.Cookie.Header(e.bal.ID(i), time.Now())
		setCookie(w.Header(), prev.setCookie(), b.cookie)
	}
	p.remember(vars, r, e, i, t, u, tried, b)
	return u
}

// binding is what sticky sessions keep of a request's try: the sticky id
// it carried, the session it looked up (sticky learn) and the Set-Cookie
// value the try set (sticky cookie).
type binding struct{ id, session, cookie string }

// untried returns the predicate that leaves out the backends of e that the
// request has tried, or nil when none of them is in e.
func untried(e *poolEntry, tried []string) func(int) bool {
	var out []int
	for _, d := range tried {
		if i := e.bal.Index(d); i >= 0 {
			out = append(out, i)
		}
	}
	if out == nil {
		return nil
	}
	return func(i int) bool {
		for _, j := range out {
			if i == j {
				return false
			}
		}
		return true
	}
}

// both returns the predicate true where f and g are (nil: everywhere).
func both(f, g func(int) bool) func(int) bool {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(i int) bool { return f(i) && g(i) }
}

// choose returns the backend index of the pick among those allow accepts
// (nil: all), the request bound by the sticky id (core.Filter.Sticky, ""
// none), or -1 when none is available, with the request's ticket (see
// core.Pick), and counts the pick. See seen for what it asks Caddy when.
func (p *policy) choose(s *snapshot, key, id string, allow func(int) bool) (int, core.Ticket) {
	e := s.entry
	h := &e.health
	// The pick leaves out the upstreams seen unhealthy. With none, and no
	// upstream tried, it has no filter at all: O(1) for the scheduled
	// strategies.
	f := core.Filter{Sticky: id}
	if h.count.Load() != 0 {
		// Look at the clock every time, so that a recovery is seen
		// within healthRefresh.
		p.scanIfDue(s)
		// The filter's answers change only with its version (read before
		// its first answer; 0 is no version to core): smooth_wrr follows
		// nginx's schedule over the upstreams left in O(1).
		f.Version = h.version.Load() + 1
		if h.count.Load() != 0 {
			f.Allow = s.healthy
		}
	}
	quiet := f.Allow == nil
	if allow != nil {
		// A retry's filter is its own: ask about every upstream.
		f = core.Filter{Allow: both(allow, f.Allow), Sticky: id}
	}
	i, t := core.Pick(e.bal, key, f)
	if i >= 0 {
		// Ask Caddy about the chosen upstream only.
		u := s.ups[i]
		if u != nil && p.available(u) {
			if e.stats[i].picks.Add(1)%clockEvery == 0 && quiet {
				p.scanIfDue(s)
			}
			return i, t
		}
		core.Done(e.bal, i, t, core.NotSent, false)
		if u == nil || !p.healthy(u) {
			// Its health changed since the last scan; others' may have too.
			h.mark(i)
			p.scan(s, p.clock(), true)
		}
	} else if !quiet {
		// Everything left is unavailable: look again at those seen
		// unhealthy before answering that none is available.
		p.scan(s, p.clock(), true)
	} else {
		return -1, 0
	}
	// Pick again among the upstreams Caddy says are available now.
	i, t = core.Pick(e.bal, key, core.Filter{Allow: both(allow, s.avail), Sticky: id})
	if i < 0 {
		return -1, 0
	}
	e.stats[i].picks.Add(1)
	return i, t
}

// snapshotFor builds (or finds) the snapshot for a pool that is not the
// current one.
func (p *policy) snapshotFor(pool reverseproxy.UpstreamPool) *snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.cur.Load(); s != nil && s.matches(pool) {
		return s // another goroutine built it meanwhile
	}
	dials := make([]string, len(pool))
	for i, u := range pool {
		dials[i] = u.Dial
	}
	s := &snapshot{pool: pool, entry: p.entryFor(dials), pred: p.available}
	s.avail, s.healthy = s.availableAt, s.seenHealthy
	if s.entry.err == nil {
		s.ups = make([]*reverseproxy.Upstream, s.entry.bal.Len())
		for _, u := range pool {
			if i := s.entry.bal.Index(u.Dial); i >= 0 {
				s.ups[i] = u
			}
		}
		if s.entry.health.next.Load() == 0 {
			// A new balancer: see Caddy's health before its first pick.
			p.scan(s, p.clock(), false)
		}
	}
	p.cur.Store(s)
	return s
}

// entryFor returns the balancer for a set of dial addresses, building it
// on first sight from the latest balancer so that per-address state carries
// over. A set that cannot be balanced is remembered with its error, which is
// logged once. p.mu must be held.
func (p *policy) entryFor(dials []string) *poolEntry {
	sorted := append([]string(nil), dials...)
	sort.Strings(sorted)
	key := setKey(sorted)
	if e, ok := p.sets[key]; ok {
		return e
	}
	e := &poolEntry{}
	for i, d := range sorted {
		if err := checkDial(d); err != nil {
			e.err = fmt.Errorf("upstream %q: %v", d, err)
		} else if i > 0 && d == sorted[i-1] {
			e.err = fmt.Errorf("upstream %q is listed twice; give it a weight instead", d)
		}
	}
	var backends []core.Backend
	if e.err == nil {
		backends, e.err = p.opts.backends(dials)
	}
	if e.err == nil {
		e.bal, e.err = p.derive(backends)
		e.err = explain(e.err, dials, p.cfg.Strategy, p.name)
	}
	if e.err == nil {
		p.warnSet(dials, backends)
	}
	if e.err != nil {
		p.logger.Error("cannot balance this upstream pool; requests get 503",
			zap.String("policy", p.id), zap.Strings("upstreams", dials), zap.Error(e.err))
	} else {
		e.health.down = make([]atomic.Bool, len(backends))
		e.stats = make([]*upstreamStats, len(backends))
		for i, b := range backends {
			st := p.stats[b.Address]
			if st == nil {
				st = new(upstreamStats)
				p.stats[b.Address] = st
			}
			e.stats[i] = st
		}
		p.latest = e
		p.logger.Debug("balancer built", zap.String("policy", p.id), zap.Strings("upstreams", dials))
	}
	full := len(p.sets) >= maxPoolSets
	if full {
		for k := range p.sets {
			delete(p.sets, k) // any one: flapping sets rebuild cheaply
			break
		}
	}
	p.sets[key] = e
	if full {
		p.pruneStats()
	}
	return e
}

// warnSet warns, once per policy, of what a new set of upstreams shows:
// options naming an address that the first set lacks (with static upstreams
// Provision refuses them; dynamic ones may still bring it, but an address
// written otherwise than the source gives it, "localhost:80" for
// "127.0.0.1:80", never matches), upstreams a hash's weight walk never
// reaches (warnReach), and every upstream down. p.mu must be held.
func (p *policy) warnSet(dials []string, backends []core.Backend) {
	if !p.warned.first {
		p.warned.first = true
		have := make(map[string]bool, len(dials))
		for _, d := range dials {
			have[d] = true
		}
		for _, addr := range p.opts.addresses() {
			if !have[addr] {
				p.logger.Warn("an option names an address that is not among the upstreams; options match an upstream's dial address exactly",
					zap.String("policy", p.id), zap.String("option", given(p.opts.Upstreams[addr])+" "+addr), zap.Strings("upstreams", dials))
			}
		}
		p.warnReach(backends)
	}
	for _, b := range backends {
		if !b.Down {
			return
		}
	}
	if !p.warned.allDown {
		p.warned.allDown = true
		p.logger.Warn("every upstream is marked down; requests get 503", zap.String("policy", p.id), zap.Strings("upstreams", dials))
	}
}

// setKey is the cache key of a sorted set of dial addresses: each one
// length-prefixed, so that no two sets share a key whatever bytes the
// addresses hold.
func setKey(sorted []string) string {
	var b strings.Builder
	for _, d := range sorted {
		b.WriteString(strconv.Itoa(len(d)))
		b.WriteByte(':')
		b.WriteString(d)
	}
	return b.String()
}

// derive builds the balancer over backends from p.all, the balancer over
// every address of the cached sets. core carries an address's state (in
// flight, failures, latency, slow start) over from the balancer a new one
// derives from; deriving every set from one that has them all keeps that
// state one per address, whatever sets dynamic upstreams return (DNS
// answering {a,b}, then {b,c}, then {a,c} must not split a's requests in
// flight). An address new to p.all joins it first (and starts its slow
// start, as an upstream joining a running pool). p.mu must be held.
func (p *policy) derive(backends []core.Backend) (*core.Balancer, error) {
	if p.all == nil {
		cfg := p.cfg
		cfg.Backends = backends
		b, err := core.New(cfg)
		if err == nil {
			p.all = b
		}
		return b, err
	}
	var union []core.Backend
	for _, b := range backends {
		if p.all.Index(b.Address) >= 0 {
			continue
		}
		if union == nil {
			for i := 0; i < p.all.Len(); i++ {
				union = append(union, p.all.Backend(i))
			}
		}
		union = append(union, b)
	}
	if union != nil {
		all, err := p.all.Update(union)
		if err != nil {
			// The union breaks a limit of the strategy (ketama's total
			// weight) that the set itself does not: the set's new
			// addresses start with state of their own.
			p.logger.Debug("cannot extend the policy's state to a new upstream set", zap.String("policy", p.id), zap.Error(err))
			return p.all.Update(backends)
		}
		p.all = all
	}
	return p.all.Update(backends)
}

// pruneStats forgets the counters of addresses that no cached set has any
// more, so that dynamic upstreams churning through addresses do not grow the
// map without bound. p.mu must be held.
func (p *policy) pruneStats() {
	keep := make(map[*upstreamStats]bool, len(p.stats))
	for _, e := range p.sets {
		for _, st := range e.stats {
			keep[st] = true
		}
	}
	for addr, st := range p.stats {
		if !keep[st] {
			delete(p.stats, addr)
		}
	}
	if p.all == nil {
		return
	}
	var kept []core.Backend
	for i := 0; i < p.all.Len(); i++ {
		if b := p.all.Backend(i); p.stats[b.Address] != nil {
			kept = append(kept, b)
		}
	}
	if len(kept) < p.all.Len() {
		if all, err := p.all.Update(kept); err == nil {
			p.all = all
		}
	}
}

// current returns the balancer and upstreams of the latest snapshot, for
// the admin endpoint; bal is nil before the first request with a usable pool.
func (p *policy) current() (*core.Balancer, []*reverseproxy.Upstream, []*upstreamStats) {
	s := p.cur.Load()
	if s == nil || s.entry.err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.latest == nil {
			return nil, nil, nil
		}
		// Provisioned with static upstreams but not used yet.
		return p.latest.bal, nil, p.latest.stats
	}
	return s.entry.bal, s.ups, s.entry.stats
}
