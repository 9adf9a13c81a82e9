package caddyplugin

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// md5id is nginx's sticky id of an address, computed here on its own.
func md5id(addr string) string {
	s := md5.Sum([]byte(addr))
	return hex.EncodeToString(s[:])
}

// cookieDate is nginx's cookie date, written here on its own.
func cookieDate(t time.Time) string { return t.UTC().Format("Mon, 02-Jan-06 15:04:05 GMT") }

// bound returns a request carrying the Cookie header value cookie ("" none).
func bound(cookie string) *http.Request {
	r := request("/", nil)
	if cookie != "" {
		r.Header.Set("Cookie", cookie)
	}
	return r
}

// stickyPolicies returns every policy (and url_hash's modes) with the
// given JSON options.
func stickyPolicies(t *testing.T, js string) []selector {
	c := newConfig(t)
	var out []selector
	for _, name := range []string{"smooth_wrr", "gcd_wrr", "weighted_least_conn", "fair", "nginx_ip_hash", "url_hash"} {
		out = append(out, c.mustLoad(t, name, js))
	}
	for _, mode := range []string{"modulo", "maglev", "bounded"} {
		out = append(out, c.mustLoad(t, "url_hash", strings.TrimSuffix(js, "}")+`,"mode":"`+mode+`"}`))
	}
	return out
}

// The Set-Cookie header is nginx's, byte for byte, whatever order the
// attributes were given in; it goes before the headers already there; a
// retry rewrites it in place, naming the upstream tried last; a request
// that gets no upstream gets none.
func TestStickySetCookie(t *testing.T) {
	c := newConfig(t)
	m := c.mustLoad(t, "smooth_wrr", `{"sticky":{"cookie":{"name":"srv_id","path":"/","samesite":"Lax","secure":true,"httponly":true,"domain":"example.com","expires":"1h"}}}`)
	static := pool(abc...)
	r := bound("srv_id=" + md5id("10.0.0.2:80"))
	w := httptest.NewRecorder()
	w.Header().Add("Set-Cookie", "earlier=1")
	before := time.Now()
	u := m.Select(static, r, w)
	after := time.Now()
	if u == nil || u.Dial != "10.0.0.2:80" {
		t.Fatalf("bound to b: got %v", u)
	}
	want := func(addr string, at time.Time) string {
		return "srv_id=" + md5id(addr) + "; expires=" + cookieDate(at.Add(time.Hour)) + "; max-age=3600; domain=example.com; httponly; secure; samesite=Lax; path=/"
	}
	got := w.Header()["Set-Cookie"]
	if len(got) != 2 || got[1] != "earlier=1" || got[0] != want("10.0.0.2:80", before) && got[0] != want("10.0.0.2:80", after) {
		t.Fatalf("Set-Cookie %q\nwant [%q earlier=1]", got, want("10.0.0.2:80", before))
	}
	// Caddy retries: the cookie names the upstream tried last, never b again.
	for try := 2; try <= 3; try++ {
		u := m.Select(static, r, w)
		if u == nil || u.Dial == "10.0.0.2:80" {
			t.Fatalf("retry %d: got %v, want an upstream other than b", try, u)
		}
		got := w.Header()["Set-Cookie"]
		if len(got) != 2 || !strings.HasPrefix(got[0], "srv_id="+md5id(u.Dial)+"; expires=") || got[1] != "earlier=1" {
			t.Fatalf("retry %d to %s: Set-Cookie %q, want one sticky cookie naming it, then earlier=1", try, u.Dial, got)
		}
	}
	last := w.Header()["Set-Cookie"][0]
	if u := m.Select(static, r, w); u != nil {
		t.Fatalf("fourth try: %s; every upstream was tried", u.Dial)
	}
	if got := w.Header()["Set-Cookie"]; len(got) != 2 || got[0] != last {
		t.Errorf("no upstream left: Set-Cookie %q, want it unchanged (%q)", got, last)
	}
	cancelRequest(r)

	// No upstream at all: no cookie.
	h := &health{}
	for _, a := range abc {
		h.set(a, true)
	}
	m2, err := c.load(t, "smooth_wrr", `{"sticky":{"cookie":{"name":"srv"}}}`, h)
	if err != nil {
		t.Fatal(err)
	}
	w = httptest.NewRecorder()
	if u := m2.Select(static, bound(""), w); u != nil || len(w.Header()["Set-Cookie"]) != 0 {
		t.Errorf("every upstream down: got %v and Set-Cookie %q, want nil and none", u, w.Header()["Set-Cookie"])
	}
}

