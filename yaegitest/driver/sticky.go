package driver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// Sticky runs a fixed scenario of sticky sessions over package sticky and
// core, one line per step: cookies parsed and written, sources read, a
// session table learning and expiring, values of every mode, and bound
// picks under smooth_wrr with a draining backend.
func Sticky() string {
	var out []string
	now := time.Date(2026, 12, 1, 23, 15, 44, 0, time.UTC)
	c, err := sticky.ParseCookie("srv", []string{"expires=1d12h", "path=/", "httponly", "samesite=Lax"})
	out = append(out, fmt.Sprint(c.Header("id", now), " ", err))
	_, err = sticky.ParseCookie("srv", []string{"expires=1h", "expires=2h"})
	out = append(out, fmt.Sprint(err))
	out = append(out, sticky.CookieTime(time.Date(2040, 1, 2, 3, 4, 5, 0, time.UTC)))

	r := httptest.NewRequest("GET", "/?route=a%31", nil)
	r.Header.Add("Cookie", "x=1; SRV=b1")
	up := http.Header{}
	up.Add("Set-Cookie", "sess=S1; path=/")
	for _, name := range []string{"query:route", "cookie:srv", "upstream_cookie:sess", "bad"} {
		s, err := sticky.ParseSource(name)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		out = append(out, s.String()+" "+s.Value(r, up))
	}

	s := sticky.NewSessions(2*time.Second, 2)
	s.Learn("S1", "", "a", now)
	s.Learn("S2", "", "b", now.Add(time.Second))
	s.Learn("S3", "", "c", now.Add(time.Second))
	out = append(out, fmt.Sprint(s.Len(), s.Lookup("S1", now.Add(time.Second)), s.Lookup("S2", now.Add(2*time.Second)), s.Lookup("S2", now.Add(3*time.Second))))
	out = append(out, sticky.CaddyValue("k", "127.0.0.1:8001"), sticky.TraefikValue("http://127.0.0.1:8001"), sticky.SecretID("k", "a"))

	b, err := core.New(core.Config{Strategy: core.SmoothWRR, Backends: []core.Backend{
		{Address: "10.0.0.1:80", Weight: 5},
		{Address: "10.0.0.2:80", Weight: 3},
		{Address: "10.0.0.3:80", Weight: 2, Drain: true, Route: "c"},
	}})
	if err != nil {
		return err.Error()
	}
	var picks []string
	for _, id := range []string{"", "c", "", "", "c", "", core.StickyID("10.0.0.2:80"), ""} {
		i, t := core.Pick(b, "", core.Filter{Sticky: id})
		core.Done(b, i, t, 0, false)
		picks = append(picks, fmt.Sprint(i))
	}
	out = append(out, strings.Join(picks, " "))
	return strings.Join(out, "\n")
}
