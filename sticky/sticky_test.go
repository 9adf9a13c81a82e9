package sticky

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCookieTime(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 12, 2, 0, 4, 52, 0, time.UTC), "Wed, 02-Dec-26 00:04:52 GMT"},
		{time.Date(2037, 12, 31, 23, 55, 55, 0, time.UTC), "Thu, 31-Dec-37 23:55:55 GMT"},
		{time.Date(2038, 1, 19, 3, 14, 8, 0, time.UTC), "Tue, 19-Jan-2038 03:14:08 GMT"},
		{time.Date(2027, 3, 1, 1, 0, 0, 0, time.FixedZone("CET", 3600)), "Mon, 01-Mar-27 00:00:00 GMT"},
	} {
		if got := CookieTime(c.t); got != c.want {
			t.Errorf("CookieTime(%v) = %q, want %q", c.t, got, c.want)
		}
	}
}

func TestCookieHeader(t *testing.T) {
	now := time.Date(2026, 12, 1, 23, 15, 44, 0, time.UTC)
	for _, c := range []struct {
		c    Cookie
		want string
	}{
		{Cookie{Name: "srv"}, "srv=ID"},
		{Cookie{Name: "srv_id", MaxAge: 3600, Path: "/", HTTPOnly: true},
			"srv_id=ID; expires=Wed, 02-Dec-26 00:15:44 GMT; max-age=3600; httponly; path=/"},
		{Cookie{Name: "srv", MaxAge: ExpiresMax, Domain: ".example.com", Secure: true, SameSite: "strict"},
			"srv=ID; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000; domain=.example.com; secure; samesite=strict"},
		{Cookie{Name: "srv", MaxAge: -1}, "srv=ID; expires=Tue, 01-Dec-26 23:15:44 GMT; max-age=0"},
		{Cookie{Name: "srv", Path: "/app", SameSite: "Lax", Secure: true, HTTPOnly: true, Domain: "d"},
			"srv=ID; domain=d; httponly; secure; samesite=Lax; path=/app"},
	} {
		if got := c.c.Header("ID", now); got != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", c.c, got, c.want)
		}
	}
}

