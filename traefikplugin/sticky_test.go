package traefikplugin

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// The ids a server's cookie carries in the other value modes, computed
// here from their definitions (nginx's is core.StickyID, which the sticky
// replay holds to nginx's bytes).

func hmacHex(secret, data string) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(data))
	return hex.EncodeToString(h.Sum(nil))
}

func sha16(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:])[:16]
}

// stickyServers are the two servers the configuration tests use; the
// second is written without its port.
var stickyServers = []string{"http://10.0.0.1:8001", "http://10.0.0.2"}

// TestParseSticky: each setting of sticky, and of a server's route and
// drain, as the request path sees it: the cookie's header for server 0 at
// a fixed time, each backend's id and drain, the sources.
func TestParseSticky(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 4, 52, 0, time.UTC)
	a, b := "10.0.0.1:8001", "10.0.0.2:80"
	for _, c := range []struct {
		name    string
		edit    func(*Config)
		cookie  string   // Set-Cookie naming server 0 at now; "" without the cookie
		ids     []string // the backends' ids
		drain   string   // the backends' Drain, as 0s and 1s
		sources string   // route's, or learn's create and lookup
		learn   string   // timeout/max/header
	}{
		{"off", func(c *Config) {}, "", []string{core.StickyID(a), core.StickyID(b)}, "00", "", ""},
		{"cookie", func(c *Config) { c.Sticky.Cookie.Name = "srv" }, "srv=" + core.StickyID(a), []string{core.StickyID(a), core.StickyID(b)}, "00", "", ""},
		{"attributes", func(c *Config) {
			c.Sticky.Cookie = StickyCookie{Name: "srv_id", MaxAge: 3600, Domain: "example.com", Path: "/", HTTPOnly: true, Secure: true, SameSite: "Lax"}
		}, "srv_id=" + core.StickyID(a) + "; expires=Wed, 02-Dec-26 01:04:52 GMT; max-age=3600; domain=example.com; httponly; secure; samesite=Lax; path=/",
			[]string{core.StickyID(a), core.StickyID(b)}, "00", "", ""},
		{"expires max", func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", Expires: "max"} },
			"srv=" + core.StickyID(a) + "; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000", []string{core.StickyID(a), core.StickyID(b)}, "00", "", ""},
		{"expires units", func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", Expires: "1d12h"} },
			"srv=" + core.StickyID(a) + "; expires=Thu, 03-Dec-26 12:04:52 GMT; max-age=129600", []string{core.StickyID(a), core.StickyID(b)}, "00", "", ""},
		{"expires 0", func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", Expires: "0"} },
			"srv=" + core.StickyID(a) + "; expires=Wed, 02-Dec-26 00:04:52 GMT; max-age=0", []string{core.StickyID(a), core.StickyID(b)}, "00", "", ""},
		{"maxAge -1", func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", MaxAge: -1} },
			"srv=" + core.StickyID(a) + "; expires=Wed, 02-Dec-26 00:04:52 GMT; max-age=0", []string{core.StickyID(a), core.StickyID(b)}, "00", "", ""},
		{"value caddy", func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "lb", Value: "caddy", Secret: "S"} },
			"lb=" + hmacHex("S", a), []string{hmacHex("S", a), hmacHex("S", b)}, "00", "", ""},
		{"value caddy without secret", func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "lb", Value: "caddy"} },
			"lb=" + hmacHex("", a), []string{hmacHex("", a), hmacHex("", b)}, "00", "", ""},
		{"value traefik", func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "lb", Value: "traefik"} },
			"lb=" + sha16(stickyServers[0]), []string{sha16(stickyServers[0]), sha16(stickyServers[1])}, "00", "", ""},
		{"value nginx with a secret", func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", Value: "nginx", Secret: "S"} },
			"srv=" + hmacHex("S", a)[:32], []string{hmacHex("S", a)[:32], hmacHex("S", b)[:32]}, "00", "", ""},
		{"route and secret", func(c *Config) {
			c.Sticky.Cookie = StickyCookie{Name: "srv", Secret: "S"}
			c.Servers[0].Route = "a"
		}, "srv=a", []string{"a", hmacHex("S", b)[:32]}, "00", "", ""},
		{"route and drain without sticky", func(c *Config) { c.Servers[0].Route, c.Servers[1].Drain = "a", true },
			"", []string{"a", core.StickyID(b)}, "01", "", ""},
		{"sticky route", func(c *Config) { c.Sticky.Route = []string{"query:route", " cookie:route", "header:X-Route"} },
			"", []string{core.StickyID(a), core.StickyID(b)}, "00", "query:route cookie:route header:X-Route", ""},
		{"learn", func(c *Config) {
			c.Sticky.Learn = StickyLearn{Create: []string{"upstream_cookie:sess", "upstream_header:X-Sess"}, Lookup: []string{"cookie:sess"}, Timeout: "1h", Header: true, MaxSessions: 100}
		}, "", []string{core.StickyID(a), core.StickyID(b)}, "00", "upstream_cookie:sess upstream_header:X-Sess / cookie:sess", "1h0m0s/100/true"},
		{"learn defaults", func(c *Config) {
			c.Sticky.Learn = StickyLearn{Create: []string{"upstream_cookie:sess"}, Lookup: []string{"cookie:sess", "query:sess"}}
		}, "", []string{core.StickyID(a), core.StickyID(b)}, "00", "upstream_cookie:sess / cookie:sess query:sess", "10m0s/0/false"},
	} {
		cfg := withServers(CreateConfig(), stickyServers...)
		c.edit(cfg)
		s, err := parse(cfg)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		b, err := core.New(s.balancer)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var ids []string
		drain := ""
		for i, be := range s.balancer.Backends {
			ids = append(ids, b.ID(i))
			drain += map[bool]string{false: "0", true: "1"}[be.Drain]
		}
		cookie, sources, learn := "", "", ""
		if ss := s.sticky; ss != nil {
			if ss.rule.Cookie != nil {
				cookie = ss.rule.Cookie.Header(b.ID(0), now)
			}
			sources = joinSources(ss.rule.Route)
			if ss.learns() {
				sources = joinSources(ss.rule.Create) + " / " + joinSources(ss.rule.Lookup)
				learn = ss.timeout.String() + "/" + strconv.Itoa(ss.max) + "/" + map[bool]string{false: "false", true: "true"}[ss.header]
			}
		}
		if cookie != c.cookie || strings.Join(ids, " ") != strings.Join(c.ids, " ") || drain != c.drain || sources != c.sources || learn != c.learn {
			t.Errorf("%s:\n cookie %q\n   want %q\n ids %q, want %q\n drain %s, want %s\n sources %q, want %q\n learn %q, want %q",
				c.name, cookie, c.cookie, ids, c.ids, drain, c.drain, sources, c.sources, learn, c.learn)
		}
	}
}