// Each expires form gives nginx's attributes.
func TestStickySetCookieExpires(t *testing.T) {
	c := newConfig(t)
	for _, tt := range []struct {
		expires string
		want    func(now time.Time) string
	}{
		{"", func(time.Time) string { return "srv=" + md5id("10.0.0.1:80") }},
		{"max", func(time.Time) string {
			return "srv=" + md5id("10.0.0.1:80") + "; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000"
		}},
		{"0", func(now time.Time) string {
			return "srv=" + md5id("10.0.0.1:80") + "; expires=" + cookieDate(now) + "; max-age=0"
		}},
		{"1d12h", func(now time.Time) string {
			return "srv=" + md5id("10.0.0.1:80") + "; expires=" + cookieDate(now.Add(36*time.Hour)) + "; max-age=129600"
		}},
	} {
		js := `{"sticky":{"cookie":{"name":"srv"}}}`
		if tt.expires != "" {
			js = `{"sticky":{"cookie":{"name":"srv","expires":"` + tt.expires + `"}}}`
		}
		m := c.mustLoad(t, "weighted_least_conn", js)
		w := httptest.NewRecorder()
		before := time.Now()
		m.Select(pool(abc...), bound("srv="+md5id("10.0.0.1:80")), w)
		after := time.Now()
		got := w.Header()["Set-Cookie"]
		if len(got) != 1 || got[0] != tt.want(before) && got[0] != tt.want(after) {
			t.Errorf("expires %q: Set-Cookie %q, want [%q]", tt.expires, got, tt.want(before))
		}
	}
}

// A request bound to an upstream goes there under every policy; a
// draining upstream takes bound requests only; an id naming a down
// upstream, a stale id or garbage is unbound.
func TestStickyBindingAndDrain(t *testing.T) {
	static := pool(abcd...)
	for _, m := range stickyPolicies(t, `{"upstreams":{"10.0.0.3:80":{"drain":true},"10.0.0.4:80":{"down":true}},"sticky":{"cookie":{"name":"srv"}}}`) {
		t.Run(label(m), func(t *testing.T) {
			for _, addr := range abc {
				for n := 0; n < 3; n++ {
					r := bound("srv=" + md5id(addr))
					if u := m.Select(static, r, nil); u == nil || u.Dial != addr {
						t.Fatalf("bound to %s: got %v", names[addr], u)
					}
					cancelRequest(r)
				}
			}
			for n := 0; n < 40; n++ {
				cookie := []string{"", "srv=" + md5id("10.0.0.4:80"), "srv=" + md5id("10.0.0.9:80"), "srv=garbage", "srv="}[n%5]
				r := bound(cookie)
				r.URL.Path = fmt.Sprintf("/k%d", n) // spread the hash policies' keys
				u := m.Select(static, r, nil)
				if u == nil || u.Dial == "10.0.0.3:80" || u.Dial == "10.0.0.4:80" {
					t.Fatalf("unbound request %d (%q): got %v, want a or b (c drains, d is down)", n, cookie, u)
				}
				cancelRequest(r)
			}
		})
	}
}

// A backup's id counts only once no primary can be picked.
func TestStickyBackupTier(t *testing.T) {
	h := &health{}
	m, err := newConfig(t).load(t, "smooth_wrr", `{"upstreams":{"10.0.0.3:80":{"backup":true}},"sticky":{"cookie":{"name":"srv"}}}`, h)
	if err != nil {
		t.Fatal(err)
	}
	static := pool(abc...)
	toBackup := "srv=" + md5id("10.0.0.3:80")
	for n := 0; n < 4; n++ {
		w := httptest.NewRecorder()
		u := m.Select(static, bound(toBackup), w)
		if u == nil || u.Dial == "10.0.0.3:80" {
			t.Fatalf("bound to backup c with primaries up: got %v, want a primary", u)
		}
		if got := w.Header().Get("Set-Cookie"); got != "srv="+md5id(u.Dial) {
			t.Errorf("Set-Cookie %q, want the primary's id", got)
		}
	}
	h.set("10.0.0.1:80", true)
	h.set("10.0.0.2:80", true)
	if u := m.Select(static, bound(toBackup), nil); u == nil || u.Dial != "10.0.0.3:80" {
		t.Errorf("primaries down, bound to backup c: got %v", u)
	}
}

