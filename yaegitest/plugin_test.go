package yaegitest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
	"gopkg.in/yaml.v3"
)

// backend is a loopback server that names itself in every answer and
// echoes what it received.
type backend struct {
	name    string
	srv     *httptest.Server
	hits    atomic.Int64
	healthy atomic.Bool
}

func newBackend(t *testing.T, name string) *backend {
	t.Helper()
	b := &backend{name: name}
	b.healthy.Store(true)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			if !b.healthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		b.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		h := w.Header()
		h.Set("X-Backend", name)
		h.Set("X-Got-Host", r.Host)
		h.Set("X-Got-Path", r.URL.RequestURI())
		h.Set("X-Got-XFF", strings.Join(r.Header.Values("X-Forwarded-For"), "|"))
		h.Set("X-Got-Proto", r.Header.Get("X-Forwarded-Proto"))
		h.Set("X-Got-Fwd-Host", r.Header.Get("X-Forwarded-Host"))
		w.Write(body)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// newResetter is a backend that accepts each request and drops the
// connection without an answer: a transport error after the request was sent.
func newResetter(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// deadURL is a loopback URL nobody listens on: connections are refused.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// front serves h on loopback and returns its URL and a client for it.
func front(t *testing.T, h http.Handler) (string, *http.Client) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return srv.URL, &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

type reply struct {
	status  int
	backend string
	header  http.Header
	body    string
}

func do(t *testing.T, c *http.Client, method, url, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header.Get("X-Backend"), resp.Header, string(b)}
}

// plugin builds the interpreted middleware "lb" from YAML settings; the
// middleware's context ends with the test.
func plugin(t *testing.T, l *loader, doc string) http.Handler {
	t.Helper()
	return pluginNamed(t, l, doc, "lb")
}

// pluginNamed is plugin for a middleware of another name: each name has
// its own state, which survives a New of the same name.
func pluginNamed(t *testing.T, l *loader, doc, name string) http.Handler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, err := l.newHandler(ctx, doc, name)
	if err != nil {
		t.Fatalf("New: %v\nconfig:\n%s", err, doc)
	}
	return h
}

func serversYAML(urls []string, extra ...string) string {
	var sb strings.Builder
	sb.WriteString("servers:\n")
	for k, u := range urls {
		fmt.Fprintf(&sb, "  - url: %s\n", u)
		if k < len(extra) && extra[k] != "" {
			for _, f := range strings.Split(extra[k], ";") {
				fmt.Fprintf(&sb, "    %s\n", f)
			}
		}
	}
	return sb.String()
}

func TestPluginSmoothSequence(t *testing.T) {
	l := loadPlugin(t, nil)
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	doc := "strategy: smooth_wrr\n" + serversYAML(
		[]string{a.srv.URL, b.srv.URL, c.srv.URL}, `weight: "5"`, "weight: 3", "weight: 2")
	base, client := front(t, plugin(t, l, doc))
	var got []string
	for k := 0; k < 20; k++ {
		r := do(t, client, "GET", base+"/x", "")
		if r.status != 200 {
			t.Fatalf("request %d: status %d", k, r.status)
		}
		got = append(got, r.backend)
	}
	// nginx's sequence for weights 5, 3, 2, twice.
	want := strings.Fields("a b c a a b a c b a a b c a a b a c b a")
	if !slices.Equal(got, want) {
		t.Fatalf("sequence %v, want %v", got, want)
	}
}

