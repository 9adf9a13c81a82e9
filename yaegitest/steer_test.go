package yaegitest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The sticky cookie values Traefik gives a server, computed here from the
// formats as Traefik's sources define them.

// sha256Cookie is Traefik v3.3.4 and later's: the first 16 hex digits of
// the SHA-256 of the server's URL.
func sha256Cookie(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:])[:16]
}

// fnvCookie is Traefik v3.0.0 to v3.3.3's: the server's name is the hex
// FNV-64a of its URL, and its cookie the FNV-64 of the name in hex.
func fnvCookie(url string) string {
	a := fnv.New64a()
	a.Write([]byte(url))
	h := fnv.New64()
	h.Write([]byte(hex.EncodeToString(a.Sum(nil))))
	return strconv.FormatUint(h.Sum64(), 16)
}

// stickyService stands for the router's service in steer mode: a Traefik
// loadBalancer with sticky.cookie. A request whose cookie names one of its
// servers that is up goes there; any other goes to its next up server in
// turn, and the answer carries that server's cookie. A server answers with
// answer (by default 200 and its URL).
type stickyService struct {
	cookie string
	value  func(url string) string
	urls   []string

	mu     sync.Mutex
	down   map[string]bool
	turn   int
	got    []string // the cookie each request carried
	header []string // each request's Cookie header
	used   []string // the server each request went to
	answer func(w http.ResponseWriter, r *http.Request, url string)
}

func newStickyService(cookie string, value func(string) string, urls ...string) *stickyService {
	return &stickyService{cookie: cookie, value: value, urls: urls, down: map[string]bool{}}
}

func (s *stickyService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	got := ""
	if c, err := r.Cookie(s.cookie); err == nil {
		got = c.Value
	}
	s.got = append(s.got, got)
	s.header = append(s.header, strings.Join(r.Header.Values("Cookie"), "|"))
	server := ""
	for _, u := range s.urls {
		if s.value(u) == got && !s.down[u] {
			server = u
		}
	}
	if server == "" {
		for k := 0; k < len(s.urls) && server == ""; k++ {
			u := s.urls[s.turn%len(s.urls)]
			s.turn++
			if !s.down[u] {
				server = u
			}
		}
		http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.value(server), Path: "/"})
	}
	s.used = append(s.used, server)
	answer := s.answer
	s.mu.Unlock()
	if answer != nil {
		answer(w, r, server)
		return
	}
	w.Header().Set("X-Server", server)
	io.WriteString(w, "ok")
}

// record returns what the service saw so far, and forgets it.
func (s *stickyService) record() (got, used []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, used = s.got, s.used
	s.got, s.used, s.header = nil, nil, nil
	return got, used
}

func (s *stickyService) setDown(url string, down bool) {
	s.mu.Lock()
	s.down[url] = down
	s.mu.Unlock()
}

// steerPlugin builds the interpreted middleware "lb" in steer mode in
// front of next.
func steerPlugin(t *testing.T, l *loader, doc string, next http.Handler) http.Handler {
	t.Helper()
	return steerPluginNamed(t, l, doc, "lb", next)
}

