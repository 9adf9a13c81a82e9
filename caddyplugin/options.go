package caddyplugin

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/lbpack/lbpack/core"
)

// Options are the settings every lbpack policy shares: the upstreams'
// weights and per-address settings. Caddy has no per-upstream weight, so the
// policy carries them, either by position (like Caddy's own
// weighted_round_robin) or by dial address (which also works for dynamic
// upstreams, whose order and pointers change from request to request).
type Options struct {
	// Name is the policy's identity in GET /lbpack/state and in the
	// metrics' policy label: letters, digits and _ . - / : only, unique in
	// the config. Default: the policy's module name and 8 hex digits of a
	// hash of its configuration and upstreams, the same on every load of the
	// same configuration.
	Name string `json:"name,omitempty"`

	// Weights are positional: Weights[i] is the weight of the i-th upstream
	// in the order the reverse proxy lists them. When set, there must be one
	// weight per upstream. Positional weights need static upstreams; use
	// Upstreams with dynamic ones.
	Weights []int `json:"weights,omitempty"`

	// Upstreams holds per-upstream settings keyed by the upstream's dial
	// address exactly as the reverse proxy has it ("10.0.0.1:80",
	// "localhost:9001"). An upstream not listed weighs 1, has the
	// policy-wide settings below and no flags.
	Upstreams map[string]UpstreamOptions `json:"upstreams,omitempty"`

	// MaxFails, FailTimeout and MaxConns are the defaults of the
	// UpstreamOptions fields of the same names for every upstream.
	MaxFails    int            `json:"max_fails,omitempty"`
	FailTimeout caddy.Duration `json:"fail_timeout,omitempty"`
	MaxConns    int            `json:"max_conns,omitempty"`

	// FailStatus are the response statuses that make a try the upstream
	// answered count as its failure, written as Caddy's passive health
	// writes unhealthy_status: a status (503) or a class (5 for 5xx). Such
	// a try counts toward max_fails and raises fair's estimate rather than
	// lowering it. Default: 5xx for fair, which must not favour an upstream
	// for failing fast; none for the others, as nginx, which counts an
	// answer as a failure only for the http_ conditions of
	// proxy_next_upstream. Outside fair it needs max_fails.
	FailStatus []int `json:"fail_status,omitempty"`

	// Sticky is nginx's sticky sessions: a request bound to an upstream
	// (by a cookie, a route it carries, or a learnt session) goes there
	// while it can take it.
	Sticky *StickyOptions `json:"sticky,omitempty"`

	// policy is the module's name (for errors); the rest is the strategy's
	// core.Traits, which setup sets: hashed says it refuses slow starts (a
	// hash policy), fair that it times answers (and so follows failures
	// without max_fails), defaultFail its default failing statuses.
	policy      string
	hashed      bool
	fair        bool
	defaultFail string
	// sticky is Sticky compiled (setup sets it); scheme is the upstreams'
	// URL scheme, which Traefik's cookie value hashes.
	sticky *stickiness
	scheme string
}

// UpstreamOptions are the settings of one upstream, named by its dial address.
type UpstreamOptions struct {
	// Weight is the upstream's share relative to the others, from 1 to
	// 1000000. 0 means unset, that is 1 (or the positional weight).
	Weight int `json:"weight,omitempty"`

	// Backup upstreams are picked only when no other upstream is available.
	// The hash policies (url_hash, nginx_ip_hash) refuse backups, as nginx does.
	Backup bool `json:"backup,omitempty"`

	// Down takes the upstream out of rotation without removing it, so that
	// the hash policies keep the mapping of every other upstream.
	Down bool `json:"down,omitempty"`

	// SlowStart is the time over which an upstream that joins a running
	// pool, or comes back after Caddy's health checks had it unhealthy,
	// ramps its weight up from 10% to 100%. The hash policies refuse it (as
	// NGINX Plus does): they map keys by weight.
	SlowStart caddy.Duration `json:"slow_start,omitempty"`

	// MaxFails is nginx's max_fails: after this many failed tries within
	// FailTimeout the policy skips the upstream for FailTimeout, then lets
	// one request probe it. 0 (default) leaves failures to Caddy's passive
	// health checks.
	MaxFails int `json:"max_fails,omitempty"`

	// FailTimeout is nginx's fail_timeout, for MaxFails; default 10s.
	FailTimeout caddy.Duration `json:"fail_timeout,omitempty"`

	// MaxConns is nginx's max_conns: the policy sends the upstream at most
	// this many requests at once (counted by this policy; Caddy's own
	// max_requests counts all of the upstream's). 0: no cap.
	MaxConns int `json:"max_conns,omitempty"`

	// Route is nginx's route=: the upstream's sticky id, which a sticky
	// cookie or route names it by. Default: the MD5 of its address (or, for
	// a sticky cookie, its value mode's value). At most 32 bytes.
	Route string `json:"route,omitempty"`

	// Drain is nginx's drain: the upstream takes only the requests bound
	// to it by sticky sessions.
	Drain bool `json:"drain,omitempty"`
}