func joinSources(srcs []sticky.Source) string {
	var out []string
	for _, s := range srcs {
		out = append(out, s.String())
	}
	return strings.Join(out, " ")
}

// TestStickyErrors: every sticky setting the middleware refuses, with the
// YAML key and the value in the message.
func TestStickyErrors(t *testing.T) {
	long := strings.Repeat("r", 33)
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Sticky.Cookie.Name, c.Sticky.Route = "srv", []string{"cookie:r"} }, "sticky: set one of cookie, route and learn"},
		{func(c *Config) { c.Sticky.Route, c.Sticky.Learn.Lookup = []string{"cookie:r"}, []string{"cookie:s"} }, "sticky: set one of cookie, route and learn"},
		{func(c *Config) { c.Sticky.Cookie.Path = "/" }, "sticky.cookie.name: missing (the cookie's name turns it on)"},
		{func(c *Config) { c.Sticky.Cookie.Name = "s rv" }, `sticky.cookie.name "s rv": not a valid cookie name`},
		{func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", MaxAge: -2} }, "sticky.cookie.maxAge -2: want seconds, 0 for a session cookie, or -1 (nginx's expires=0)"},
		{func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", MaxAge: 60, Expires: "max"} }, `sticky.cookie.expires "max": not with maxAge (60); set one`},
		{func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", Expires: "1x"} }, `sticky.cookie.expires "1x": want max, or a time such as 1h or 1d12h (nginx's expires=)`},
		{func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", Expires: "1ms"} }, `sticky.cookie.expires "1ms": want max`},
		{func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", Domain: "a;b"} }, `sticky.cookie.domain "a;b": a cookie attribute cannot hold ';', a space or a quote`},
		{func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", Path: "/a b"} }, `sticky.cookie.path "/a b": a cookie attribute cannot hold ';', a space or a quote`},
		{func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", SameSite: "foo"} }, `sticky.cookie.sameSite "foo": want strict, lax or none`},
		{func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "srv", Value: "md5"} }, `sticky.cookie.value "md5": want nginx (the default), caddy or traefik`},
		{func(c *Config) { c.Sticky.Cookie = StickyCookie{Name: "lb", Value: "traefik", Secret: "S"} }, "sticky.cookie.secret: Traefik's cookie value has no secret (value traefik)"},
		{func(c *Config) {
			c.Sticky.Cookie = StickyCookie{Name: "lb", Value: "traefik"}
			c.Servers[0].Route = "a"
		}, `servers[0].route "a": the cookie's value is traefik's (sticky.cookie.value traefik), not a route`},
		{func(c *Config) {
			c.Sticky.Cookie = StickyCookie{Name: "lb", Value: "caddy"}
			c.Servers[1].Route = "b"
		}, `servers[1].route "b": the cookie's value is caddy's (sticky.cookie.value caddy), not a route`},
		{func(c *Config) { c.Servers[1].Route = long }, `servers[1].route "` + long + `": longer than 32 bytes (nginx's limit)`},
		{func(c *Config) { c.Servers[1].Down, c.Servers[1].Drain = true, true }, "servers[1]: down and drain are one setting in nginx (the last written wins); set one"},
		{func(c *Config) { c.Sticky.Route = []string{"arg:route"} }, `sticky.route[0] "arg:route": want query:NAME, cookie:NAME or header:NAME`},
		{func(c *Config) { c.Sticky.Route = []string{"cookie:r", "cookie"} }, `sticky.route[1] "cookie": want query:NAME, cookie:NAME or header:NAME`},
		{func(c *Config) { c.Sticky.Route = []string{"cookie:r", "upstream_cookie:r"} }, `sticky.route[1] "upstream_cookie:r": the upstream's answer cannot name the request's backend; want query:NAME, cookie:NAME or header:NAME`},
		{func(c *Config) { c.Sticky.Learn.Lookup = []string{"cookie:s"} }, "sticky.learn.create: missing (where the servers' answers name a new session, such as upstream_cookie:NAME)"},
		{func(c *Config) { c.Sticky.Learn.Create = []string{"upstream_cookie:s"} }, "sticky.learn.lookup: missing (where a request names its session, such as cookie:NAME)"},
		{func(c *Config) { c.Sticky.Learn.Timeout = "1h" }, "sticky.learn.create: missing"},
		{func(c *Config) {
			c.Sticky.Learn = StickyLearn{Create: []string{"upstream_set_cookie:s"}, Lookup: []string{"cookie:s"}}
		}, `sticky.learn.create[0] "upstream_set_cookie:s": want query:NAME, cookie:NAME, header:NAME, upstream_cookie:NAME or upstream_header:NAME`},
		{func(c *Config) {
			c.Sticky.Learn = StickyLearn{Create: []string{"upstream_cookie:s"}, Lookup: []string{"upstream_cookie:s"}}
		}, `sticky.learn.lookup[0] "upstream_cookie:s": the upstream's answer cannot name the request's backend; want query:NAME, cookie:NAME or header:NAME`},
		{func(c *Config) {
			c.Sticky.Learn = StickyLearn{Create: []string{"upstream_cookie:s"}, Lookup: []string{"cookie:s"}, Timeout: "0s"}
		}, `sticky.learn.timeout "0s": must be positive`},
		{func(c *Config) {
			c.Sticky.Learn = StickyLearn{Create: []string{"upstream_cookie:s"}, Lookup: []string{"cookie:s"}, Timeout: "1d"}
		}, `sticky.learn.timeout "1d": want a duration such as "10s"`},
		{func(c *Config) {
			c.Sticky.Learn = StickyLearn{Create: []string{"upstream_cookie:s"}, Lookup: []string{"cookie:s"}, MaxSessions: -1}
		}, "sticky.learn.maxSessions -1: must be positive (default 8000)"},
		{func(c *Config) { c.Sticky.Unknown = map[string]interface{}{"rout": "x"} }, "sticky.rout: unknown key (did you mean route?)"},
		{func(c *Config) { c.Sticky.Cookie.Unknown = map[string]interface{}{"max_age": "1"} }, "sticky.cookie.max_age: unknown key (did you mean maxAge?)"},
		{func(c *Config) { c.Sticky.Learn.Unknown = map[string]interface{}{"zone": "z:1m"} }, "sticky.learn.zone: unknown key (known keys: create, lookup, timeout, header, maxSessions)"},
		{func(c *Config) { c.Servers[0].Unknown = map[string]interface{}{"drian": "true"} }, "servers[0].drian: unknown key (did you mean drain?)"},
	} {
		cfg := withServers(CreateConfig(), stickyServers...)
		c.edit(cfg)
		_, err := New(context.Background(), nil, cfg, "lb")
		if err == nil || !strings.HasPrefix(err.Error(), `lbpack middleware "lb": `+c.want) {
			t.Errorf("error %v\n want %q", err, c.want)
		}
	}
}

// stickyBackend is a server for the request tests: it answers with its
// letter in X-Backend, sets the session its request's set= argument names
// (sess=ID), and its own cookie when own= is given.
func stickyBackend(t *testing.T, letter string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := r.URL.Query().Get("set"); s != "" {
			w.Header().Add("Set-Cookie", "sess="+s+"; path=/")
		}
		if r.URL.Query().Get("own") != "" {
			w.Header().Add("Set-Cookie", "own=1")
		}
		w.Header().Set("X-Backend", letter)
		io.WriteString(w, letter)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// stickyStep is one request of a sticky test: the cookie it sends (a
// server's letter, whose id it carries; "" none), the query, and what comes
// back: the status, the server's letter ("" none) and the sticky cookie's
// server ("" none; "!" a Set-Cookie of the server's after it).
type stickyStep struct {
	send, query  string
	status       int
	backend, set string
}

// TestStickyProxy: in proxy mode, a request bound by its cookie goes to
// its server while it is eligible (draining included), past the
// strategy's choice; every answer after a choice, a 502 included, carries
// one cookie naming the last server tried, before the server's own; a
// retry never goes back to a server tried.
func TestStickyProxy(t *testing.T) {
	a, b, c := stickyBackend(t, "a"), stickyBackend(t, "b"), stickyBackend(t, "c")
	_, dead := liveAndDead(t, nil)
	urls := map[string]string{"a": a, "b": b, "c": c, "d": dead}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		steps []stickyStep
	}{
		{"bound past the schedule", nil, []stickyStep{
			// Smooth weights 1 1 1 after the bound passes: a-1 b2 c-1,
			// then a0 b3 c-3, a1 b1 c-2: the unbound pick is a.
			{"", "", 200, "a", "a"}, {"c", "", 200, "c", "c"}, {"c", "", 200, "c", "c"}, {"b", "", 200, "b", "b"}, {"x", "", 200, "a", "a"},
		}},
		{"drain takes bound requests only", func(cfg *Config) { cfg.Servers[2].Drain = true }, []stickyStep{
			{"", "", 200, "a", "a"}, {"", "", 200, "b", "b"}, {"", "", 200, "a", "a"}, {"c", "", 200, "c", "c"}, {"", "", 200, "b", "b"},
		}},
		{"down refuses bound requests", func(cfg *Config) { cfg.Servers[1].Down = true }, []stickyStep{
			{"b", "", 200, "a", "a"}, {"b", "", 200, "c", "c"},
		}},
		{"a backup's cookie while a primary is up", func(cfg *Config) { cfg.Servers[2].Backup = true }, []stickyStep{
			{"c", "", 200, "a", "a"}, {"c", "", 200, "b", "b"},
		}},
		{"a backup's cookie once the primaries are down", func(cfg *Config) {
			cfg.Servers[0].Down, cfg.Servers[1].Down = true, true
			cfg.Servers = append(cfg.Servers, Server{URL: urls["d"], Backup: true})
			cfg.Servers[2].Backup = true
		}, []stickyStep{{"", "", 200, "c", "c"}, {"", "", 200, "c", "c"}}},
		{"the server's own cookie after", nil, []stickyStep{{"b", "own=1", 200, "b", "b!"}}},
		{"a bound server refusing: the retry's cookie", func(cfg *Config) { cfg.Servers[2].URL = urls["d"] }, []stickyStep{
			{"d", "", 200, "a", "a"},
		}},
		{"a bound server refusing, maxFails 0: the retry goes elsewhere", func(cfg *Config) { cfg.Servers[2].URL, cfg.MaxFails = urls["d"], 0 }, []stickyStep{
			{"d", "", 200, "a", "a"}, {"d", "", 200, "b", "b"},
		}},
		{"a bound server refusing, no retries: 502 with its cookie", func(cfg *Config) { cfg.Servers[2].URL, cfg.Retries = urls["d"], 0 }, []stickyStep{
			{"d", "", 502, "", "d"},
		}},
		{"no server: no cookie", func(cfg *Config) {
			for i := range cfg.Servers {
				cfg.Servers[i].Down = true
			}
		}, []stickyStep{{"a", "", 503, "", ""}}},
	} {
		cfg := withServers(CreateConfig(), a, b, c)
		cfg.Sticky.Cookie = StickyCookie{Name: "srv", Path: "/"}
		if tc.edit != nil {
			tc.edit(cfg)
		}
		ids := map[string]string{}
		for letter, u := range urls {
			_, addr, _ := serverURL(u, false)
			ids[letter] = core.StickyID(addr)
		}
		h, _ := reloadHandler(t, nil, cfg, t.Name()+"/"+tc.name) // a balancer of its own
		for k, st := range tc.steps {
			req := httptest.NewRequest("GET", "http://lbpack.test/?"+st.query, nil)
			if st.send == "x" {
				req.Header.Set("Cookie", "srv=garbage")
			} else if st.send != "" {
				req.Header.Set("Cookie", "other=1; srv="+ids[st.send])
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var want []string
			if st.set != "" {
				want = append(want, "srv="+ids[strings.TrimSuffix(st.set, "!")]+"; path=/")
			}
			if strings.HasSuffix(st.set, "!") {
				want = append(want, "own=1")
			}
			got := rec.Header().Values("Set-Cookie")
			if rec.Code != st.status || rec.Header().Get("X-Backend") != st.backend || strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("%s, request %d: %d from %q with Set-Cookie %q; want %d from %q with %q",
					tc.name, k, rec.Code, rec.Header().Get("X-Backend"), got, st.status, st.backend, want)
			}
		}
	}
}

// TestStickyRoute: sticky route reads the first non-empty source, matched
// against the servers' routes and ids; no cookie is ever set.
func TestStickyRoute(t *testing.T) {
	a, b := stickyBackend(t, "a"), stickyBackend(t, "b")
	cfg := withServers(CreateConfig(), a, b)
	cfg.Servers[0].Route = "ra"
	cfg.Sticky.Route = []string{"query:route", "header:X-Route"}
	h, _ := reloadHandler(t, nil, cfg, t.Name())
	_, addrB, _ := serverURL(b, false)
	for k, c := range []struct {
		query, header, want string
	}{
		{"", "", "a"}, {"route=ra", "", "a"}, {"route=" + core.StickyID(addrB), "", "b"}, {"", "ra", "a"}, {"route=", "ra", "a"},
		{"route=zz", "ra", "b"}, {"route=r%61", "", "a"}, {"", core.StickyID(addrB), "b"},
	} {
		req := httptest.NewRequest("GET", "http://lbpack.test/?"+c.query, nil)
		if c.header != "" {
			req.Header.Set("X-Route", c.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("X-Backend"); got != c.want || rec.Header()["Set-Cookie"] != nil {
			t.Errorf("request %d (?%s, X-Route %q): server %q, Set-Cookie %q; want %q and none", k, c.query, c.header, got, rec.Header()["Set-Cookie"], c.want)
		}
	}
}

// TestStickyLearn: with and without header, a session a server creates
// binds the requests naming it to that server; an unknown session does
// not bind; the table outlives a reload that keeps learn's settings and
// is new after one that changes them, whatever else a reload changes. (round_robin's turn does not move
// for a bound request: the unbound ones go a b c in turn.)
func TestStickyLearn(t *testing.T) {
	a, b, c := stickyBackend(t, "a"), stickyBackend(t, "b"), stickyBackend(t, "c")
	for _, header := range []bool{false, true} {
		cfg := withServers(CreateConfig(), a, b, c)
		cfg.Strategy = core.RoundRobin
		cfg.Sticky.Learn = StickyLearn{Create: []string{"upstream_cookie:sess"}, Lookup: []string{"cookie:sess"}, Header: header}
		name := t.Name() + map[bool]string{false: "", true: "/header"}[header]
		h, cancel := reloadHandler(t, nil, cfg, name)
		send := func(session, query string) string {
			req := httptest.NewRequest("GET", "http://lbpack.test/?"+query, nil)
			if session != "" {
				req.Header.Set("Cookie", "sess="+session)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Header().Get("X-Backend")
		}
		var got []string
		got = append(got, send("", "set=S1"))             // a creates S1
		got = append(got, send("S1", ""), send("S1", "")) // bound to a
		got = append(got, send("S9", ""), send("", ""))   // unbound: the schedule goes on
		got = append(got, send("S1", "set=S2"))           // a again; S2 created there
		got = append(got, send("S2", ""), send("S2", "")) // bound to a
		table := pluginOf(h).sessions
		h, cancel = reloadHandler(t, cancel, cfg, name) // the same settings: the same state
		got = append(got, send("S1", ""), send("", "")) // a, then the turn
		cfg.Servers[2].Weight = intp(2)                 // the balancer updated, the same learn settings
		h, cancel = reloadHandler(t, cancel, cfg, name)
		got = append(got, send("S1", ""))
		want := "a a a b c a a a a a a"
		if strings.Join(got, " ") != want || pluginOf(h).sessions != table {
			t.Errorf("header %v: servers %q, want %q; the same table: %v", header, strings.Join(got, " "), want, pluginOf(h).sessions == table)
		}
		cfg.Sticky.Learn.Timeout = "1h" // another table
		h, _ = reloadHandler(t, cancel, cfg, name)
		if p := pluginOf(h); p.sessions == table || p.sessions.Len() != 0 {
			t.Errorf("header %v: after learn's timeout changed, the table is the old one or holds %d sessions", header, p.sessions.Len())
		}
		if s1, s2 := send("S1", ""), send("S1", ""); s1 == s2 {
			t.Errorf("header %v: S1 went to %s twice after the table changed; want it unbound", header, s1)
		}
	}
}

// TestStickyCookieAfterContinue: an upload that asks for 100 Continue gets
// the server's 100 passed on, and the final answer still carries the
// sticky cookie, once (the proxy clears the writer's headers after an
// informational answer).
func TestStickyCookieAfterContinue(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // Go's server sends 100 Continue at the first read
		w.Header().Add("Set-Cookie", "own=1")
	}))
	t.Cleanup(backend.Close)
	cfg := withServers(CreateConfig(), backend.URL)
	cfg.Sticky.Cookie = StickyCookie{Name: "srv"}
	h, _ := reloadHandler(t, nil, cfg, t.Name())
	front := httptest.NewServer(h)
	t.Cleanup(front.Close)
	tr := &http.Transport{ExpectContinueTimeout: 5 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest("PUT", front.URL+"/upload", strings.NewReader("body"))
	req.Header.Set("Expect", "100-continue")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, addr, _ := serverURL(backend.URL, false)
	want := "srv=" + core.StickyID(addr) + "|own=1"
	if got := strings.Join(resp.Header.Values("Set-Cookie"), "|"); resp.StatusCode != 200 || got != want {
		t.Errorf("%d with Set-Cookie %q, want 200 with %q", resp.StatusCode, got, want)
	}
}

// TestStickyExpiresFromPick: the cookie's expires counts from the pick, as
// nginx's from its choice of the peer, not from the server's answer (whose
// Date Traefik passes on): a server that answers two seconds later does
// not move it.
func TestStickyExpiresFromPick(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2100 * time.Millisecond)
	}))
	t.Cleanup(backend.Close)
	cfg := withServers(CreateConfig(), backend.URL)
	cfg.Sticky.Cookie = StickyCookie{Name: "srv", MaxAge: 3600}
	h, _ := reloadHandler(t, nil, cfg, t.Name())
	t0 := time.Now().Unix()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://lbpack.test/", nil))
	_, addr, _ := serverURL(backend.URL, false)
	got := rec.Header().Get("Set-Cookie")
	for _, at := range []int64{t0, t0 + 1} {
		if got == "srv="+core.StickyID(addr)+"; expires="+sticky.CookieTime(time.Unix(at+3600, 0))+"; max-age=3600" {
			return
		}
	}
	t.Errorf("Set-Cookie %q: want expires an hour from %s, the pick", got, time.Unix(t0, 0).UTC())
}