// TestPluginForwardedHeaders checks what a server sees: the peer appended
// to X-Forwarded-For, Traefik's X-Forwarded-* passed through, the client's
// Host unless passHostHeader is off, the server URL's path joined.
func TestPluginForwardedHeaders(t *testing.T) {
	l := loadPlugin(t, nil)
	a := newBackend(t, "a")
	for _, pass := range []bool{true, false} {
		doc := fmt.Sprintf("passHostHeader: %v\n", pass) + serversYAML([]string{a.srv.URL + "/base"})
		base, client := front(t, plugin(t, l, doc))
		req, _ := http.NewRequest("GET", base+"/p?q=1", nil)
		req.Host = "site.example"
		// As Traefik's entry point leaves the request for its middlewares.
		req.Header.Set("X-Forwarded-For", "198.51.100.7")
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-Host", "site.example")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		wantHost := "site.example"
		if !pass {
			wantHost = strings.TrimPrefix(a.srv.URL, "http://")
		}
		if got := h.Get("X-Got-Host"); got != wantHost {
			t.Errorf("passHostHeader %v: backend saw Host %q, want %q", pass, got, wantHost)
		}
		if got := h.Get("X-Got-XFF"); got != "198.51.100.7, 127.0.0.1" {
			t.Errorf("X-Forwarded-For %q, want the prior hop then the peer", got)
		}
		if got := h.Get("X-Got-Fwd-Host"); got != "site.example" {
			t.Errorf("X-Forwarded-Host %q", got)
		}
		if got := h.Get("X-Got-Proto"); got != "https" {
			t.Errorf("X-Forwarded-Proto %q", got)
		}
		if got := h.Get("X-Got-Path"); got != "/base/p?q=1" {
			t.Errorf("backend path %q, want the server's base path joined", got)
		}
	}
}

// TestPluginURLHashSticky checks that url_hash sends each URI to one server,
// the one compiled core maps it to, for each hash mode.
func TestPluginURLHashSticky(t *testing.T) {
	l := loadPlugin(t, nil)
	bs := []*backend{newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c"), newBackend(t, "d")}
	var urls []string
	var backends []core.Backend
	for _, b := range bs {
		urls = append(urls, b.srv.URL)
		backends = append(backends, core.Backend{Address: strings.TrimPrefix(b.srv.URL, "http://"), Weight: 1})
	}
	for _, mode := range []string{core.HashKetama, core.HashModulo, core.HashMaglev} {
		if !slices.Contains(core.Strategies(), core.URLHash) {
			t.Fatal("url_hash is not registered in core")
		}
		ref, err := core.New(core.Config{Strategy: core.URLHash, HashMode: mode, Backends: backends})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		doc := "strategy: url_hash\nhashMode: " + mode + "\n" + serversYAML(urls)
		base, client := front(t, plugin(t, l, doc))
		used := map[string]int{}
		for k := 0; k < 40; k++ {
			path := fmt.Sprintf("/obj/%d?v=%d", k*7919, k%3)
			want := refPick(ref, path)
			for rep := 0; rep < 2; rep++ {
				r := do(t, client, "GET", base+path, "")
				if r.backend != bs[want].name {
					t.Fatalf("%s: %s went to %q, compiled core says %q", mode, path, r.backend, bs[want].name)
				}
			}
			used[bs[want].name]++
		}
		if len(used) < 3 {
			t.Errorf("%s: 40 keys used only %v", mode, used)
		}
	}
}

func TestPluginRetryBodyIntact(t *testing.T) {
	l := loadPlugin(t, nil)
	a, b := newBackend(t, "a"), newBackend(t, "b")
	dead := deadURL(t)
	// maxFails 0 keeps the dead server in rotation, so that every other
	// request meets it first.
	doc := "strategy: round_robin\nmaxFails: 0\n" + serversYAML([]string{dead, a.srv.URL, b.srv.URL})
	base, client := front(t, plugin(t, l, doc))
	body := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	for k := 0; k < 9; k++ {
		method := []string{"PUT", "POST", "GET"}[k%3]
		r := do(t, client, method, base+"/up", body)
		if r.status != 200 {
			t.Fatalf("%s %d: status %d %q", method, k, r.status, r.body)
		}
		if r.body != body {
			t.Fatalf("%s %d: backend %s got %d bytes, want the %d sent", method, k, r.backend, len(r.body), len(body))
		}
	}
	if a.hits.Load()+b.hits.Load() != 9 {
		t.Fatalf("hits a=%d b=%d, want 9 in all", a.hits.Load(), b.hits.Load())
	}
}

// TestPluginRetryNeverTwice counts what servers that drop every request see.
func TestPluginRetryNeverTwice(t *testing.T) {
	l := loadPlugin(t, nil)
	var urls []string
	var hits []*atomic.Int64
	for k := 0; k < 3; k++ {
		srv, h := newResetter(t)
		urls = append(urls, srv.URL)
		hits = append(hits, h)
	}
	count := func() []int64 {
		var out []int64
		for _, h := range hits {
			out = append(out, h.Swap(0))
		}
		return out
	}
	cases := []struct {
		name, doc, method string
		status            int
		want              []int64
	}{
		// Every server once, as nginx, then 502.
		{"GET each once", "strategy: round_robin\nmaxFails: 0\n", "GET", 502, []int64{1, 1, 1}},
		{"GET one retry", "strategy: round_robin\nmaxFails: 0\nretries: 1\n", "GET", 502, []int64{1, 1, 0}},
		{"GET no retry", "strategy: round_robin\nmaxFails: 0\nretries: 0\n", "GET", 502, []int64{1, 0, 0}},
		// The same through the tracked path, which counts requests in flight.
		{"GET each once, least_conn", "strategy: least_conn\nmaxFails: 0\n", "GET", 502, []int64{1, 1, 1}},
		{"GET one retry, least_conn", "strategy: least_conn\nmaxFails: 0\nretries: 1\n", "GET", 502, []int64{1, 1, 0}},
		// A POST that reached a server is not sent again.
		{"POST sent", "strategy: round_robin\nmaxFails: 0\n", "POST", 502, []int64{1, 0, 0}},
	}
	for _, c := range cases {
		base, client := front(t, pluginNamed(t, l, c.doc+serversYAML(urls), c.name))
		r := do(t, client, c.method, base+"/", "payload")
		got := count()
		if r.status != c.status || !slices.Equal(got, c.want) {
			t.Errorf("%s: status %d, hits %v; want %d, %v", c.name, r.status, got, c.status, c.want)
		}
	}
}

// TestPluginRetryTimeout checks nginx's "timeout" case: a server that does
// not answer within responseTimeout moves a GET on to the next server, and
// answers a POST that reached it with 504.
func TestPluginRetryTimeout(t *testing.T) {
	l := loadPlugin(t, nil)
	var slowHits atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowHits.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second): // well past the proxy's 200ms
		}
	}))
	t.Cleanup(slow.Close)
	good := newBackend(t, "good")
	doc := "strategy: round_robin\nmaxFails: 0\nresponseTimeout: 200ms\n" + serversYAML([]string{slow.URL, good.srv.URL})
	base, client := front(t, plugin(t, l, doc))
	if r := do(t, client, "GET", base+"/", ""); r.status != 200 || r.backend != "good" {
		t.Errorf("GET: status %d from %q, want 200 from the second server", r.status, r.backend)
	}
	// Round robin carries on from the retry: the slow server comes next.
	if r := do(t, client, "POST", base+"/", "x"); r.status != http.StatusGatewayTimeout {
		t.Errorf("POST that timed out: status %d, want 504", r.status)
	}
	if r := do(t, client, "POST", base+"/", "x"); r.status != 200 || r.backend != "good" {
		t.Errorf("POST to the good server: status %d from %q", r.status, r.backend)
	}
	if n := slowHits.Load(); n != 2 {
		t.Errorf("slow server got %d requests, want 2", n)
	}
}