// steerPluginNamed is steerPlugin for a middleware of another name (each
// name has its own balancer).
func steerPluginNamed(t *testing.T, l *loader, doc, name string, next http.Handler) http.Handler {
	t.Helper()
	settings, err := settingsMap(doc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, err := l.newHandlerNext(ctx, settings, name, next)
	if err != nil {
		t.Fatalf("New: %v\nconfig:\n%s", err, doc)
	}
	return h
}

// steerDoc is a steer-mode configuration over urls with the given weights.
func steerDoc(extra string, urls []string, weights ...string) string {
	var w []string
	for _, x := range weights {
		w = append(w, "weight: "+x)
	}
	return "mode: steer\ncookie: lb\n" + extra + serversYAML(urls, w...)
}

var steerURLs = []string{"http://10.0.0.1:8001", "http://10.0.0.2:8002", "http://10.0.0.3:8003"}

// names maps cookie values (or URLs) back to the servers' letters.
func names(values []string, of func(string) string) []string {
	var out []string
	for _, v := range values {
		name := "?" + v
		for k, u := range steerURLs {
			if of(u) == v {
				name = string(rune('a' + k))
			}
		}
		out = append(out, name)
	}
	return out
}

func same(u string) string { return u }

// TestSteerSequence: the cookie values the plugin sets on the requests it
// passes on follow nginx's smooth sequence for weights 5, 3, 2, in both
// formats, and the service never overrides them (no Set-Cookie reaches
// the client).
func TestSteerSequence(t *testing.T) {
	l := loadPlugin(t, nil)
	for _, c := range []struct {
		format string
		value  func(string) string
	}{{"", sha256Cookie}, {"sha256", sha256Cookie}, {"fnv", fnvCookie}} {
		svc := newStickyService("lb", c.value, steerURLs...)
		extra := ""
		if c.format != "" {
			extra = "cookieFormat: " + c.format + "\n"
		}
		base, client := front(t, steerPlugin(t, l, steerDoc(extra, steerURLs, "5", "3", "2"), svc))
		for k := 0; k < 10; k++ {
			r := do(t, client, "GET", base+"/", "")
			if r.status != 200 || r.header.Get("Set-Cookie") != "" {
				t.Fatalf("%q: request %d: status %d, Set-Cookie %q", c.format, k, r.status, r.header.Get("Set-Cookie"))
			}
		}
		got, used := svc.record()
		want := strings.Fields("a b c a a b a c b a")
		if g := names(got, c.value); !slices.Equal(g, want) {
			t.Errorf("%q: cookies %v, want %v", c.format, g, want)
		}
		if u := names(used, same); !slices.Equal(u, want) {
			t.Errorf("%q: servers used %v, want %v", c.format, u, want)
		}
	}
}

// TestSteerReplacesClientCookie: a sticky cookie the client sent is
// replaced by the plugin's, whatever its place among the client's
// cookies, and the client's other cookies pass.
func TestSteerReplacesClientCookie(t *testing.T) {
	l := loadPlugin(t, nil)
	svc := newStickyService("lb", sha256Cookie, steerURLs...)
	base, client := front(t, steerPlugin(t, l, steerDoc("", steerURLs[:2]), svc))
	a, c := sha256Cookie(steerURLs[0]), sha256Cookie(steerURLs[2])
	for _, k := range []struct {
		sent []string
		want string
	}{
		{nil, "lb=" + a},
		{[]string{"x=1"}, "x=1; lb=" + a},
		{[]string{"x=1; lb=" + c + "; y=2"}, "x=1; y=2; lb=" + a},
		{[]string{"lb=" + c, "x=1"}, "x=1; lb=" + a},
		{[]string{"lb=" + c}, "lb=" + a},
	} {
		req, _ := http.NewRequest("GET", base+"/", nil)
		for _, v := range k.sent {
			req.Header.Add("Cookie", v)
		}
		// Every other request goes to a: round robin over a and b, so the
		// record below is of a's.
		for n := 0; n < 2; n++ {
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		svc.mu.Lock()
		header := svc.header[0]
		svc.mu.Unlock()
		svc.record()
		if header != k.want {
			t.Errorf("client's cookies %q: the service got %q, want %q", k.sent, header, k.want)
		}
	}
}

// TestSteerOverride: when the service does not honour the cookie (the
// picked server is down in its health check) its Set-Cookie is taken out
// of the answer, the server's own cookies stay, the answer counts against
// the server that gave it, and the picked server as failed; both, here,
// then leave the rotation (maxFails 1). The first override of a server is
// logged once.
func TestSteerOverride(t *testing.T) {
	l := loadPlugin(t, nil)
	svc := newStickyService("lb", sha256Cookie, steerURLs...)
	svc.setDown(steerURLs[1], true) // b
	svc.turn = 2                    // the service's own next pick: c
	svc.answer = func(w http.ResponseWriter, r *http.Request, url string) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1"})
		if url == steerURLs[2] { // c fails the request it got instead of b
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}
	base, client := front(t, steerPlugin(t, l, steerDoc("failStatus: 503\n", steerURLs, "5", "3", "2"), svc))
	var statuses []int
	for k := 0; k < 8; k++ {
		r := do(t, client, "GET", base+"/", "")
		statuses = append(statuses, r.status)
		if sc := r.header.Values("Set-Cookie"); len(sc) != 1 || sc[0] != "session=s1" {
			t.Errorf("request %d: Set-Cookie %q, want the server's session=s1 alone", k, sc)
		}
	}
	got, used := svc.record()
	// a, then b overridden to c, which fails: both out, a alone after.
	if g, u := names(got, sha256Cookie), names(used, same); !slices.Equal(g, strings.Fields("a b a a a a a a")) ||
		!slices.Equal(u, strings.Fields("a c a a a a a a")) {
		t.Errorf("cookies %v, servers used %v; want a b a..., a c a...", g, u)
	}
	if want := []int{200, 503, 200, 200, 200, 200, 200, 200}; !slices.Equal(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	lines := l.stderr.lines()
	if len(lines) != 1 || !strings.Contains(lines[0], `lbpack middleware "lb": the service did not send a request to server `+steerURLs[1]+": ") ||
		!strings.Contains(lines[0], "the plugin's servers are "+strings.Join(steerURLs, " ")+", the service's seen so far "+steerURLs[2]+";") {
		t.Errorf("error log %q, want one line on b, with both lists", lines)
	}
}

// TestSteerFailStatus: an answer whose status is in failStatus counts as
// the server's failure, so maxFails 1 takes the server out; one that is
// not does not. Steer mode's default failStatus is 502 and 504, which
// Traefik's proxy answers for a connection error and a timeout.
func TestSteerFailStatus(t *testing.T) {
	l := loadPlugin(t, nil)
	for _, c := range []struct {
		extra   string
		status  int
		counted bool
	}{
		{"failStatus: 5xx\n", 500, true},
		{"", 502, true},
		{"", 504, true},
		{"", 500, false},
		{"failStatus: 502\n", 504, false},
		{"maxFails: 0\n", 502, false},
	} {
		svc := newStickyService("lb", sha256Cookie, steerURLs...)
		svc.answer = func(w http.ResponseWriter, r *http.Request, url string) {
			if url == steerURLs[1] {
				w.WriteHeader(c.status)
			}
		}
		base, client := front(t, steerPluginNamed(t, l, steerDoc(c.extra, steerURLs, "5", "3", "2"), fmt.Sprint(c), svc))
		for k := 0; k < 10; k++ {
			do(t, client, "GET", base+"/", "")
		}
		got, _ := svc.record()
		g := names(got, sha256Cookie)
		// Counted, b's failure takes it out for failTimeout; otherwise the
		// sequence goes on as nginx's.
		if c.counted && (!slices.Equal(g[:3], []string{"a", "b", "c"}) || slices.Contains(g[2:], "b")) ||
			!c.counted && !slices.Equal(g, strings.Fields("a b c a a b a c b a")) {
			t.Errorf("%q, b answering %d: cookies %v, want b out after its answer: %v", c.extra, c.status, g, c.counted)
		}
	}
}

// retryMiddleware stands for Traefik's retry middleware in front of the
// plugin: it sends the request on again, up to attempts times, while the
// answer is a 502, each attempt a clone of the request with a value
// context of the request's own (as Traefik's does), and holds back the
// answers of the attempts it retries.
func retryMiddleware(attempts int, next http.Handler) http.Handler {
	type attemptKey struct{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for n := 1; ; n++ {
			req := r.Clone(context.WithValue(r.Context(), attemptKey{}, n))
			if n == attempts {
				next.ServeHTTP(w, req)
				return
			}
			hw := &holdWriter{w: w, h: http.Header{}}
			next.ServeHTTP(hw, req)
			if !hw.held {
				return
			}
		}
	})
}

// holdWriter passes an answer on unless it is a 502.
type holdWriter struct {
	w       http.ResponseWriter
	h       http.Header
	held    bool
	written bool
}

func (h *holdWriter) Header() http.Header {
	if h.written {
		return h.w.Header()
	}
	return h.h
}

func (h *holdWriter) WriteHeader(code int) {
	if h.held || h.written {
		return
	}
	if code == http.StatusBadGateway {
		h.held = true
		return
	}
	for k, v := range h.h {
		h.w.Header()[k] = v
	}
	h.written = true
	h.w.WriteHeader(code)
}

func (h *holdWriter) Write(p []byte) (int, error) {
	if !h.written && !h.held {
		h.WriteHeader(http.StatusOK)
	}
	if h.held {
		return len(p), nil
	}
	return h.w.Write(p)
}

// steerProbeSource is added to the interpreted plugin: it reads how many
// requests a steer-mode middleware holds tried servers for.
const steerProbeSource = `package traefikplugin

import "net/http"

func Retried(h http.Handler) int64 { return h.(*steerer).retried.Load() }
`

// TestSteerRetry: behind a retry middleware, a request whose server
// failed goes on to a server it has not tried, even one the strategy
// would pick again (maxFails 0 keeps the failed server in); once every
// server is tried the plugin answers 502; and the next request starts
// afresh.
func TestSteerRetry(t *testing.T) {
	l := loadPlugin(t, map[string]string{"zz_steer.go": steerProbeSource})
	urls := steerURLs[:2]
	svc := newStickyService("lb", sha256Cookie, urls...)
	svc.answer = func(w http.ResponseWriter, r *http.Request, url string) {
		if url == urls[0] {
			w.WriteHeader(http.StatusBadGateway) // Traefik's answer to a refused connection
			return
		}
		io.WriteString(w, "ok")
	}
	h := steerPlugin(t, l, steerDoc("maxFails: 0\n", urls, "5", "1"), svc)
	base, client := front(t, retryMiddleware(3, h))
	r := do(t, client, "GET", base+"/", "")
	got, _ := svc.record()
	if r.status != 200 || !slices.Equal(names(got, sha256Cookie), []string{"a", "b"}) {
		t.Errorf("status %d after cookies %v, want 200 after a b", r.status, names(got, sha256Cookie))
	}
	// Both servers failing: the third attempt finds none untried.
	svc.answer = func(w http.ResponseWriter, r *http.Request, url string) { w.WriteHeader(http.StatusBadGateway) }
	r = do(t, client, "GET", base+"/", "")
	got, _ = svc.record()
	if r.status != 502 || len(got) != 2 || got[0] == got[1] {
		t.Errorf("all failing: status %d after cookies %v, want 502 after both servers once", r.status, names(got, sha256Cookie))
	}
	// A request of its own is not held to another's tries.
	svc.answer = nil
	r = do(t, client, "GET", base+"/", "")
	if got, _ = svc.record(); r.status != 200 || len(got) != 1 {
		t.Errorf("a new request: status %d after cookies %v, want 200 after one", r.status, names(got, sha256Cookie))
	}
	retried := eval(t, l.i, "traefikplugin.Retried").(func(http.Handler) int64)
	waitFor(t, "the tried servers forgotten", func() bool { return retried(h) == 0 })
}

// TestSteerMismatch: a service whose servers are not the plugin's, or
// whose Traefik writes the other cookie format, is logged at ERROR once
// with what to fix.
func TestSteerMismatch(t *testing.T) {
	l := loadPlugin(t, nil)
	// The service writes c's URL with a trailing slash: another server.
	other := steerURLs[2] + "/"
	svc := newStickyService("lb", sha256Cookie, steerURLs[0], steerURLs[1], other)
	svc.turn = 2
	base, client := front(t, steerPlugin(t, l, steerDoc("", steerURLs), svc))
	for k := 0; k < 6; k++ {
		if r := do(t, client, "GET", base+"/", ""); r.header.Get("Set-Cookie") != "" {
			t.Errorf("request %d: Set-Cookie %q reached the client", k, r.header.Get("Set-Cookie"))
		}
	}
	lines := l.stderr.lines()
	wantUnknown := `lbpack middleware "lb": the service sent a request to a server that is none of the plugin's (its sticky cookie: lb=` + sha256Cookie(other) + "): the plugin's servers are " + strings.Join(steerURLs, " ") +
		", the service's seen so far (not the plugin's) lb=" + sha256Cookie(other) + "; they must be the same, each URL written as in the service\n"
	if len(lines) != 2 || lines[0] != wantUnknown || !strings.Contains(lines[1], "did not send a request to server "+steerURLs[2]+":") {
		t.Errorf("error log %q, want\n%q\nand a line on c", lines, wantUnknown)
	}

	// A plugin set to fnv in front of a Traefik that writes sha256.
	l = loadPlugin(t, nil)
	svc = newStickyService("lb", sha256Cookie, steerURLs...)
	base, client = front(t, steerPlugin(t, l, steerDoc("cookieFormat: fnv\n", steerURLs), svc))
	do(t, client, "GET", base+"/", "")
	lines = l.stderr.lines()
	want := `lbpack middleware "lb": cookieFormat "fnv": the service writes server ` + steerURLs[0] + "'s sticky cookie as " + sha256Cookie(steerURLs[0]) + ", not " + fnvCookie(steerURLs[0]) + ": set the cookieFormat of its Traefik version\n"
	if len(lines) == 0 || lines[0] != want {
		t.Errorf("error log %q, want first %q", lines, want)
	}
}

// TestSteerFlushes: the service's proxy cannot flush through the plugin's
// writer (the interpreter's wrapper has no Flush), so the plugin flushes
// each part of a response still under way itself: a response of known
// length written in two parts a second apart reaches the client part by
// part.
func TestSteerFlushes(t *testing.T) {
	l := loadPlugin(t, nil)
	svc := newStickyService("lb", sha256Cookie, steerURLs[0])
	svc.answer = func(w http.ResponseWriter, r *http.Request, url string) {
		if _, ok := w.(http.Flusher); ok {
			t.Error("the service's writer has a Flush: the plugin's flushing is not needed")
		}
		w.Header().Set("Content-Length", "11")
		io.WriteString(w, "first")
		time.Sleep(time.Second)
		io.WriteString(w, " last!")
	}
	base, client := front(t, steerPlugin(t, l, steerDoc("", steerURLs[:1]), svc))
	start := time.Now()
	resp, err := client.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if took := time.Since(start); took > 700*time.Millisecond {
		t.Errorf("the first part came after %v, with the last", took)
	}
	if rest, _ := io.ReadAll(resp.Body); string(rest) != " last!" {
		t.Errorf("then %q, want \" last!\"", rest)
	}
}