// optionParser handles the Caddyfile subdirectives that only one policy has.
// It returns false for a subdirective it does not know.
type optionParser func(d *caddyfile.Dispenser, name string) (bool, error)

// An addressOption is a per-upstream Caddyfile subdirective,
// `<name> <address> <value>` (or `<name> <address>...` for the flags); the
// ones in policyWide also have a policy-wide form, `<name> <value>`.
type addressOption struct {
	name string
	// on sets a flag (an option without value, for one or more
	// addresses) in u; nil for the options with a value.
	on func(u *UpstreamOptions)
	// set parses value into u; what names the option in errors. Not
	// called for flags.
	set func(u *UpstreamOptions, what, value string) error
	// given reports whether u has the option set.
	given func(u UpstreamOptions) bool
}

// addressOptions are the per-upstream subdirectives, in the order errors
// name them.
var addressOptions = []addressOption{
	{name: "weight", given: func(u UpstreamOptions) bool { return u.Weight != 0 },
		set: func(u *UpstreamOptions, what, value string) (err error) {
			u.Weight, err = parseWeight(value, what)
			return err
		}},
	{name: "backup", on: func(u *UpstreamOptions) { u.Backup = true }, given: func(u UpstreamOptions) bool { return u.Backup }},
	{name: "down", on: func(u *UpstreamOptions) { u.Down = true }, given: func(u UpstreamOptions) bool { return u.Down }},
	{name: "drain", on: func(u *UpstreamOptions) { u.Drain = true }, given: func(u UpstreamOptions) bool { return u.Drain }},
	{name: "route", given: func(u UpstreamOptions) bool { return u.Route != "" },
		set: func(u *UpstreamOptions, what, value string) error {
			u.Route = value
			return checkRoute(what, value)
		}},
	{name: "slow_start", given: func(u UpstreamOptions) bool { return u.SlowStart != 0 },
		set: func(u *UpstreamOptions, what, value string) (err error) {
			u.SlowStart, err = parseDuration(value, what)
			return err
		}},
	{name: "max_fails", given: func(u UpstreamOptions) bool { return u.MaxFails != 0 },
		set: func(u *UpstreamOptions, what, value string) (err error) {
			u.MaxFails, err = parseCount(value, what)
			return err
		}},
	{name: "fail_timeout", given: func(u UpstreamOptions) bool { return u.FailTimeout != 0 },
		set: func(u *UpstreamOptions, what, value string) (err error) {
			u.FailTimeout, err = parseDuration(value, what)
			return err
		}},
	{name: "max_conns", given: func(u UpstreamOptions) bool { return u.MaxConns != 0 },
		set: func(u *UpstreamOptions, what, value string) (err error) {
			u.MaxConns, err = parseCount(value, what)
			return err
		}},
}

// policyWide are the address options that also have a policy-wide form.
var policyWide = map[string]bool{"max_fails": true, "fail_timeout": true, "max_conns": true}

// setWide takes the policy-wide settings that u sets.
func (o *Options) setWide(u UpstreamOptions) {
	if u.MaxFails != 0 {
		o.MaxFails = u.MaxFails
	}
	if u.FailTimeout != 0 {
		o.FailTimeout = u.FailTimeout
	}
	if u.MaxConns != 0 {
		o.MaxConns = u.MaxConns
	}
}