func TestParseExpires(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64 // -2: refused
	}{
		{"1h", 3600}, {"1d12h", 129600}, {"0", 0}, {"max", ExpiresMax}, {"90", 90}, {"2145916555", ExpiresMax},
		{"1y1M1w1d1h1m1s", 365*86400 + 30*86400 + 7*86400 + 86400 + 3600 + 60 + 1},
		{"1m 30", 90}, {"1h 5m", 3900}, {"30 ", 30},
		{"", -2}, {"1x", -2}, {"1h1d", -2}, {"1h1h", -2}, {"100ms", -2}, {"1s 5 ", -2}, {" ", -2}, {"h", -2},
		{"99999999999999999999", -2}, {"9999999999999999y", -2}, {"-1", -2},
	} {
		got, err := ParseExpires(c.in)
		if c.want == -2 {
			if err == nil || err.Error() != `invalid "expires" parameter value` {
				t.Errorf("ParseExpires(%q) = %d, %v; want nginx's error", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseExpires(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseCookie(t *testing.T) {
	for _, c := range []struct {
		params []string
		want   string // the header for "ID" at the epoch, or the error
	}{
		{nil, "n=ID"},
		{[]string{"expires=0"}, "n=ID; expires=Thu, 01-Jan-70 00:00:00 GMT; max-age=0"},
		{[]string{"path=/", "httponly", "secure", "samesite=none", "domain=x"}, "n=ID; domain=x; httponly; secure; samesite=none; path=/"},
		{[]string{"expires=1x"}, `invalid "expires" parameter value`},
		{[]string{"expires=1h", "expires=2h"}, `parameter "expires" is duplicate`},
		{[]string{"samesite=foo"}, `invalid "samesite" parameter value`},
		{[]string{"samesite="}, `invalid "samesite" parameter value`},
		{[]string{"max-age=10"}, `unknown parameter "max-age=10"`},
		{[]string{"httponly=1"}, `unknown parameter "httponly=1"`},
		{[]string{"domain"}, `unknown parameter "domain"`},
		{[]string{"domain="}, `no value for "domain"`},
		{[]string{"path="}, `no value for "path"`},
		{[]string{"secure", "secure"}, `parameter "secure" is duplicate`},
		{[]string{"domain=$host"}, `domain=$host: a value from a variable is not supported`},
	} {
		ck, err := ParseCookie("n", c.params)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = ck.Header("ID", time.Unix(0, 0))
		}
		if got != c.want {
			t.Errorf("ParseCookie(%q) = %q, want %q", c.params, got, c.want)
		}
	}
	if _, err := ParseCookie("", nil); err == nil || err.Error() != "empty cookie name" {
		t.Errorf("empty name: %v", err)
	}
}

func TestCookieValidate(t *testing.T) {
	for _, c := range []struct {
		c   Cookie
		err string
	}{
		{Cookie{Name: "srv", SameSite: "LAX", Path: "/"}, ""},
		{Cookie{}, "empty cookie name"},
		{Cookie{Name: "a b"}, `may not hold ' '`},
		{Cookie{Name: "srv", SameSite: "sometimes"}, `samesite "sometimes"`},
		{Cookie{Name: "srv", Path: "/;x"}, `path "/;x"`},
	} {
		err := c.c.Validate()
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v, want %q", c.c, err, c.err)
		}
	}
}

func TestSources(t *testing.T) {
	r := httptest.NewRequest("GET", "/p?Route=a%31&x=1&route=late", nil)
	r.Header.Add("Cookie", "srvx=1; SRV= b1 ;srv=second")
	r.Header.Add("Cookie", "other=1")
	r.Header.Add("X-Route", "h1")
	r.Header.Add("X-Route", "h2")
	up := http.Header{}
	up.Add("Set-Cookie", "a=1; path=/")
	up.Add("Set-Cookie", "Sess=S4; path=/")
	up.Add("Set-Cookie", "sess=S5")
	for _, c := range []struct{ src, want string }{
		{"query:route", "a%31"}, // nginx: any case, the first, not decoded
		{"query:x", "1"}, {"query:none", ""},
		{"cookie:srv", "b1 "}, // any case, the first; spaces after '=' skipped, before ';' kept
		{"cookie:other", "1"}, {"cookie:sr", ""},
		{"header:x-route", "h1, h2"},
		{"upstream_cookie:sess", "S4"}, {"upstream_header:set-cookie", "a=1; path=/, Sess=S4; path=/, sess=S5"},
	} {
		s, err := ParseSource(c.src)
		if err != nil {
			t.Fatal(err)
		}
		if s.String() != c.src {
			t.Errorf("%s: String() = %q", c.src, s.String())
		}
		if got := s.Value(r, up); got != c.want {
			t.Errorf("%s = %q, want %q", c.src, got, c.want)
		}
		if s.Upstream() != strings.HasPrefix(c.src, "upstream_") {
			t.Errorf("%s: Upstream() = %v", c.src, s.Upstream())
		}
	}
	var srcs []Source
	for _, s := range []string{"query:none", "cookie:other", "query:x"} {
		src, _ := ParseSource(s)
		srcs = append(srcs, src)
	}
	if got := First(srcs, r, nil); got != "1" {
		t.Errorf("First = %q", got)
	}
	for _, bad := range []string{"route", "query:", "arg:route", "cookie:a b", ":x"} {
		if _, err := ParseSource(bad); err == nil {
			t.Errorf("ParseSource(%q) accepted", bad)
		}
	}
}

func TestParseSources(t *testing.T) {
	for _, c := range []struct {
		list     []string
		upstream bool
		at       int
		err      string
	}{
		{[]string{"query:a", " cookie:b "}, false, -1, ""},
		{[]string{"upstream_cookie:s", "header:x"}, true, -1, ""},
		{[]string{"query:a", "arg:b"}, false, 1, `"arg:b": want query:NAME, cookie:NAME or header:NAME`},
		{[]string{"upstream_header:x"}, false, 0, `"upstream_header:x": the upstream's answer cannot name the request's backend`},
		{[]string{"x"}, true, 0, `"x": want query:NAME, cookie:NAME, header:NAME, upstream_cookie:NAME or upstream_header:NAME`},
	} {
		srcs, at, err := ParseSources(c.list, c.upstream)
		if at != c.at || (err == nil) != (c.err == "") || err != nil && !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("ParseSources(%q, %v) = %v, %d, %v; want at %d, %q", c.list, c.upstream, srcs, at, err, c.at, c.err)
		}
		if err == nil && len(srcs) != len(c.list) {
			t.Errorf("ParseSources(%q): %d sources", c.list, len(srcs))
		}
	}
}

func TestValues(t *testing.T) {
	// Computed independently (Python's hmac and hashlib).
	for _, c := range []struct{ got, want string }{
		{CaddyValue("", "127.0.0.1:8001"), "862b52478cf818ffb842ff9a0aaccc241cd70c774a2c671377c615ecb807c239"},
		{CaddyValue("s3cret", "127.0.0.1:8001"), "ab06427c763ccd181769ad38899d595b3c916bba85f3395d4b1e80b7ab4a8756"},
		{TraefikValue("http://127.0.0.1:8001"), "d412c05c8726a922"},
		{SecretID("s3cret", "127.0.0.1:8001"), "ab06427c763ccd181769ad38899d595b"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

func TestSessions(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := NewSessions(2*time.Second, 3)
	s.Learn("", "S0", "a", at(0)) // lookup only: never creates
	s.Learn("S1", "", "a", at(0))
	s.Learn("S2", "", "b", at(100))
	s.Learn("S3", "S1", "c", at(200)) // create wins: S3 bound, S1 untouched
	steps := []struct {
		ms            int
		session, want string
	}{
		{300, "S0", ""}, {300, "S1", "a"}, {300, "S2", "b"}, {300, "S3", "c"},
		{1999, "S1", "a"}, {2000, "S1", ""}, // expired at last use + timeout
		{2099, "S2", "b"},
	}
	for _, st := range steps {
		if got := s.Lookup(st.session, at(st.ms)); got != st.want {
			t.Errorf("at %d ms %s -> %q, want %q", st.ms, st.session, got, st.want)
		}
	}
	s.Learn("", "S2", "d", at(2050)) // rebind and refresh through lookup
	if got := s.Lookup("S2", at(4000)); got != "d" {
		t.Errorf("S2 rebound at 2050 ms: %q at 4000 ms", got)
	}
	// Full: the least recently used goes.
	s2 := NewSessions(time.Hour, 3)
	for k := 0; k < 5; k++ {
		s2.Learn(fmt.Sprint("S", k), "", "x", at(k))
	}
	if s2.Len() != 3 || s2.Lookup("S0", at(10)) != "" || s2.Lookup("S1", at(10)) != "" || s2.Lookup("S4", at(10)) != "x" {
		t.Errorf("bounded table: len %d, S0 %q S1 %q S4 %q", s2.Len(), s2.Lookup("S0", at(10)), s2.Lookup("S1", at(10)), s2.Lookup("S4", at(10)))
	}
	s2.Learn("", "S2", "y", at(20)) // S2 used: S3 is the oldest now
	s2.Learn("S5", "", "x", at(21))
	if s2.Lookup("S3", at(22)) != "" || s2.Lookup("S2", at(22)) != "y" {
		t.Errorf("LRU order: S3 %q S2 %q", s2.Lookup("S3", at(22)), s2.Lookup("S2", at(22)))
	}
	if d := NewSessions(0, 0); d.Timeout() != DefaultTimeout || d.Max() != DefaultMaxSessions {
		t.Errorf("defaults %v %d", d.Timeout(), d.Max())
	}
}

// The sticky cookie a client gets, as nginx writes it.
func ExampleCookie_Header() {
	c, _ := ParseCookie("srv_id", []string{"expires=1h", "path=/", "httponly"})
	now := time.Date(2026, 12, 1, 23, 15, 44, 0, time.UTC)
	fmt.Println(c.Header("f27f6f347c0761cc00868148742f844d", now))
	// Output: srv_id=f27f6f347c0761cc00868148742f844d; expires=Wed, 02-Dec-26 00:15:44 GMT; max-age=3600; httponly; path=/
}