// A retry never goes back to an upstream the request tried, whatever its
// cookie says: every policy, bound to each upstream in turn.
func TestStickyRetryNeverReusesBinding(t *testing.T) {
	static := pool(abc...)
	for _, m := range stickyPolicies(t, `{"sticky":{"cookie":{"name":"srv"}}}`) {
		for _, addr := range abc {
			r := bound("srv=" + md5id(addr))
			seen := map[string]bool{}
			for try := 1; try <= 3; try++ {
				u := m.Select(static, r, nil)
				switch {
				case u == nil:
					t.Fatalf("%s bound to %s, try %d: nil", label(m), names[addr], try)
				case try == 1 && u.Dial != addr:
					t.Fatalf("%s bound to %s: first try went to %s", label(m), names[addr], names[u.Dial])
				case seen[u.Dial]:
					t.Fatalf("%s bound to %s, try %d: %s again", label(m), names[addr], try, names[u.Dial])
				}
				seen[u.Dial] = true
			}
			cancelRequest(r)
		}
	}
}

// sticky route reads the first source present and not empty, and matches
// routes and MD5 ids exactly.
func TestStickyRoute(t *testing.T) {
	m := newConfig(t).mustLoad(t, "url_hash", `{"upstreams":{"10.0.0.1:80":{"route":"a1"}},"sticky":{"route":["query:route","cookie:route","header:X-Route"]}}`)
	static := pool(abc...)
	for _, tt := range []struct{ target, cookie, header, want string }{
		{"/x?route=a1", "", "", "10.0.0.1:80"},
		{"/x?route=" + md5id("10.0.0.2:80"), "", "", "10.0.0.2:80"},
		{"/x", "route=" + md5id("10.0.0.3:80"), "", "10.0.0.3:80"},
		{"/x?route=", "route=a1", "", "10.0.0.1:80"},
		{"/x", "", "a1", "10.0.0.1:80"},
		{"/x?route=zz", "route=a1", "a1", ""},
		{"/x?route=a%31", "", "", ""},
		{"/x?route=" + md5id("10.0.0.1:80"), "", "", ""}, // a routed upstream's MD5 is not its id
	} {
		for n := 0; n < 6; n++ {
			r := request(tt.target, nil)
			r.URL.Path = fmt.Sprintf("/k%d", n)
			if tt.cookie != "" {
				r.Header.Set("Cookie", tt.cookie)
			}
			if tt.header != "" {
				r.Header.Set("X-Route", tt.header)
			}
			w := httptest.NewRecorder()
			u := m.Select(static, r, w)
			if tt.want != "" && (u == nil || u.Dial != tt.want) {
				t.Errorf("%s %q %q: got %v, want %s", tt.target, tt.cookie, tt.header, u, tt.want)
			}
			if len(w.Header()["Set-Cookie"]) != 0 {
				t.Errorf("sticky route set a cookie: %q", w.Header()["Set-Cookie"])
			}
		}
	}
	// Unbound: the key decides; with six keys the route must not pin one upstream.
	seen := map[string]bool{}
	for n := 0; n < 30; n++ {
		r := request(fmt.Sprintf("/k%d?route=zz", n), nil)
		seen[m.Select(static, r, nil).Dial] = true
	}
	if len(seen) < 2 {
		t.Errorf("unbound requests all went to %v", seen)
	}
}

// answer makes r look answered by its upstream, with Set-Cookie headers
// setCookie (joined as Caddy's placeholder joins them), and ends it.
func answer(r *http.Request, setCookie string) {
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	repl.Set(latencyPlaceholder, time.Millisecond)
	repl.Set(statusPlaceholder, 200)
	if setCookie != "" {
		repl.Set(responseHeaderPrefix+"Set-Cookie", setCookie)
	}
	cancelRequest(r)
}

