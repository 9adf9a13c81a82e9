package yaegitest

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lbpack/lbpack/core"
)

// steerIDs are nginx's ids of steerURLs' servers, by letter (core's
// StickyID, which the sticky replay holds to nginx's bytes).
var steerIDs = map[string]string{"a": core.StickyID("10.0.0.1:8001"), "b": core.StickyID("10.0.0.2:8002"), "c": core.StickyID("10.0.0.3:8003")}

// TestSteerSticky: in steer mode the client-facing sticky cookie is the
// plugin's: read from the request before the service's cookie replaces
// it, set on the answer that comes back through the service, once the
// service's own is out, before the server's own cookies, naming the
// server the service used. Learn learns from the answer the service
// passes back.
func TestSteerSticky(t *testing.T) {
	l := loadPlugin(t, nil)
	for _, c := range []struct {
		name   string
		sticky string   // the plugin's sticky settings
		down   string   // the server the service has down ("" none)
		own    bool     // the servers set a cookie of their own
		sends  []string // each request's Cookie header
		used   string   // the servers the service used, in order
		set    []string // each answer's Set-Cookie headers, joined by |
	}{
		{"bound", "sticky:\n  cookie:\n    name: srv\n    path: /\n", "", false,
			[]string{"", "srv=" + steerIDs["c"], "x=1; srv=" + steerIDs["c"], "srv=garbage"}, "a c c b",
			[]string{"srv=" + steerIDs["a"] + "; path=/", "srv=" + steerIDs["c"] + "; path=/", "srv=" + steerIDs["c"] + "; path=/", "srv=" + steerIDs["b"] + "; path=/"}},
		{"before the server's own", "sticky:\n  cookie:\n    name: srv\n", "", true,
			[]string{"srv=" + steerIDs["b"]}, "b", []string{"srv=" + steerIDs["b"] + "|session=s1"}},
		{"the server the service used", "sticky:\n  cookie:\n    name: srv\n", "http://10.0.0.2:8002", true,
			[]string{"srv=" + steerIDs["b"]}, "c", []string{"srv=" + steerIDs["c"] + "|session=s1"}},
		{"the service's cookie name, Traefik's values", "sticky:\n  cookie:\n    name: lb\n    value: traefik\n", "", false,
			[]string{"lb=" + sha256Cookie(steerURLs[2]), "lb=" + sha256Cookie(steerURLs[2])}, "c c",
			[]string{"lb=" + sha256Cookie(steerURLs[2]), "lb=" + sha256Cookie(steerURLs[2])}},
		{"route", "sticky:\n  route: [cookie:route]\n", "", false,
			[]string{"route=" + steerIDs["b"], "route=" + steerIDs["b"], ""}, "b b a", []string{"", "", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := newStickyService("lb", sha256Cookie, steerURLs...)
			if c.down != "" {
				svc.setDown(c.down, true)
				svc.turn = 2
			}
			if c.own {
				svc.answer = func(w http.ResponseWriter, r *http.Request, url string) {
					http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1"})
					io.WriteString(w, "ok")
				}
			}
			base, client := front(t, steerPluginNamed(t, l, steerDoc(c.sticky, steerURLs), "steer-sticky/"+c.name, svc))
			for k, cookie := range c.sends {
				req, _ := http.NewRequest("GET", base+"/", nil)
				if cookie != "" {
					req.Header.Set("Cookie", cookie)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body) // the whole answer: the request has ended
				resp.Body.Close()
				if got := strings.Join(resp.Header.Values("Set-Cookie"), "|"); got != c.set[k] {
					t.Errorf("request %d: Set-Cookie %q, want %q", k, got, c.set[k])
				}
			}
			if _, used := svc.record(); strings.Join(names(used, same), " ") != c.used {
				t.Errorf("servers used %v, want %s", names(used, same), c.used)
			}
		})
	}
}

// TestSteerStickyRetry: behind the retry middleware, a request bound to a
// server that fails (502, Traefik's answer to a refused connection) goes on
// to a server it has not tried; the answer the client gets names that one,
// once. With no retry, the 502 names the failed server. (maxFails 0: the
// failure does not take the server out; the request's tries alone keep it
// from going back.)
func TestSteerStickyRetry(t *testing.T) {
	l := loadPlugin(t, nil)
	for _, attempts := range []int{3, 1} {
		svc := newStickyService("lb", sha256Cookie, steerURLs...)
		svc.answer = func(w http.ResponseWriter, r *http.Request, url string) {
			if url == steerURLs[1] {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			io.WriteString(w, "ok")
		}
		h := steerPluginNamed(t, l, steerDoc("maxFails: 0\nsticky:\n  cookie:\n    name: srv\n", steerURLs), "steer-sticky-retry/"+string(rune('0'+attempts)), svc)
		base, client := front(t, retryMiddleware(attempts, h))
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.Header.Set("Cookie", "srv="+steerIDs["b"])
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) // the whole answer: the request has ended
		resp.Body.Close()
		_, used := svc.record()
		want, status, usedWant := "srv="+steerIDs["a"], 200, "b a"
		if attempts == 1 {
			want, status, usedWant = "srv="+steerIDs["b"], 502, "b"
		}
		if got := strings.Join(resp.Header.Values("Set-Cookie"), "|"); got != want || resp.StatusCode != status || strings.Join(names(used, same), " ") != usedWant {
			t.Errorf("%d attempts: %d with Set-Cookie %q after servers %v; want %d with %q after %s", attempts, resp.StatusCode, got, names(used, same), status, want, usedWant)
		}
	}
}

// TestSteerStickyLearn: a session the server creates, in the answer the
// service passes back, binds the requests that name it to that server; a
// session nobody created binds nothing.
func TestSteerStickyLearn(t *testing.T) {
	l := loadPlugin(t, nil)
	svc := newStickyService("lb", sha256Cookie, steerURLs...)
	svc.answer = func(w http.ResponseWriter, r *http.Request, url string) {
		if s := r.URL.Query().Get("set"); s != "" {
			http.SetCookie(w, &http.Cookie{Name: "sess", Value: s})
		}
		io.WriteString(w, "ok")
	}
	doc := steerDoc("strategy: round_robin\nsticky:\n  learn:\n    create: [upstream_cookie:sess]\n    lookup: [cookie:sess]\n", steerURLs)
	base, client := front(t, steerPluginNamed(t, l, doc, "steer-sticky-learn", svc))
	for _, s := range []struct{ query, session string }{
		{"set=S1", ""}, {"", "S1"}, {"", "S1"}, {"", ""}, {"", "S9"}, {"", "S1"},
	} {
		req, _ := http.NewRequest("GET", base+"/?"+s.query, nil)
		if s.session != "" {
			req.Header.Set("Cookie", "sess="+s.session)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) // the whole answer: the request has ended
		resp.Body.Close()
	}
	// round_robin's turn does not move for a bound request.
	if _, used := svc.record(); strings.Join(names(used, same), " ") != "a a a b c a" {
		t.Errorf("servers used %v, want a a a b c a", names(used, same))
	}
}