func TestPluginBackupOnlyWhenPrimariesFail(t *testing.T) {
	l := loadPlugin(t, nil)
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	doc := "strategy: smooth_wrr\nmaxFails: 1\nfailTimeout: 30s\n" +
		serversYAML([]string{a.srv.URL, b.srv.URL, c.srv.URL}, "", "", `backup: "true"`)
	base, client := front(t, plugin(t, l, doc))
	for k := 0; k < 20; k++ {
		if r := do(t, client, "GET", base+"/", ""); r.status != 200 || r.backend == "c" {
			t.Fatalf("request %d with primaries up: status %d from %q", k, r.status, r.backend)
		}
	}
	if c.hits.Load() != 0 {
		t.Fatalf("backup got %d requests while primaries were up", c.hits.Load())
	}
	a.srv.Close()
	b.srv.Close()
	for k := 0; k < 10; k++ {
		if r := do(t, client, "GET", base+"/", ""); r.status != 200 || r.backend != "c" {
			t.Fatalf("request %d with primaries down: status %d from %q", k, r.status, r.backend)
		}
	}
}

func TestPluginAllDown(t *testing.T) {
	l := loadPlugin(t, nil)
	a := newBackend(t, "a")
	base, client := front(t, plugin(t, l, serversYAML([]string{deadURL(t), a.srv.URL}, `down: "true"`, "down: true")))
	if r := do(t, client, "GET", base+"/", ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("every server down: status %d, want 503", r.status)
	}
	base, client = front(t, plugin(t, l, "maxFails: 0\n"+serversYAML([]string{deadURL(t), deadURL(t)})))
	if r := do(t, client, "GET", base+"/", ""); r.status != http.StatusBadGateway {
		t.Errorf("every server refusing: status %d, want 502", r.status)
	}
}