// sticky learn binds a session the upstream creates to it at the request's
// end, rebinds a looked-up session to the upstream that served it, and
// forgets a session unused for the timeout.
func TestStickyLearn(t *testing.T) {
	h := &health{}
	m, err := newConfig(t).load(t, "smooth_wrr", `{"sticky":{"learn":{"create":["upstream_cookie:sess"],"lookup":["cookie:sess"],"timeout":300000000}}}`, h)
	if err != nil {
		t.Fatal(err)
	}
	static := pool(abc...)
	r := request("/", nil)
	first := m.Select(static, r, nil)
	answer(r, "other=1; expires=Wed, 02-Dec-26 00:04:52 GMT; path=/,sess=S1; path=/")
	pick := func(cookie string) string {
		r := bound(cookie)
		u := m.Select(static, r, nil)
		answer(r, "")
		if u == nil {
			return "-"
		}
		return u.Dial
	}
	for n := 0; n < 4; n++ {
		if got := pick("sess=S1"); got != first.Dial {
			t.Fatalf("session S1, request %d: %s, want %s, where it was created", n, got, first.Dial)
		}
	}
	// Its upstream goes: the session moves to the one that serves it, and
	// stays there once the first is back.
	h.set(first.Dial, true)
	moved := pick("sess=S1")
	if moved == first.Dial || moved == "-" {
		t.Fatalf("S1's upstream down: got %s", moved)
	}
	h.set(first.Dial, false)
	for n := 0; n < 3; n++ {
		if got := pick("sess=S1"); got != moved {
			t.Fatalf("S1 rebound to %s; request %d went to %s", moved, n, got)
		}
	}
	// Unused for the timeout: forgotten (the next picks follow the schedule).
	time.Sleep(400 * time.Millisecond)
	seen := map[string]bool{}
	for n := 0; n < 6; n++ {
		seen[pick("sess=S1")] = true
	}
	if len(seen) == 1 {
		t.Errorf("S1 unused past the timeout still binds: %v", seen)
	}
}