// unmarshal reads the shared part of a policy's Caddyfile tokens:
//
//	lb_policy <name> [<weight>...] {
//		name         <name>
//		weight       <address> <weight>
//		backup       <address>...
//		down         <address>...
//		slow_start   <address> <duration>
//		max_fails    [<address>] <n>
//		fail_timeout [<address>] <duration>
//		max_conns    [<address>] <n>
//		fail_status  <status|class>...
//		route        <address> <id>
//		drain        <address>...
//		sticky       cookie <name> {...} | route <sources...> | learn {...}
//		<policy options>
//	}
//
// Every option may be given once (once per address for the per-address
// ones).
func (o *Options) unmarshal(d *caddyfile.Dispenser, extra optionParser) error {
	d.Next() // the policy name
	policy := d.Val()
	for d.NextArg() {
		w, err := parseWeight(d.Val(), "weight")
		if err != nil {
			return d.Errf("lb_policy %s: %v", policy, err)
		}
		o.Weights = append(o.Weights, w)
	}
	seen := map[string]bool{} // policy-wide options and per-address ones, as "name addr"
	once := func(what string) error {
		if seen[what] {
			return d.Errf("lb_policy %s: %s: given twice", policy, what)
		}
		seen[what] = true
		return nil
	}
	for d.NextBlock(0) {
		name := d.Val()
		if name == "name" {
			if err := o.unmarshalName(d, policy); err != nil {
				return err
			}
			if err := once(name); err != nil {
				return err
			}
			continue
		}
		if name == "sticky" {
			if err := once(name); err != nil {
				return err
			}
			s, err := unmarshalSticky(d)
			if err != nil {
				return fmt.Errorf("lb_policy %s: %w", policy, err)
			}
			o.Sticky = s
			continue
		}
		if name == "fail_status" {
			if err := once(name); err != nil {
				return err
			}
			if err := o.unmarshalFailStatus(d, policy); err != nil {
				return err
			}
			continue
		}
		opt := findOption(name)
		if opt == nil {
			if extra != nil {
				if err := once(name); err != nil {
					return err
				}
				ok, err := extra(d, name)
				if err != nil {
					// The policy's own options are named as the shared ones.
					return fmt.Errorf("lb_policy %s: %w", policy, err)
				}
				if ok {
					continue
				}
			}
			return d.Errf("lb_policy %s: unknown option %q", policy, name)
		}
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("lb_policy %s: %s: missing the upstream address", policy, name)
		}
		if opt.on != nil {
			for _, addr := range args {
				if err := checkOptionDial(name, addr); err != nil {
					return d.Errf("lb_policy %s: %v", policy, err)
				}
				if err := once(name + " " + addr); err != nil {
					return err
				}
				u := o.upstream(addr)
				opt.on(&u)
				o.Upstreams[addr] = u
			}
			continue
		}
		// `<name> <value>` (policy-wide) or `<name> <address> <value>`.
		switch {
		case len(args) == 1 && policyWide[name]:
			if err := once(name); err != nil {
				return err
			}
			var wide UpstreamOptions
			if err := opt.set(&wide, name, args[0]); err != nil {
				return d.Errf("lb_policy %s: %v", policy, err)
			}
			o.setWide(wide)
			continue
		case len(args) == 1:
			return d.Errf("lb_policy %s: %s %s: missing the value (want %s <address> <value>)", policy, name, args[0], name)
		case len(args) > 2:
			return d.Errf("lb_policy %s: %s: unexpected argument %q", policy, name, args[2])
		}
		addr := args[0]
		if err := checkOptionDial(name, addr); err != nil {
			return d.Errf("lb_policy %s: %v", policy, err)
		}
		if err := once(name + " " + addr); err != nil {
			return err
		}
		u := o.upstream(addr)
		if err := opt.set(&u, name+" "+addr, args[1]); err != nil {
			return d.Errf("lb_policy %s: %v", policy, err)
		}
		o.Upstreams[addr] = u
	}
	return nil
}

// unmarshalName reads the name option's argument.
func (o *Options) unmarshalName(d *caddyfile.Dispenser, policy string) error {
	args := d.RemainingArgs()
	switch {
	case len(args) == 0:
		return d.Errf("lb_policy %s: name: missing the name", policy)
	case len(args) > 1:
		return d.Errf("lb_policy %s: name: unexpected argument %q", policy, args[1])
	}
	if err := checkName(args[0]); err != nil {
		return d.Errf("lb_policy %s: %v", policy, err)
	}
	o.Name = args[0]
	return nil
}

