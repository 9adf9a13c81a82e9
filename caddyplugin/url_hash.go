package caddyplugin

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/lbpack/lbpack/core"
)

func init() {
	caddy.RegisterModule(new(URLHash))
}

// defaultHashKey is what url_hash hashes unless told otherwise.
const defaultHashKey = "{http.request.uri}"

// URLHash sends equal keys to the same upstream, like nginx's
// "hash $key [consistent]". The key is any Caddy placeholder expression:
// {http.request.uri} (default), {client_ip} (the client address as Caddy's
// trusted_proxies determine it), {http.request.header.X-User},
// {http.request.cookie.sid}, or several combined.
//
// Caddyfile:
//
//	lb_policy url_hash [<weight>...] {
//		key         <placeholders>
//		mode        ketama|maglev|bounded|modulo
//		load_factor <c>
//		weight      <address> <weight>
//		down        <address>...
//		slow_start  <address> <duration>
//	}
type URLHash struct {
	base

	// Key is the placeholder expression whose value is hashed; an empty
	// value is hashed like any other. Default: {http.request.uri}.
	Key string `json:"key,omitempty"`

	// Mode is the mapping from hash to upstream: "ketama" (default; nginx's
	// consistent hashing: removing an upstream moves only its keys),
	// "maglev" (a lookup table: even spread, one array index per pick),
	// "bounded" (consistent, but no upstream takes more than load_factor
	// times the mean of requests in flight) or "modulo" (nginx's plain
	// hash: even, but most keys move when the pool changes).
	Mode string `json:"mode,omitempty"`

	// LoadFactor is the bounded mode's c: an upstream takes at most
	// ceil(c * mean) requests in flight. 0 means 1.25; otherwise above 1.
	LoadFactor float64 `json:"load_factor,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*URLHash) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.url_hash",
		New: func() caddy.Module { return new(URLHash) },
	}
}

// Provision checks the options against the reverse proxy's upstreams and
// prepares the balancer.
func (m *URLHash) Provision(ctx caddy.Context) error {
	if m.Key == "" {
		m.Key = defaultHashKey
	}
	m.p.key = placeholderKey(m.Key)
	m.p.track = m.Mode == core.HashBounded // bounded counts requests in flight
	return m.p.setup(ctx, "url_hash", &m.Options,
		core.Config{Strategy: core.URLHash, HashMode: m.Mode, LoadFactor: m.LoadFactor})
}

// UnmarshalCaddyfile sets up the policy from Caddyfile tokens.
func (m *URLHash) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return m.Options.unmarshal(d, func(d *caddyfile.Dispenser, name string) (bool, error) {
		switch name {
		case "key":
			if !d.NextArg() {
				return true, d.Errf("key: missing the placeholder expression")
			}
			m.Key = d.Val()
			return true, noMoreArgs(d, name)
		case "mode":
			if !d.NextArg() {
				return true, d.Errf("mode: missing (want ketama, maglev, bounded or modulo)")
			}
			switch d.Val() {
			case core.HashKetama, core.HashMaglev, core.HashBounded, core.HashModulo:
				m.Mode = d.Val()
			default:
				return true, d.Errf("mode %q: unknown (want ketama, maglev, bounded or modulo)", d.Val())
			}
			return true, noMoreArgs(d, name)
		case "load_factor":
			if !d.NextArg() {
				return true, d.Errf("load_factor: missing the factor")
			}
			c, err := strconv.ParseFloat(d.Val(), 64)
			if err != nil || !(c > 1) {
				return true, d.Errf("load_factor %q: want a number above 1", d.Val())
			}
			m.LoadFactor = c
			return true, noMoreArgs(d, name)
		}
		return false, nil
	})
}

// placeholderKey returns a key function that expands expr with the
// request's replacer. A lone placeholder, the usual key, is looked up
// directly: no template scan and, for string values, no allocation.
func placeholderKey(expr string) func(*http.Request) string {
	if name, ok := strings.CutPrefix(expr, "{"); ok && strings.HasSuffix(name, "}") &&
		!strings.ContainsAny(name[:len(name)-1], "{}:") {
		name = name[:len(name)-1]
		return func(r *http.Request) string {
			repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
			if !ok {
				return ""
			}
			s, _ := repl.GetString(name)
			return s
		}
	}
	return func(r *http.Request) string {
		repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if !ok {
			return ""
		}
		return repl.ReplaceAll(expr, "")
	}
}

// Interface guards
var (
	_ caddy.Provisioner     = (*URLHash)(nil)
	_ caddy.Validator       = (*URLHash)(nil)
	_ caddy.CleanerUpper    = (*URLHash)(nil)
	_ reverseproxy.Selector = (*URLHash)(nil)
	_ caddyfile.Unmarshaler = (*URLHash)(nil)
)
