package caddyplugin

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/lbpack/lbpack/core"
)

// Options are the settings every lbpack policy shares: the upstreams'
// weights and per-address flags. Caddy has no per-upstream weight, so the
// policy carries them, either by position (like Caddy's own
// weighted_round_robin) or by dial address (which also works for dynamic
// upstreams, whose order and pointers change from request to request).
type Options struct {
	// Weights are positional: Weights[i] is the weight of the i-th upstream
	// in the order the reverse proxy lists them. When set, there must be one
	// weight per upstream. Positional weights need static upstreams; use
	// Upstreams with dynamic ones.
	Weights []int `json:"weights,omitempty"`

	// Upstreams holds per-upstream settings keyed by the upstream's dial
	// address exactly as the reverse proxy has it ("10.0.0.1:80",
	// "localhost:9001"). An upstream not listed weighs 1 and has no flags.
	Upstreams map[string]UpstreamOptions `json:"upstreams,omitempty"`
}

// UpstreamOptions are the settings of one upstream, named by its dial address.
type UpstreamOptions struct {
	// Weight is the upstream's share relative to the others; at least 1.
	// 0 means unset, that is 1 (or the positional weight).
	Weight int `json:"weight,omitempty"`

	// Backup upstreams are picked only when no other upstream is available.
	// The hash policies (url_hash, nginx_ip_hash) refuse backups, as nginx does.
	Backup bool `json:"backup,omitempty"`

	// Down takes the upstream out of rotation without removing it, so that
	// the hash policies keep the mapping of every other upstream.
	Down bool `json:"down,omitempty"`

	// SlowStart is the time over which an upstream that joins a running
	// pool, or comes back after Caddy's health checks had it unhealthy,
	// ramps its weight up from 10% to 100%.
	SlowStart caddy.Duration `json:"slow_start,omitempty"`
}

// optionParser handles the Caddyfile subdirectives that only one policy has.
// It returns false for a subdirective it does not know.
type optionParser func(d *caddyfile.Dispenser, name string) (bool, error)

// unmarshal reads the shared part of a policy's Caddyfile tokens:
//
//	lb_policy <name> [<weight>...] {
//		weight     <address> <weight>
//		backup     <address>...
//		down       <address>...
//		slow_start <address> <duration>
//		<policy options>
//	}
func (o *Options) unmarshal(d *caddyfile.Dispenser, extra optionParser) error {
	d.Next() // the policy name
	policy := d.Val()
	for d.NextArg() {
		w, err := parseWeight(d, "weight")
		if err != nil {
			return err
		}
		o.Weights = append(o.Weights, w)
	}
	for d.NextBlock(0) {
		switch name := d.Val(); name {
		case "weight":
			addr, err := addressArg(d, name)
			if err != nil {
				return err
			}
			if !d.NextArg() {
				return d.Errf("lb_policy %s: weight %s: missing the weight", policy, addr)
			}
			w, err := parseWeight(d, "weight "+addr)
			if err != nil {
				return err
			}
			if err := noMoreArgs(d, name); err != nil {
				return err
			}
			u := o.upstream(addr)
			if u.Weight != 0 {
				return d.Errf("lb_policy %s: weight %s: given twice", policy, addr)
			}
			u.Weight = w
			o.Upstreams[addr] = u
		case "backup", "down":
			if !d.NextArg() {
				return d.Errf("lb_policy %s: %s: want one or more upstream addresses", policy, name)
			}
			for {
				addr := d.Val()
				if err := checkDial(addr); err != nil {
					return d.Errf("lb_policy %s: %s %q: %v", policy, name, addr, err)
				}
				u := o.upstream(addr)
				if name == "backup" {
					u.Backup = true
				} else {
					u.Down = true
				}
				o.Upstreams[addr] = u
				if !d.NextArg() {
					break
				}
			}
		case "slow_start":
			addr, err := addressArg(d, name)
			if err != nil {
				return err
			}
			dur, err := durationArg(d, "slow_start "+addr)
			if err != nil {
				return err
			}
			u := o.upstream(addr)
			u.SlowStart = dur
			o.Upstreams[addr] = u
		default:
			if extra != nil {
				ok, err := extra(d, name)
				if err != nil {
					return err
				}
				if ok {
					continue
				}
			}
			return d.Errf("lb_policy %s: unknown option %q", policy, name)
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

// validate checks the options on their own, without the upstreams.
func (o *Options) validate() error {
	for i, w := range o.Weights {
		if w < 1 {
			return fmt.Errorf("weights[%d] %d: must be at least 1 (mark an upstream down instead)", i, w)
		}
	}
	for _, addr := range o.addresses() {
		u := o.Upstreams[addr]
		if err := checkDial(addr); err != nil {
			return fmt.Errorf("upstreams %q: %v", addr, err)
		}
		if u.Weight < 0 {
			return fmt.Errorf("upstreams %q: weight %d: must be at least 1", addr, u.Weight)
		}
		if u.SlowStart < 0 {
			return fmt.Errorf("upstreams %q: slow_start %v: must not be negative", addr, time.Duration(u.SlowStart))
		}
		if u.Weight != 0 && len(o.Weights) > 0 {
			return fmt.Errorf("upstreams %q: weight: give weights by position or by address, not both", addr)
		}
	}
	return nil
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
// backends with the configured weights and flags.
func (o *Options) backends(dials []string) ([]core.Backend, error) {
	if len(o.Weights) > 0 && len(o.Weights) != len(dials) {
		return nil, fmt.Errorf("weights: %d positional weights for %d upstreams; give one per upstream or use `weight <address> <n>`", len(o.Weights), len(dials))
	}
	out := make([]core.Backend, len(dials))
	for i, dial := range dials {
		b := core.Backend{Address: dial, Weight: 1}
		if len(o.Weights) > 0 {
			b.Weight = o.Weights[i]
		}
		if u, ok := o.Upstreams[dial]; ok {
			if u.Weight > 0 {
				b.Weight = u.Weight
			}
			b.Backup = u.Backup
			b.Down = u.Down
			b.SlowStart = time.Duration(u.SlowStart)
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
			return fmt.Errorf("upstreams %q: not one of the reverse proxy's upstreams %v", addr, dials)
		}
	}
	return nil
}

// parseWeight reads the current token as a weight; what names it in errors.
func parseWeight(d *caddyfile.Dispenser, what string) (int, error) {
	w, err := strconv.Atoi(d.Val())
	if err != nil {
		return 0, d.Errf("%s %q: not an integer", what, d.Val())
	}
	if w < 1 {
		return 0, d.Errf("%s %q: must be at least 1 (mark an upstream down instead)", what, d.Val())
	}
	return w, nil
}

// addressArg reads the next argument as an upstream dial address.
func addressArg(d *caddyfile.Dispenser, option string) (string, error) {
	if !d.NextArg() {
		return "", d.Errf("%s: missing the upstream address", option)
	}
	addr := d.Val()
	if err := checkDial(addr); err != nil {
		return "", d.Errf("%s %q: %v (want the upstream's dial address, host:port)", option, addr, err)
	}
	return addr, nil
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
	dur, err := caddy.ParseDuration(d.Val())
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s %q: want a positive duration", option, d.Val())
	}
	return caddy.Duration(dur), noMoreArgs(d, option)
}

// checkDial checks an upstream's dial address: core's host:port check, and
// no control characters (core accepts them; no host name or IP has one).
func checkDial(addr string) error {
	if i := strings.IndexFunc(addr, unicode.IsControl); i >= 0 {
		return fmt.Errorf("control character %q", addr[i])
	}
	return core.CheckAddress(addr)
}