// unmarshalFailStatus reads fail_status's arguments: statuses (503) and
// classes (5xx), as Caddy's unhealthy_status takes them.
func (o *Options) unmarshalFailStatus(d *caddyfile.Dispenser, policy string) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.Errf("lb_policy %s: fail_status: missing the statuses (want fail_status 5xx, or codes such as 502 503)", policy)
	}
	for _, arg := range args {
		codes, ok := statusCodes(arg)
		if !ok {
			return d.Errf("lb_policy %s: fail_status %q: want a status from 100 to 599, a class from 1xx to 5xx, or a range such as 500-504", policy, arg)
		}
		o.FailStatus = append(o.FailStatus, codes...)
	}
	return nil
}

// statusCodes reads one fail_status entry (core.ParseStatus) as Caddy's
// status matchers hold it: a status as itself, a class as its first digit
// (5 for 5xx), a range as each status in it.
func statusCodes(arg string) ([]int, bool) {
	lo, hi, ok := core.ParseStatus(arg)
	switch {
	case !ok:
		return nil, false
	case lo%100 == 0 && hi == lo+99:
		return []int{lo / 100}, true
	}
	codes := make([]int, 0, hi-lo+1)
	for c := lo; c <= hi; c++ {
		codes = append(codes, c)
	}
	return codes, true
}

// statusName writes a fail_status entry as the Caddyfile does: 503, 5xx.
func statusName(code int) string {
	if code >= 1 && code <= 5 {
		return strconv.Itoa(code) + "xx"
	}
	return strconv.Itoa(code)
}

// checkFailStatus checks fail_status: every entry a status or a class, none
// given twice or inside a class also given.
func (o *Options) checkFailStatus() error {
	for i, c := range o.FailStatus {
		if (c < 1 || c > 5) && (c < 100 || c > 599) {
			return fmt.Errorf("fail_status %d: want a status from 100 to 599 or a class from 1 to 5 (5 is 5xx)", c)
		}
		for _, prev := range o.FailStatus[:i] {
			switch {
			case prev == c:
				return fmt.Errorf("fail_status %s: given twice", statusName(c))
			case caddyhttp.StatusCodeMatches(c, prev) || caddyhttp.StatusCodeMatches(prev, c):
				return fmt.Errorf("fail_status %s and %s: one includes the other", statusName(prev), statusName(c))
			}
		}
	}
	if len(o.FailStatus) > 0 && !o.fair && o.MaxFails == 0 && !o.anyMaxFails() {
		return fmt.Errorf("fail_status %s: has no effect without max_fails (only fair follows failures without it)", statusName(o.FailStatus[0]))
	}
	return nil
}

// failStatus returns the statuses that count as an upstream's failure:
// fail_status, or the strategy's default (core.Traits.FailStatus: fair's
// is 5xx).
func (o *Options) failStatus() []int {
	if len(o.FailStatus) == 0 && o.defaultFail != "" {
		codes, _ := statusCodes(o.defaultFail)
		return codes
	}
	return o.FailStatus
}

// findOption returns the address option called name, or nil.
func findOption(name string) *addressOption {
	for i := range addressOptions {
		if addressOptions[i].name == name {
			return &addressOptions[i]
		}
	}
	return nil
}

// upstream returns the settings of addr, creating the map if needed.
func (o *Options) upstream(addr string) UpstreamOptions {
	if o.Upstreams == nil {
		o.Upstreams = make(map[string]UpstreamOptions)
	}
	return o.Upstreams[addr]
}