func TestPluginHealthCheck(t *testing.T) {
	l := loadPlugin(t, nil)
	a, b := newBackend(t, "a"), newBackend(t, "b")
	doc := "strategy: round_robin\nhealthCheck:\n  path: /health\n  interval: 20ms\n  timeout: 1s\n" +
		serversYAML([]string{a.srv.URL, b.srv.URL})
	base, client := front(t, plugin(t, l, doc))
	// seen sends 10 requests and reports which servers answered.
	seen := func() map[string]int {
		m := map[string]int{}
		for k := 0; k < 10; k++ {
			r := do(t, client, "GET", base+"/", "")
			if r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			m[r.backend]++
		}
		return m
	}
	if m := seen(); m["a"] != 5 || m["b"] != 5 {
		t.Fatalf("both healthy: %v", m)
	}
	b.healthy.Store(false)
	waitFor(t, "b removed", func() bool { return seen()["b"] == 0 })
	if m := seen(); m["a"] != 10 {
		t.Fatalf("b unhealthy: %v", m)
	}
	b.healthy.Store(true)
	waitFor(t, "b restored", func() bool { m := seen(); return m["a"] == 5 && m["b"] == 5 })
	// Each transition is one line of Traefik's error log, with its reason
	// and no timestamp of its own; nothing at DEBUG.
	prefix := `lbpack middleware "lb": server ` + b.srv.URL
	want := []string{prefix + " is down (status 503)\n", prefix + " is up (status 200)\n"}
	if got := l.stderr.lines(); !slices.Equal(got, want) {
		t.Errorf("error log %q, want %q", got, want)
	}
	if got := l.stdout.lines(); len(got) != 0 {
		t.Errorf("debug log %q, want nothing", got)
	}
}

// TestPluginHealthLogReasons checks the reason a down line gives for a
// server that refuses connections and one that answers too late.
func TestPluginHealthLogReasons(t *testing.T) {
	l := loadPlugin(t, nil)
	slow := slowServer(t, 2*time.Second)
	dead := deadURL(t)
	plugin(t, l, "healthCheck:\n  path: /health\n  interval: 1h\n  timeout: 50ms\n"+serversYAML([]string{dead, slow.URL}))
	want := map[string]bool{
		`lbpack middleware "lb": server ` + dead + " is down (connection refused)\n": true,
		`lbpack middleware "lb": server ` + slow.URL + " is down (timeout)\n":        true,
	}
	waitFor(t, "two down lines", func() bool { return len(l.stderr.lines()) >= 2 })
	got := l.stderr.lines()
	if len(got) != 2 || !want[got[0]] || !want[got[1]] || got[0] == got[1] {
		t.Errorf("error log %q, want the lines %v", got, want)
	}
}

