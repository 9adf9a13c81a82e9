package caddyplugin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

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
// {http.request.cookie.sid}, or several combined. A request whose key is
// empty (no such header, say) goes to the fallback policy, by default
// nginx's own choice for an empty key: its weighted round robin.
//
// Caddyfile:
//
//	lb_policy url_hash [<weight>...] {
//		name         <name>
//		key          <placeholders>
//		mode         ketama|maglev|bounded|modulo
//		load_factor  <c>
//		fallback     <policy> [{ <policy options> }]
//		weight       <address> <weight>
//		down         <address>...
//		max_fails    [<address>] <n>
//		fail_timeout [<address>] <duration>
//		max_conns    [<address>] <n>
//		fail_status  <status|class>...
//		route        <address> <id>
//		drain        <address>...
//		sticky       cookie <name> {...} | route <sources...> | learn {...}
//	}
type URLHash struct {
	base

	// Key is the placeholder expression whose value is hashed. Default:
	// {http.request.uri}.
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

	// FallbackRaw is the policy for a request whose key is empty, as Caddy's
	// header, cookie and query policies have one. Default: none, that is
	// nginx's weighted round robin (smooth_wrr over the weights), which is
	// what nginx's hash does with an empty key.
	FallbackRaw json.RawMessage `json:"fallback,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`
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
	switch m.Mode {
	case "", core.HashKetama, core.HashMaglev, core.HashBounded, core.HashModulo:
	default:
		return fmt.Errorf("lb_policy url_hash: mode %q: unknown (want ketama, maglev, bounded or modulo)", m.Mode)
	}
	if m.Key == "" {
		m.Key = defaultHashKey
	}
	if m.FallbackRaw != nil {
		mod, err := ctx.LoadModule(m, "FallbackRaw")
		if err != nil {
			return fmt.Errorf("lb_policy url_hash: fallback: %v", err)
		}
		m.p.fallback = mod.(reverseproxy.Selector)
	}
	m.p.key = placeholderKey(m.Key)
	if err := m.p.setup(ctx, "url_hash", &m.Options,
		core.Config{Strategy: core.URLHash, HashMode: m.Mode, LoadFactor: m.LoadFactor}); err != nil {
		return err
	}
	for _, name := range unknownPlaceholders(m.Key) {
		m.p.logger.Warn("the key holds a placeholder Caddy does not know; it expands to nothing",
			zap.String("policy", m.p.id), zap.String("key", m.Key), zap.String("placeholder", "{"+name+"}"))
	}
	return nil
}

// UnmarshalCaddyfile sets up the policy from Caddyfile tokens.
func (m *URLHash) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return m.Options.unmarshal(d, func(d *caddyfile.Dispenser, name string) (bool, error) {
		switch name {
		case "key":
			if !d.NextArg() {
				return true, d.Errf("key: missing the placeholder expression")
			}
			if m.Key = d.Val(); m.Key == "" {
				return true, d.Errf("key \"\": empty; every request would go to the fallback policy")
			}
			return true, noMoreArgs(d, name)
		case "fallback":
			if !d.NextArg() {
				return true, d.Errf("fallback: missing the policy name")
			}
			mod, err := fallbackPolicy(d)
			m.FallbackRaw = mod
			return true, err
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

// fallbackPolicy reads a selection policy's tokens (the dispenser is on its
// name) into its JSON, as Caddy's own policies read their fallback.
func fallbackPolicy(d *caddyfile.Dispenser) (json.RawMessage, error) {
	name := d.Val()
	id := "http.reverse_proxy.selection_policies." + name
	unm, err := caddyfile.UnmarshalModule(d, id)
	if err != nil {
		return nil, err
	}
	sel, ok := unm.(reverseproxy.Selector)
	if !ok {
		return nil, d.Errf("fallback %s: module %s is not a selection policy", name, id)
	}
	return caddyconfig.JSONModuleObject(sel, "policy", name, nil), nil
}

// knownPlaceholders are the prefixes of the placeholders a request's
// replacer knows when Select runs (Caddy's global ones and its HTTP
// server's); the Caddyfile's shorthands ({uri}, {header.X}, {client_ip})
// are expanded to them before the policy sees the key.
var knownPlaceholders = []string{"http.request.", "http.vars.", "http.regexp.", "http.auth.", "http.matchers.", "http.error", "env.", "system.", "time.", "file."}

// unknownPlaceholders returns the names of the placeholders in expr that
// no known prefix covers.
func unknownPlaceholders(expr string) []string {
	var out []string
	for {
		i := strings.IndexByte(expr, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(expr[i:], '}')
		if j < 0 {
			return out
		}
		name := expr[i+1 : i+j]
		if k := strings.IndexByte(name, ':'); k >= 0 {
			name = name[:k] // {name:default}
		}
		known := false
		for _, p := range knownPlaceholders {
			known = known || strings.HasPrefix(name, p)
		}
		if !known && name != "" {
			out = append(out, name)
		}
		expr = expr[i+j+1:]
	}
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