// given returns the names of the options u sets, as the user wrote them:
// "weight", "backup and down".
func given(u UpstreamOptions) string {
	var names []string
	for _, opt := range addressOptions {
		if opt.given(u) {
			names = append(names, opt.name)
		}
	}
	if len(names) == 0 {
		return "options for"
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// validate checks the options on their own, without the upstreams. Errors
// name the options as the Caddyfile writes them (the JSON fields have the
// same names).
func (o *Options) validate() error {
	if err := checkName(o.Name); o.Name != "" && err != nil {
		return err
	}
	for i, w := range o.Weights {
		if w < 1 || w > core.MaxWeight {
			return fmt.Errorf("weights[%d] %d: must be from 1 to %d (mark an upstream down instead)", i, w, core.MaxWeight)
		}
	}
	if o.MaxFails < 0 || o.MaxConns < 0 || o.FailTimeout < 0 {
		return fmt.Errorf("max_fails %d, max_conns %d, fail_timeout %v: must not be negative", o.MaxFails, o.MaxConns, time.Duration(o.FailTimeout))
	}
	if o.FailTimeout != 0 && o.MaxFails == 0 && !o.anyMaxFails() {
		return fmt.Errorf("fail_timeout %v: has no effect without max_fails", time.Duration(o.FailTimeout))
	}
	if err := o.checkFailStatus(); err != nil {
		return err
	}
	o.sticky = nil
	if o.Sticky != nil {
		st, err := o.Sticky.compile(o.scheme)
		if err != nil {
			return err
		}
		o.sticky = st
	}
	for _, addr := range o.addresses() {
		u := o.Upstreams[addr]
		if err := checkOptionDial(given(u), addr); err != nil {
			return err
		}
		if err := checkRoute("route "+addr, u.Route); u.Route != "" && err != nil {
			return err
		}
		switch {
		case u.Weight < 0 || u.Weight > core.MaxWeight:
			return fmt.Errorf("weight %s %d: must be from 1 to %d", addr, u.Weight, core.MaxWeight)
		case u.Weight != 0 && len(o.Weights) > 0:
			return fmt.Errorf("weight %s: give weights by position or by address, not both", addr)
		case u.Backup && u.Down:
			return fmt.Errorf("backup and down %s: an upstream is a backup or down, not both", addr)
		case u.Down && u.Drain:
			return fmt.Errorf("down and drain %s: an upstream is down or draining, not both (nginx keeps the one written last)", addr)

		case u.SlowStart < 0:
			return fmt.Errorf("slow_start %s %v: must not be negative", addr, time.Duration(u.SlowStart))
		case u.SlowStart != 0 && o.hashed:
			return fmt.Errorf("slow_start %s: a hash policy maps keys by weight and cannot ramp an upstream up (NGINX Plus refuses slow_start with hash too)", addr)
		case u.MaxFails < 0 || u.MaxConns < 0 || u.FailTimeout < 0:
			return fmt.Errorf("%s %s: must not be negative", given(u), addr)
		case u.FailTimeout != 0 && u.MaxFails == 0 && o.MaxFails == 0:
			return fmt.Errorf("fail_timeout %s %v: has no effect without max_fails", addr, time.Duration(u.FailTimeout))
		}
	}
	return nil
}

// anyMaxFails reports whether some upstream has its own max_fails.
func (o *Options) anyMaxFails() bool {
	for _, u := range o.Upstreams {
		if u.MaxFails != 0 {
			return true
		}
	}
	return false
}

// tracks reports whether the options need the policy to report every try
// to the balancer (max_fails counts failures, max_conns requests in flight).
func (o *Options) tracks() bool {
	if o.MaxFails != 0 || o.MaxConns != 0 {
		return true
	}
	for _, u := range o.Upstreams {
		if u.MaxFails != 0 || u.MaxConns != 0 {
			return true
		}
	}
	return false
}

// addresses returns the addresses with settings, sorted, so that errors and
// checks do not depend on map order.
func (o *Options) addresses() []string {
	out := make([]string, 0, len(o.Upstreams))
	for a := range o.Upstreams {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// backends turns the dial addresses of a pool, in pool order, into core
// backends with the configured weights and settings.
func (o *Options) backends(dials []string) ([]core.Backend, error) {
	if len(o.Weights) > 0 && len(o.Weights) != len(dials) {
		return nil, fmt.Errorf("weights: %d positional weights for %d upstreams; give one per upstream or use `weight <address> <n>`", len(o.Weights), len(dials))
	}
	out := make([]core.Backend, len(dials))
	for i, dial := range dials {
		b := core.Backend{Address: dial, Weight: 1, MaxFails: o.MaxFails, FailTimeout: time.Duration(o.FailTimeout), MaxConns: o.MaxConns}
		if len(o.Weights) > 0 {
			b.Weight = o.Weights[i]
		}
		if u, ok := o.Upstreams[dial]; ok {
			if u.Weight > 0 {
				b.Weight = u.Weight
			}
			b.Backup = u.Backup
			b.Down = u.Down
			b.Drain = u.Drain
			b.Route = u.Route
			b.SlowStart = time.Duration(u.SlowStart)
			if u.MaxFails != 0 {
				b.MaxFails = u.MaxFails
			}
			if u.FailTimeout != 0 {
				b.FailTimeout = time.Duration(u.FailTimeout)
			}
			if u.MaxConns != 0 {
				b.MaxConns = u.MaxConns
			}
		}
		if b.Route == "" && o.sticky != nil && o.sticky.value != nil {
			b.Route = o.sticky.value(dial)
		}
		out[i] = b
	}
	return out, nil
}

// checkStatic checks the options against a static upstream list known at
// provision time: the positional weight count and every address named.
func (o *Options) checkStatic(dials []string) error {
	if _, err := o.backends(dials); err != nil {
		return err
	}
	have := make(map[string]bool, len(dials))
	for _, d := range dials {
		have[d] = true
	}
	for _, addr := range o.addresses() {
		if !have[addr] {
			return fmt.Errorf("%s %s: not one of the reverse proxy's upstreams %v (options name an upstream by its dial address as written there)", given(o.Upstreams[addr]), addr, dials)
		}
	}
	return nil
}

// coreField matches what core's errors call a backend: "backends[2]" and
// the field after it, if any.
var coreField = regexp.MustCompile(`backends\[(\d+)\](?:\.(\w+))?`)

// explain rewrites an error of core's for the backends over dials in the
// words of the Caddyfile: the upstream's address for "backends[i]", the
// policy for core's strategy name, mode for hash_mode.
func explain(err error, dials []string, strategy, policy string) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "lbpack: ")
	msg = coreField.ReplaceAllStringFunc(msg, func(s string) string {
		m := coreField.FindStringSubmatch(s)
		i, _ := strconv.Atoi(m[1])
		addr := "#" + m[1]
		if i < len(dials) {
			addr = dials[i]
		}
		switch m[2] {
		case "", "address":
			return "upstream " + addr
		}
		return m[2] + " " + addr
	})
	msg = strings.ReplaceAll(msg, "strategy "+strconv.Quote(strategy), "lb_policy "+policy)
	msg = strings.ReplaceAll(msg, "hash_mode", "mode")
	msg = strings.ReplaceAll(msg, "backends: every backend", "upstreams: every upstream")
	return fmt.Errorf("lb_policy %s: %s", policy, msg)
}

// parseWeight parses a weight; what names it in errors.
func parseWeight(s, what string) (int, error) {
	w, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: not an integer", what, s)
	}
	if w < 1 || w > core.MaxWeight {
		return 0, fmt.Errorf("%s %q: must be from 1 to %d (mark an upstream down instead)", what, s, core.MaxWeight)
	}
	return w, nil
}

// parseCount parses a count of at least 1.
func parseCount(s, what string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s %q: want a whole number of at least 1", what, s)
	}
	return n, nil
}