// slowServer is a loopback server that answers after d, or when the
// request ends.
func slowServer(t *testing.T, d time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(d):
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPluginGoroutinesStopOnCancel(t *testing.T) {
	l := loadPlugin(t, nil)
	var urls []string
	for _, n := range []string{"a", "b", "c"} {
		urls = append(urls, newBackend(t, n).srv.URL)
	}
	doc := "healthCheck:\n  path: /health\n  interval: 10ms\n" + serversYAML(urls)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	// Three reloads, as Traefik does them: each New gets a context that the
	// next reload cancels.
	for reload := 0; reload < 3; reload++ {
		ctx, cancel := context.WithCancel(context.Background())
		h, err := l.newHandler(ctx, doc, "lb")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		for k := 0; k < 6; k++ {
			if r := do(t, client, "GET", srv.URL+"/", ""); r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
		}
		if n := runtime.NumGoroutine(); n < before+3 {
			t.Fatalf("%d goroutines with health checks running, %d before: the checks are not running", n, before)
		}
		client.Transport.(*http.Transport).CloseIdleConnections()
		srv.Close()
		cancel()
	}
	var n int
	deadline := time.Now().Add(5 * time.Second)
	for n = runtime.NumGoroutine(); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	if n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after cancel, %d before\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// threeWithReference starts backends a, b and c and returns them, their URLs,
// and a compiled balancer of cfg (its backends set to them, weight 1) that
// says where each key must go.
// refPick is the compiled reference's choice for key, with nothing left in
// flight.
func refPick(ref *core.Balancer, key string) int {
	i, t := core.Pick(ref, key, core.Filter{})
	if t != 0 {
		core.Done(ref, i, t, core.NotSent, false)
	}
	return i
}

func threeWithReference(t *testing.T, cfg core.Config) ([]*backend, []string, *core.Balancer) {
	t.Helper()
	bs := []*backend{newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")}
	var urls []string
	for _, b := range bs {
		urls = append(urls, b.srv.URL)
		cfg.Backends = append(cfg.Backends, core.Backend{Address: strings.TrimPrefix(b.srv.URL, "http://"), Weight: 1})
	}
	ref, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return bs, urls, ref
}

// TestPluginClientIP checks ip_hash's key: the peer, or with trustedIPs
// covering the peer, the rightmost untrusted X-Forwarded-For address;
// compiled core says which server each key maps to.
func TestPluginClientIP(t *testing.T) {
	l := loadPlugin(t, nil)
	bs, urls, ref := threeWithReference(t, core.Config{Strategy: core.IPHash})
	trusting := plugin(t, l, "strategy: ip_hash\ntrustedIPs: 10.0.0.0/8,192.0.2.1\n"+serversYAML(urls))
	plain := plugin(t, l, "strategy: ip_hash\n"+serversYAML(urls))
	cases := []struct {
		h           http.Handler
		remote, xff string
		key         string
	}{
		{plain, "192.0.2.1:5000", "203.0.113.9", "192.0.2.1"},
		{trusting, "192.0.2.1:5000", "203.0.113.9", "203.0.113.9"},
		{trusting, "192.0.2.1:5000", "198.51.100.1, 203.0.113.77, 10.1.2.3", "203.0.113.77"},
		{trusting, "192.0.2.1:5000", "", "192.0.2.1"},
		{trusting, "192.0.2.2:5000", "203.0.113.9", "192.0.2.2"},
		{trusting, "[2001:db8::1]:5000", "203.0.113.9", "2001:db8::1"},
		{trusting, "192.0.2.1:5000", "bogus, 10.0.0.1", "10.0.0.1"},
	}
	for k := 0; k < 30; k++ {
		ip := fmt.Sprintf("%d.%d.%d.9", 11+k*7%200, k*13%256, k*29%256)
		cases = append(cases, struct {
			h           http.Handler
			remote, xff string
			key         string
		}{trusting, "10.9.8.7:1", ip, ip})
	}
	for _, c := range cases {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = c.remote
		if c.xff != "" {
			req.Header.Set("X-Forwarded-For", c.xff)
		}
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		want := refPick(ref, c.key)
		if got := rec.Header().Get("X-Backend"); got != bs[want].name {
			t.Errorf("remote %s xff %q: server %q, want %q (key %s)", c.remote, c.xff, got, bs[want].name, c.key)
		}
	}
}

// TestPluginHashKeys checks that each hashKey kind reads the right part of
// the request: requests equal in that part go where compiled core maps it.
func TestPluginHashKeys(t *testing.T) {
	l := loadPlugin(t, nil)
	bs, urls, ref := threeWithReference(t, core.Config{Strategy: core.URLHash})
	for _, hk := range []string{"uri", "path", "clientip", "header:X-User", "cookie:sid", "query:id"} {
		h := plugin(t, l, "strategy: url_hash\nhashKey: "+hk+"\n"+serversYAML(urls))
		for k := 0; k < 20; k++ {
			v := fmt.Sprintf("v%d", k*104729)
			target := fmt.Sprintf("/p/%d?id=%s", k, v)
			req := httptest.NewRequest("GET", target, nil)
			req.RemoteAddr = fmt.Sprintf("198.51.100.%d:4000", k)
			req.Header.Set("X-User", v)
			req.AddCookie(&http.Cookie{Name: "sid", Value: v})
			var key string
			switch hk {
			case "uri":
				key = target
			case "path":
				key = fmt.Sprintf("/p/%d", k)
			case "clientip":
				key = fmt.Sprintf("198.51.100.%d", k)
			default:
				key = v
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			want := refPick(ref, key)
			if got := rec.Header().Get("X-Backend"); got != bs[want].name {
				t.Errorf("hashKey %s, request %d: server %q, want %q", hk, k, got, bs[want].name)
			}
		}
	}
}

func TestPluginConfigErrors(t *testing.T) {
	l := loadPlugin(t, nil)
	ok := "servers:\n  - url: http://127.0.0.1:8081\n"
	cases := []struct{ doc, want string }{
		{"strategy: zigzag\n" + ok, `strategy "zigzag"`},
		{"servers: []\n", "servers: empty list"},
		{"", "servers: empty list"},
		{"servers:\n  - url: ftp://127.0.0.1:21\n", `servers[0].url "ftp://127.0.0.1:21"`},
		{"servers:\n  - url: http://\n", `servers[0].url "http://"`},
		{"servers:\n  - url: http://127.0.0.1:99999\n", `servers[0].url "http://127.0.0.1:99999"`},
		{ok + "  - url: http://127.0.0.1:8081/other\n", `servers[1].url "http://127.0.0.1:8081/other": same host and port as servers[0]`},
		{"servers:\n  - url: http://127.0.0.1:8081\n    weight: -1\n", "servers[0].weight -1"},
		{"servers:\n  - url: http://127.0.0.1:8081\n    maxConns: -3\n", "servers[0].maxConns -3"},
		{"failTimeout: 5\n" + ok, `failTimeout "5"`},
		{"slowStart: soon\n" + ok, `slowStart "soon"`},
		{"retries: -2\n" + ok, "retries -2"},
		{"maxFails: -1\n" + ok, "maxFails -1"},
		{"hashKey: path\n" + ok, `hashKey "path"`},
		{"strategy: url_hash\nhashKey: \"header:\"\n" + ok, `hashKey "header:"`},
		{"strategy: url_hash\nhashKey: body\n" + ok, `hashKey "body"`},
		{"strategy: ip_hash\nhashKey: uri\n" + ok, `hashKey "uri"`},
		{"strategy: url_hash\nhashMode: zigzag\n" + ok, "zigzag"},
		{"strategy: url_hash\n" + ok + "  - url: http://127.0.0.1:8082\n    backup: true\n", "backup"},
		{"healthCheck:\n  path: health\n" + ok, `healthCheck.path "health"`},
		{"healthCheck:\n  path: /h\n  interval: 0s\n" + ok, `healthCheck.interval "0s"`},
		{"trustedIPs: 10.0.0.0/33\n" + ok, `trustedIPs[0] "10.0.0.0/33"`},
		{"connectTimeout: fast\n" + ok, `connectTimeout "fast"`},
		{"maxFails: many\n" + ok, `'MaxFails'`}, // rejected by the decoder, as in Traefik
		// Keys the decoder leaves over reach New through Config.Unknown.
		{"retrys: 2\n" + ok, "lbpack middleware \"lb\": retrys: unknown key (did you mean retries?)"},
		{"maxFail: 2\n" + ok, "maxFail: unknown key (did you mean maxFails?)"},
		{"servers:\n  - url: http://127.0.0.1:8081\n    wieght: 2\n", "servers[0].wieght: unknown key (did you mean weight?)"},
		{"healthCheck:\n  path: /h\n  timout: 1s\n" + ok, "healthCheck.timout: unknown key (did you mean timeout?)"},
		{"servers:\n  - url: http://127.0.0.1:8081\n    weight: 0\n", "servers[0].weight 0: must be at least 1"},
		{"failTimeout: 0s\n" + ok, `failTimeout "0s": must be positive`},
		{"trustedIPs: \"::ffff:10.0.0.0/64\"\n" + ok, "prefix length of 96 or more"},
		{"strategy: url_hash\nhashMode: bounded\nloadFactor: 0.5\n" + ok, "loadFactor 0.5: must be above 1"},
	}
	for _, c := range cases {
		_, err := l.newHandler(context.Background(), c.doc, "lb")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config:\n%s\nerror %v, want one containing %q", c.doc, err, c.want)
		} else if strings.Count(err.Error(), "lbpack") > 1 {
			t.Errorf("error %v: want one prefix", err)
		}
	}
}

// TestManifestTestData feeds the manifest's testData to New, as the plugin
// catalog does.
func TestManifestTestData(t *testing.T) {
	data, err := os.ReadFile("../.traefik.yml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		DisplayName string    `yaml:"displayName"`
		Type        string    `yaml:"type"`
		Import      string    `yaml:"import"`
		Summary     string    `yaml:"summary"`
		TestData    yaml.Node `yaml:"testData"`
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.DisplayName == "" || m.Summary == "" || m.Type != "middleware" || m.Import != pluginImport {
		t.Fatalf("manifest fields: %+v", m)
	}
	settings, _ := stringly(&m.TestData).(map[string]any)
	if len(settings) == 0 {
		t.Fatal("manifest has no testData")
	}
	l := loadPlugin(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := l.newHandlerMap(ctx, settings, "lbpack"); err != nil {
		t.Fatalf("New rejects the manifest's testData: %v", err)
	}
}

// TestExampleConfigs feeds every lbpack middleware of the Traefik example's
// dynamic configuration to New, and checks that the static configuration
// loads the module the manifest belongs to.
func TestExampleConfigs(t *testing.T) {
	var static struct {
		Experimental struct {
			LocalPlugins map[string]struct {
				ModuleName string `yaml:"moduleName"`
			} `yaml:"localPlugins"`
		} `yaml:"experimental"`
	}
	data, err := os.ReadFile("../examples/traefik/traefik.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &static); err != nil {
		t.Fatal(err)
	}
	if got := static.Experimental.LocalPlugins["lbpack"].ModuleName; got != modulePath {
		t.Fatalf("static configuration loads module %q, want %q", got, modulePath)
	}
	data, err = os.ReadFile("../examples/traefik/dynamic.yml")
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := settingsMap(string(data))
	if err != nil {
		t.Fatal(err)
	}
	middlewares, _ := dyn["http"].(map[string]any)["middlewares"].(map[string]any)
	l := loadPlugin(t, nil)
	n := 0
	for name, m := range middlewares {
		plugin, _ := m.(map[string]any)["plugin"].(map[string]any)
		settings, ok := plugin["lbpack"].(map[string]any)
		if !ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := l.newHandlerMap(ctx, settings, name); err != nil {
			t.Errorf("middleware %s: %v", name, err)
		}
		cancel()
		n++
	}
	if n < 2 {
		t.Fatalf("found %d lbpack middlewares in the example", n)
	}
}

// TestPluginAbortedResponseEnds checks that a response that breaks off
// midway (the reverse proxy aborts it with a panic) still ends the request
// in the balancer: least_conn keeps sharing between two idle servers instead
// of seeing one stuck with requests in flight.
func TestPluginAbortedResponseEnds(t *testing.T) {
	l := loadPlugin(t, nil)
	var broken atomic.Int64
	brk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		broken.Add(1)
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte("partial"))
		http.NewResponseController(w).Flush()
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	}))
	t.Cleanup(brk.Close)
	good := newBackend(t, "good")
	base, _ := front(t, plugin(t, l, "strategy: least_conn\nmaxFails: 0\n"+serversYAML([]string{brk.URL, good.srv.URL})))
	// No keep-alive: Go's client would resend a GET whose reused
	// connection closed before an answer, and blur the counts.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for k := 0; k < 8; k++ {
		resp, err := client.Get(base + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	if broken.Load() != 4 || good.hits.Load() != 4 {
		t.Fatalf("broken server got %d requests, good %d; want 4 and 4 (ties alternate when nothing leaks)", broken.Load(), good.hits.Load())
	}
}