// Caddy joins an upstream's Set-Cookie headers with commas; the dates of
// expires attributes hold commas too.
func TestSplitSetCookie(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"sess=S1; path=/", []string{"sess=S1; path=/"}},
		{"a=1,sess=S2", []string{"a=1", "sess=S2"}},
		{"a=1; expires=Wed, 02-Dec-26 00:04:52 GMT; path=/,sess=S2; path=/", []string{"a=1; expires=Wed, 02-Dec-26 00:04:52 GMT; path=/", "sess=S2; path=/"}},
		{"a=1; Expires=Wed, 02 Dec 2026 00:04:52 GMT, b=2; Expires=Thu, 03 Dec 2026 00:04:52 GMT", []string{"a=1; Expires=Wed, 02 Dec 2026 00:04:52 GMT", "b=2; Expires=Thu, 03 Dec 2026 00:04:52 GMT"}},
	} {
		if got := splitSetCookie(tt.in); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("splitSetCookie(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// value caddy gives Caddy's own cookie policy's values: a client bound by
// Caddy's `lb_policy cookie` stays on its upstream.
func TestStickyValueCaddy(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	theirs := &reverseproxy.CookieHashSelection{Name: "lb", Secret: "s3"}
	if err := theirs.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	ours := newConfig(t).mustLoad(t, "smooth_wrr", `{"sticky":{"cookie":{"name":"lb","value":"caddy","secret":"s3"}}}`)
	static := pool(abc...)
	seen := map[string]bool{}
	for n := 0; n < 200 && len(seen) < len(abc); n++ {
		w := httptest.NewRecorder()
		u := theirs.Select(static, bound(""), w)
		ck, err := http.ParseSetCookie(w.Header().Get("Set-Cookie"))
		if err != nil {
			t.Fatal(err)
		}
		if seen[u.Dial] {
			continue
		}
		seen[u.Dial] = true
		w = httptest.NewRecorder()
		if got := ours.Select(static, bound("lb="+ck.Value), w); got == nil || got.Dial != u.Dial {
			t.Errorf("Caddy's cookie %s for %s: lbpack picked %v", ck.Value, u.Dial, got)
		}
		if got := w.Header().Get("Set-Cookie"); got != "lb="+ck.Value {
			t.Errorf("for %s: Set-Cookie %q, want Caddy's value %q", u.Dial, got, ck.Value)
		}
	}
	if len(seen) != len(abc) {
		t.Fatalf("Caddy's random fallback reached %d upstreams in 200 picks", len(seen))
	}
}

// value traefik gives Traefik's value of the upstream's URL; value nginx
// with a secret replaces the MD5; a route given is the value in any mode.
func TestStickyValueModes(t *testing.T) {
	traefik := func(url string) string {
		s := sha256.Sum256([]byte(url))
		return hex.EncodeToString(s[:])[:16]
	}
	c := newConfig(t)
	static := pool(abc...)
	for _, tt := range []struct{ js, addr, value string }{
		{`{"sticky":{"cookie":{"name":"s","value":"traefik"}}}`, "10.0.0.2:80", traefik("http://10.0.0.2:80")},
		{`{"upstreams":{"10.0.0.2:80":{"route":"r2"}},"sticky":{"cookie":{"name":"s","value":"caddy"}}}`, "10.0.0.2:80", "r2"},
		{`{"upstreams":{"10.0.0.3:80":{"route":"r3"}},"sticky":{"cookie":{"name":"s","value":"nginx","secret":"k"}}}`, "10.0.0.3:80", "r3"},
	} {
		m := c.mustLoad(t, "weighted_least_conn", tt.js)
		w := httptest.NewRecorder()
		if u := m.Select(static, bound("s="+tt.value), w); u == nil || u.Dial != tt.addr {
			t.Errorf("%s: value %s picked %v, want %s", tt.js, tt.value, u, tt.addr)
		}
		if got := w.Header().Get("Set-Cookie"); got != "s="+tt.value {
			t.Errorf("%s: Set-Cookie %q, want s=%s", tt.js, got, tt.value)
		}
	}
	// A secret: not the MD5, 32 hex digits, and it binds.
	m := c.mustLoad(t, "smooth_wrr", `{"sticky":{"cookie":{"name":"s","secret":"k"}}}`)
	w := httptest.NewRecorder()
	u := m.Select(static, bound("s="+md5id("10.0.0.1:80")), w)
	v := strings.TrimPrefix(w.Header().Get("Set-Cookie"), "s=")
	if len(v) != 32 || v == md5id(u.Dial) {
		t.Fatalf("with a secret the id of %s is %q: want 32 hex digits, not its MD5", u.Dial, v)
	}
	for n := 0; n < 3; n++ {
		if got := m.Select(static, bound("s="+v), nil); got == nil || got.Dial != u.Dial {
			t.Errorf("keyed id of %s picked %v", u.Dial, got)
		}
	}
}

// The learn table is the identity's: a reload of the same config, or of a
// named policy with the same bounds, keeps it; other bounds start afresh.
func TestStickyLearnSurvivesReload(t *testing.T) {
	const js = `{"name":"learner","sticky":{"learn":{"create":["upstream_cookie:sess"],"lookup":["cookie:sess"]}}}`
	old := newConfig(t)
	m1 := old.mustLoad(t, "smooth_wrr", js)
	static := pool(abc...)
	r := request("/", nil)
	u := m1.Select(static, r, nil)
	answer(r, "sess=S1; path=/")
	waitLearnt(t, m1.pol(), "S1")

	cur := newConfig(t)
	m2 := cur.mustLoad(t, "smooth_wrr", strings.Replace(js, `"name"`, `"weights":[1,1,1],"name"`, 1))
	old.unload()
	for n := 0; n < 3; n++ {
		if got := m2.Select(static, bound("sess=S1"), nil); got == nil || got.Dial != u.Dial {
			t.Fatalf("after the reload S1 went to %v, want %s", got, u.Dial)
		}
	}
	m3 := newConfig(t).mustLoad(t, "smooth_wrr", strings.Replace(js, `"lookup"`, `"timeout":"1h","lookup"`, 1))
	if m3.pol().sessions == m2.pol().sessions || m3.pol().sessions.Len() != 0 {
		t.Errorf("another timeout kept the table of %d sessions", m3.pol().sessions.Len())
	}
}

// waitLearnt waits (at most a second) until p has learnt session.
func waitLearnt(t *testing.T, p *policy, session string) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); p.sessions.Lookup(session, time.Now()) == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("session %s not learnt", session)
		}
	}
}
