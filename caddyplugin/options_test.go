package caddyplugin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// JSON configs get the same words as the Caddyfile: mode, the upstream's
// address, the policy's own name.
func TestJSONErrors(t *testing.T) {
	const ups = `[{"dial":"10.0.0.1:80"},{"dial":"10.0.0.2:80"}]`
	cfg := func(policy string) []byte {
		return []byte(`{"admin":{"disabled":true},"apps":{"http":{"servers":{"s":{"listen":[":0"],"routes":[{"handle":[{"handler":"reverse_proxy","upstreams":` + ups + `,"load_balancing":{"selection_policy":` + policy + `}}]}]}}}}}`)
	}
	for _, tt := range []struct{ policy, want string }{
		{`{"policy":"url_hash","mode":"zigzag"}`, `lb_policy url_hash: mode "zigzag": unknown`},
		{`{"policy":"url_hash","load_factor":1.5}`, `lb_policy url_hash: load_factor 1.5: only url_hash's bounded mode`},
		{`{"policy":"smooth_wrr","upstreams":{"10.0.0.2:80":{"weight":2000000}}}`, `lb_policy smooth_wrr: weight 10.0.0.2:80 2000000: must be from 1 to 1000000`},
		{`{"policy":"nginx_ip_hash","upstreams":{"10.0.0.2:80":{"backup":true}}}`, `lb_policy nginx_ip_hash: backup 10.0.0.2:80: lb_policy nginx_ip_hash does not accept backup backends`},
		{`{"policy":"fair","upstreams":{"10.0.0.2:80":{"backup":true,"down":true}}}`, `lb_policy fair: backup and down 10.0.0.2:80`},
		{`{"policy":"smooth_wrr","upstreams":{"10.0.0.9:80":{"backup":true}}}`, `lb_policy smooth_wrr: backup 10.0.0.9:80: not one of the reverse proxy's upstreams`},
		{`{"policy":"gcd_wrr","max_conns":-1}`, `lb_policy gcd_wrr: max_fails 0, max_conns -1`},
		{`{"policy":"fair","fail_status":[0]}`, `lb_policy fair: fail_status 0: want a status from 100 to 599 or a class from 1 to 5 (5 is 5xx)`},
		{`{"policy":"fair","fail_status":[600]}`, `lb_policy fair: fail_status 600: want a status`},
		{`{"policy":"fair","fail_status":[503,5]}`, `lb_policy fair: fail_status 503 and 5xx: one includes the other`},
		{`{"policy":"gcd_wrr","fail_status":[502]}`, `lb_policy gcd_wrr: fail_status 502: has no effect without max_fails`},
		{`{"policy":"smooth_wrr","upstreams":{"backend-a":{"weight":2}}}`, `lb_policy smooth_wrr: weight "backend-a": want host:port (options name an upstream by its dial address)`},
		{`{"policy":"fair","upstreams":{"10.0.0.2:80":{"max_conns":-2}}}`, `lb_policy fair: max_conns 10.0.0.2:80: must not be negative`},
	} {
		err := validate(cfg(tt.policy))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v\nwant an error containing %s", tt.policy, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "backends[") || strings.Contains(err.Error(), "hash_mode")) {
			t.Errorf("%s: %v names core's fields", tt.policy, err)
		}
	}
}

// observe makes m log to an observer and returns it.
func observed(m selector) *observer.ObservedLogs {
	core, logs := observer.New(zapcore.WarnLevel)
	m.pol().logger = zap.New(core)
	return logs
}

