package yaegitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// probeRecorder is a server that records each health check it gets and
// answers it with answer's status (200 if nil).
type probeRecorder struct {
	srv    *httptest.Server
	mu     sync.Mutex
	probes []string // "METHOD URI host=HOST x-check=VALUE"
	answer func(r *http.Request) int
}

func newProbeRecorder(t *testing.T, answer func(r *http.Request) int) *probeRecorder {
	t.Helper()
	pr := &probeRecorder{answer: answer}
	pr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pr.mu.Lock()
		pr.probes = append(pr.probes, fmt.Sprintf("%s %s host=%s x-check=%s", r.Method, r.RequestURI, r.Host, r.Header.Get("X-Check")))
		pr.mu.Unlock()
		code := 200
		if pr.answer != nil {
			code = pr.answer(r)
		}
		if code >= 300 && code < 400 {
			http.Redirect(w, r, "/moved", code)
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(pr.srv.Close)
	return pr
}

func (pr *probeRecorder) seen() []string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return append([]string(nil), pr.probes...)
}

// TestPluginHealthOptions: the health check's request as configured (a
// path with a query, method, Host, headers, another port and scheme), and
// its verdict (the one healthy status, redirects followed or not), read
// from the server's record and the down and up lines.
func TestPluginHealthOptions(t *testing.T) {
	l := loadPlugin(t, nil)
	for _, c := range []struct {
		name, health string
		answer       func(r *http.Request) int
		probe        string // the first probe, as the server saw it
		state        string // the line logged: "down (...)" or "" (up from the start: no line)
	}{
		{"query", "path: /health?ready=1", nil, "GET /health?ready=1 host=%s x-check=", ""},
		{"request", "path: /hc\n  method: HEAD\n  hostname: health.test\n  headers:\n    X-Check: yes", nil, "HEAD /hc host=health.test x-check=yes", ""},
		{"status wanted", "path: /hc\n  status: 204", nil, "GET /hc host=%s x-check=", "down (status 200)"},
		{"status met", "path: /hc\n  status: 204", func(*http.Request) int { return 204 }, "GET /hc host=%s x-check=", ""},
		{"redirect followed", "path: /hc", func(r *http.Request) int {
			if r.URL.Path == "/moved" {
				return 503
			}
			return 302
		}, "GET /hc host=%s x-check=", "down (status 503)"},
		{"redirect taken", "path: /hc\n  followRedirects: false", func(*http.Request) int { return 302 }, "GET /hc host=%s x-check=", ""},
	} {
		pr := newProbeRecorder(t, c.answer)
		before := len(l.stderr.lines())
		pluginNamed(t, l, "healthCheck:\n  interval: 1h\n  "+c.health+"\n"+serversYAML([]string{pr.srv.URL}), c.name)
		waitFor(t, c.name+": a probe", func() bool { return len(pr.seen()) > 0 })
		host := strings.TrimPrefix(pr.srv.URL, "http://")
		if got, want := pr.seen()[0], strings.Replace(c.probe, "%s", host, 1); got != want {
			t.Errorf("%s: probe %q, want %q", c.name, got, want)
		}
		want := ""
		if c.state != "" {
			want = fmt.Sprintf("lbpack middleware %q: server %s is %s\n", c.name, pr.srv.URL, c.state)
			waitFor(t, c.name+": the down line", func() bool { return len(l.stderr.lines()) > before })
		} else {
			time.Sleep(100 * time.Millisecond)
		}
		if got := strings.Join(l.stderr.lines()[before:], ""); got != want {
			t.Errorf("%s: log %q, want %q", c.name, got, want)
		}
	}
}

// TestPluginHealthPortScheme: port and scheme send the check elsewhere
// than the server's own address: here an https server that is never up,
// checked over http on another port.
func TestPluginHealthPortScheme(t *testing.T) {
	l := loadPlugin(t, nil)
	pr := newProbeRecorder(t, nil)
	_, port, _ := strings.Cut(strings.TrimPrefix(pr.srv.URL, "http://"), ":")
	server := "https://127.0.0.1:1"
	pluginNamed(t, l, "healthCheck:\n  interval: 1h\n  path: /hc\n  scheme: http\n  port: "+port+"\n"+serversYAML([]string{server}), "elsewhere")
	waitFor(t, "a probe", func() bool { return len(pr.seen()) > 0 })
	time.Sleep(100 * time.Millisecond)
	if lines := l.stderr.lines(); len(lines) != 0 {
		t.Errorf("log %q, want none: the server is up", lines)
	}
}

// TestPluginUnhealthyInterval: a server that is down is checked every
// unhealthyInterval, one that is up every interval.
func TestPluginUnhealthyInterval(t *testing.T) {
	l := loadPlugin(t, nil)
	down := newProbeRecorder(t, func(*http.Request) int { return 503 })
	up := newProbeRecorder(t, nil)
	pluginNamed(t, l, "healthCheck:\n  path: /hc\n  interval: 1h\n  unhealthyInterval: 40ms\n"+serversYAML([]string{down.srv.URL, up.srv.URL}), "intervals")
	time.Sleep(500 * time.Millisecond)
	if d, u := len(down.seen()), len(up.seen()); d < 5 || u != 1 {
		t.Errorf("in 500ms: %d checks of the server down, %d of the one up; want 5 or more, and 1", d, u)
	}
}
