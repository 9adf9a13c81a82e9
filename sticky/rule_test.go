package sticky

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestRequestID(t *testing.T) {
	srcs := func(list ...string) []Source {
		out, _, err := ParseSources(list, false)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	now := time.Unix(1_800_000_000, 0)
	sessions := NewSessions(time.Hour, 10)
	sessions.Learn("S1", "", "server-b", now)
	cookie, err := ParseCookie("srv_id", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/p?route=r7", nil)
	r.Header.Add("Cookie", "srv_id=abc; sid=S1; other=S9")
	for _, c := range []struct {
		name        string
		rule        Rule
		sessions    *Sessions
		id, session string
	}{
		{"cookie", Rule{Cookie: &cookie}, sessions, "abc", ""},
		{"route", Rule{Route: srcs("cookie:none", "query:route")}, sessions, "r7", ""},
		{"route none", Rule{Route: srcs("cookie:none")}, sessions, "", ""},
		{"learn bound", Rule{Lookup: srcs("cookie:sid"), Create: srcs("cookie:sid")}, sessions, "server-b", "S1"},
		{"learn unknown", Rule{Lookup: srcs("cookie:other")}, sessions, "", "S9"},
		{"learn no table", Rule{Lookup: srcs("cookie:sid")}, nil, "", "S1"},
		{"learn none", Rule{Lookup: srcs("query:sid")}, sessions, "", ""},
	} {
		id, session := RequestID(&c.rule, r, c.sessions, now.Add(time.Minute))
		if id != c.id || session != c.session {
			t.Errorf("%s: %q, %q; want %q, %q", c.name, id, session, c.id, c.session)
		}
	}
	if id, _ := RequestID(&Rule{Lookup: srcs("cookie:sid")}, r, sessions, now.Add(2*time.Hour)); id != "" {
		t.Errorf("an expired session: %q, want none", id)
	}
}