// Warned once in Caddy's log: an option for an address the (dynamic)
// upstreams do not have, every upstream down, an unknown key placeholder.
func TestWarnings(t *testing.T) {
	// weight localhost:18811 while the source gives 127.0.0.1:18811.
	m := &SmoothWRR{base: base{Options: Options{Upstreams: map[string]UpstreamOptions{"localhost:18811": {Weight: 5}}}}}
	provision(t, m, &health{})
	logs := observed(m)
	for i := 0; i < 3; i++ {
		m.Select(pool("127.0.0.1:18811", abc[i]), request("/", nil), nil)
	}
	if got := logs.FilterMessageSnippet("not among the upstreams").All(); len(got) != 1 || got[0].ContextMap()["option"] != "weight localhost:18811" {
		t.Errorf("unmatched option: %d warnings %v, want one naming weight localhost:18811", len(got), got)
	}

	// Every upstream down: Select answers nil, and says why once.
	d := &SmoothWRR{base: base{Options: Options{Upstreams: map[string]UpstreamOptions{abc[0]: {Down: true}, abc[1]: {Down: true}}}}}
	provision(t, d, &health{})
	logs = observed(d)
	for i := 0; i < 3; i++ {
		if u := d.Select(pool(abc[:2]...), request("/", nil), nil); u != nil {
			t.Fatalf("every upstream down: picked %s", u.Dial)
		}
	}
	if n := logs.FilterMessageSnippet("every upstream is marked down").Len(); n != 1 {
		t.Errorf("every upstream down: %d warnings, want 1", n)
	}

	// A key placeholder Caddy does not know (a JSON config's {uri}, which
	// only the Caddyfile expands) is warned of at provision.
	u := &URLHash{Key: "{uri}-{http.request.header.X-A}"}
	logs = observed(u)
	provision(t, u, &health{})
	if got := logs.FilterMessageSnippet("placeholder Caddy does not know").All(); len(got) != 1 || got[0].ContextMap()["placeholder"] != "{uri}" {
		t.Errorf("unknown placeholder: %v, want one warning naming {uri}", got)
	}
}

// url_hash's fallback takes the requests whose key is empty; without one,
// they go to nginx's weighted round robin.
func TestURLHashFallback(t *testing.T) {
	static := pool(abc...)
	noKey := func(m selector) string {
		var out []string
		for i := 0; i < 10; i++ {
			u := m.Select(static, request("/", nil), nil)
			out = append(out, names[u.Dial])
		}
		return strings.Join(out, " ")
	}
	plain := &URLHash{base: base{Options: Options{Weights: []int{5, 3, 2}}}, Key: "{http.request.header.X-User}"}
	provision(t, plain, &health{})
	if got, want := noKey(plain), "a b c a a b a c b a"; got != want {
		t.Errorf("empty key, no fallback: %s, want nginx's smooth round robin %s", got, want)
	}
	// A fallback that is easy to tell: everything to the one heavy upstream
	// (nginx_ip_hash over one client address).
	fb := &URLHash{base: base{Options: Options{Weights: []int{5, 3, 2}}}, Key: "{http.request.header.X-User}",
		FallbackRaw: []byte(`{"policy":"nginx_ip_hash"}`)}
	provision(t, fb, &health{})
	ip := &NginxIPHash{}
	provision(t, ip, &health{})
	want := names[ip.Select(static, request("/", nil), nil).Dial]
	if got := noKey(fb); got != strings.TrimSpace(strings.Repeat(want+" ", 10)) {
		t.Errorf("empty key, fallback nginx_ip_hash: %s, want %s each time", got, want)
	}
}

// Caddy's cookie policy as url_hash's fallback gets the response writer: a
// request without a key gets an upstream and the cookie that pins it (the
// HMAC-SHA256 of its dial address, Caddy's format), and the next keyless
// request that brings the cookie back goes to the same upstream.
func TestURLHashCookieFallback(t *testing.T) {
	static := pool(abc...)
	m := &URLHash{Key: "{http.request.header.X-User}",
		FallbackRaw: []byte(`{"policy":"cookie","fallback":{"policy":"round_robin"}}`)}
	provision(t, m, &health{})
	mac := hmac.New(sha256.New, nil)
	var first string
	for i, want := range []string{"10.0.0.2:80", "10.0.0.3:80"} {
		w := httptest.NewRecorder()
		u := m.Select(static, request("/", nil), w)
		if u == nil || u.Dial != want {
			t.Fatalf("keyless request %d: picked %v, want %s (round_robin behind cookie)", i+1, u, want)
		}
		mac.Reset()
		mac.Write([]byte(want))
		c := w.Result().Cookies()
		if len(c) != 1 || c[0].Name != "lb" || c[0].Value != hex.EncodeToString(mac.Sum(nil)) {
			t.Fatalf("keyless request %d: cookies %v, want lb=HMAC(%s)", i+1, c, want)
		}
		if first == "" {
			first = c[0].Value
		}
	}
	r := request("/", nil)
	r.AddCookie(&http.Cookie{Name: "lb", Value: first})
	w := httptest.NewRecorder()
	if u := m.Select(static, r, w); u == nil || u.Dial != "10.0.0.2:80" || w.Header().Get("Set-Cookie") != "" {
		t.Errorf("keyless request with the cookie of 10.0.0.2:80: picked %v, Set-Cookie %q; want 10.0.0.2:80 and no new cookie", u, w.Header().Get("Set-Cookie"))
	}
}