// parseDuration parses a positive duration.
func parseDuration(s, what string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive duration", what, s)
	}
	return caddy.Duration(dur), nil
}

// noMoreArgs fails when a subdirective has extra arguments.
func noMoreArgs(d *caddyfile.Dispenser, option string) error {
	if d.NextArg() {
		return d.Errf("%s: unexpected argument %q", option, d.Val())
	}
	return nil
}

// durationArg reads the next argument as a positive duration.
func durationArg(d *caddyfile.Dispenser, option string) (caddy.Duration, error) {
	if !d.NextArg() {
		return 0, d.Errf("%s: missing the duration", option)
	}
	dur, err := parseDuration(d.Val(), option)
	if err != nil {
		return 0, d.Err(err.Error())
	}
	return dur, noMoreArgs(d, option)
}

// checkOptionDial checks the address an option names (options, as the
// user wrote them: "weight", "backup and down").
func checkOptionDial(options, addr string) error {
	if err := checkDial(addr); err != nil {
		return fmt.Errorf("%s %q: %v (options name an upstream by its dial address)", options, addr, err)
	}
	return nil
}

// checkDial checks an upstream's dial address: core's host:port check, no
// control characters (core accepts them; no host name or IP has one), and
// no placeholder: Caddy dials what a placeholder expands to per request,
// while the policy keys an upstream's weight, counters and health by the
// address and the hash policies hash it, so all of them would follow the
// placeholder's text, not the upstream dialled.
func checkDial(addr string) error {
	if i := strings.IndexFunc(addr, unicode.IsControl); i >= 0 {
		return fmt.Errorf("control character %q", addr[i])
	}
	if strings.ContainsAny(addr, "{}") {
		return errors.New("a placeholder in the dial address: lbpack keys an upstream by its address, which must be the one dialled; give the upstreams literally, or as dynamic upstreams")
	}
	return core.CheckAddress(addr)
}