// max_conns caps the tries in flight per upstream, in a policy that does not
// otherwise track them; max_fails takes a failing upstream out for
// fail_timeout.
func TestMaxConnsAndMaxFails(t *testing.T) {
	static := pool(abc...)
	m := &SmoothWRR{base: base{Options: Options{MaxConns: 1}}}
	provision(t, m, &health{})
	var held []string
	reqs := make([]*http.Request, 4)
	for i := range reqs {
		reqs[i] = request("/", nil)
		if u := m.Select(static, reqs[i], nil); u != nil {
			held = append(held, names[u.Dial])
		} else {
			held = append(held, "-")
		}
	}
	if got := strings.Join(held, " "); got != "a b c -" {
		t.Errorf("max_conns 1, four requests at once: %s, want a b c -", got)
	}
	cancelRequest(reqs[1]) // b's request ends
	waitInFlight(t, &m.p, abc[1], 0)
	if u := m.Select(static, request("/", nil), nil); u == nil || u.Dial != abc[1] {
		t.Errorf("b freed: picked %v, want b", u)
	}
	for _, r := range reqs {
		cancelRequest(r)
	}

	f := &SmoothWRR{base: base{Options: Options{Upstreams: map[string]UpstreamOptions{abc[0]: {MaxFails: 1, FailTimeout: caddyDuration(time.Hour)}}}}}
	provision(t, f, &health{})
	r := request("/", nil)
	if u := f.Select(static, r, nil); u.Dial != abc[0] {
		t.Fatalf("first pick %s, want a", names[u.Dial])
	}
	f.Select(static, r, nil) // a retry: a's try failed
	cancelRequest(r)
	counts := map[string]int{}
	for i := 0; i < 30; i++ {
		r := request("/", nil)
		counts[names[f.Select(static, r, nil).Dial]]++
		r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("http.reverse_proxy.upstream.latency", time.Millisecond)
		cancelRequest(r)
	}
	if counts["a"] != 0 || counts["b"] != 15 || counts["c"] != 15 {
		t.Errorf("a failed once with max_fails 1: %v over 30 requests, want none to a", counts)
	}
	waitIdle(t, &f.p)
}

// waitInFlight waits (at most a second) until addr has n tries in flight.
func waitInFlight(t *testing.T, p *policy, addr string, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		bal, _, _ := p.current()
		if bal.InFlight(bal.Index(addr)) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %d in flight after 1s", addr, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func caddyDuration(d time.Duration) caddy.Duration { return caddy.Duration(d) }

// unknownPlaceholders knows what the Caddyfile's shorthands expand to and
// Caddy's global placeholders; it names the rest.
func TestUnknownPlaceholders(t *testing.T) {
	for _, tt := range []struct{ expr, want string }{
		{"{http.request.uri}", ""},
		{"{http.vars.client_ip}-{http.request.header.X-User}", ""},
		{"{http.request.uri.query.k}{http.request.cookie.sid}{http.regexp.name.1}", ""},
		{"{env.SHARD}:{time.now.year}:{system.hostname}", ""},
		{"literal text only", ""},
		{"{uri}", "uri"},
		{"{http.reverse_proxy.upstream.hostport}", "http.reverse_proxy.upstream.hostport"},
		{"{http.request.uri}/{header.X}/{client_ip}", "header.X client_ip"},
		{"{unclosed", ""},
	} {
		if got := strings.Join(unknownPlaceholders(tt.expr), " "); got != tt.want {
			t.Errorf("%q: unknown %q, want %q", tt.expr, got, tt.want)
		}
	}
}
