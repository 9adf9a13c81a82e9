package yaegitest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbpack/lbpack/conformance/hold"
	"github.com/lbpack/lbpack/conformance/stickydata"
	"github.com/lbpack/lbpack/internal/nginxconf"
)

// The replay of nginx's sticky recordings (conformance/testdata/sticky,
// whose README describes them) through the interpreted plugin, request for
// request: the backend that answered and every Set-Cookie header.
//
// The recordings name their servers at fixed addresses (127.0.0.1:44101
// and on): a server's nginx id is the MD5 of its address, and hash
// consistent's ring is built from the addresses too. The plugin is
// configured with the recorded addresses as they are, so that its ids and
// ring are nginx's byte for byte, and its transport dials, for each one, a
// backend listening on a port of the test's own (redirectSource, a test
// file added to the interpreted plugin, swaps the dialer); the backend
// answers with the recorded address it stands for.

// The recordings' schema (conformance/testdata/sticky/README.md).
type (
	recFamily   = stickydata.Family
	recCase     = stickydata.Case
	recServer   = stickydata.Server
	recExchange = stickydata.Exchange
)

// notReplayed are the recorded cases with requests that the plugin does
// not replay, and why. The ones marked converted are replayed from the
// converter's configuration only.
var notReplayed = map[string]struct {
	why       string
	converted bool
}{
	"attr_samesite_variable":       {why: "samesite from a variable ($arg_ss): the plugin's cookie attributes are constants (the converter refuses it)"},
	"attr_domain_variable":         {why: "domain from a variable ($arg_d): the plugin's cookie attributes are constants (the converter refuses it)"},
	"cfg_sticky_before_hash":       {why: "nginx drops a sticky directive written before the method; the plugin's configuration has no order", converted: true},
	"cfg_sticky_before_least_conn": {why: "nginx drops a sticky directive written before the method; the plugin's configuration has no order", converted: true},
}

// Replay modes: the middleware in proxy mode and in steer mode from the
// replay's own configuration (caseYAML), and in proxy mode from the
// converter's (lbsim convert, internal/nginxconf) of the recorded block.
const (
	modeProxy     = "proxy"
	modeSteer     = "steer"
	modeConverted = "converted"
)

// redirectSource is added to the interpreted plugin: Redirect has a
// proxy-mode middleware dial, for each address of to, the address it maps
// to.
const redirectSource = `package traefikplugin

import (
	"context"
	"net"
	"net/http"
)

func Redirect(h http.Handler, to map[string]string) {
	p, ok := h.(*Plugin)
	if !ok {
		p = h.(*stickyProxy).p
	}
	p.tr.DialContext = redirected(to)
}

func redirected(to map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := to[addr]; ok {
			addr = a
		}
		return d.DialContext(ctx, network, addr)
	}
}
`

// TestStickyReplay replays every recorded family whose method lbpack has
// (all of them: round robin, least_conn, ip_hash, hash and hash
// consistent), case by case, through the interpreted plugin in proxy mode
// and in steer mode, and as the converter writes the recorded block. The
// cases it leaves out are logged with the reason.
func TestStickyReplay(t *testing.T) {
	l := loadPlugin(t, map[string]string{"zz_redirect.go": redirectSource})
	redirect := eval(t, l.i, "traefikplugin.Redirect").(func(http.Handler, map[string]string))
	files, err := filepath.Glob(filepath.Join("..", "conformance", "testdata", "sticky", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	be := newReplayBackends(t)
	replayed := map[string]int{}
	for _, f := range files {
		var fam recFamily
		data, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(data, &fam)
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for k := range fam.Cases {
			c := &fam.Cases[k]
			if len(c.Requests) == 0 {
				continue // a configuration nginx refuses: TestStickyErrors has the plugin's
			}
			for _, mode := range []string{modeProxy, modeSteer, modeConverted} {
				if nr, ok := notReplayed[c.Name]; ok && !(nr.converted && mode == modeConverted) {
					t.Logf("not replayed (%s): %s/%s: %s", mode, fam.Family, c.Name, nr.why)
					continue
				}
				t.Run(fam.Family+"/"+c.Name+"/"+mode, func(t *testing.T) {
					replayCase(t, l, redirect, be, c, mode)
				})
				replayed[mode]++
			}
		}
	}
	t.Logf("cases replayed: %d in proxy mode, %d in steer mode, %d converted", replayed[modeProxy], replayed[modeSteer], replayed[modeConverted])
}

// replayCase builds the case's middleware and sends its requests. In
// steer mode the middleware steers a stand-in for Traefik's sticky
// service (replayService), behind a stand-in for Traefik's retry
// middleware when nginx retries (proxy_next_upstream).
func replayCase(t *testing.T, l *loader, redirect func(http.Handler, map[string]string), be *replayBackends, c *recCase, mode string) {
	to := map[string]string{}
	for _, s := range c.Servers {
		to[s.Address] = be.addrFor(t, s.Address, s.Listening)
	}
	name := "replay/" + c.Name + "/" + mode
	var h http.Handler
	switch mode {
	case modeSteer:
		doc, err := caseYAML(c, true)
		if err != nil {
			t.Fatal(err)
		}
		h = steerPluginNamed(t, l, doc, name, newReplayService(t, to))
		if !strings.Contains(c.Location, "proxy_next_upstream off;") {
			h = retryMiddleware(len(c.Servers), h)
		}
	default:
		settings, doc := convertedSettings(t, c)
		if mode == modeProxy {
			var err error
			if doc, err = caseYAML(c, false); err != nil {
				t.Fatal(err)
			}
			if settings, err = settingsMap(doc); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		var err error
		if h, err = l.newHandlerMap(ctx, settings, name); err != nil {
			t.Fatalf("New: %v\n%s", err, doc)
		}
		redirect(h, to)
	}
	base, client := front(t, h)
	held := map[int]chan recAnswer{}
	for i := range c.Requests {
		ex := &c.Requests[i]
		for _, j := range ex.ReleaseBefore {
			be.gates.Release(hold.ID(c.Requests[j].Target))
			checkAnswer(t, c, j, <-held[j])
			delete(held, j)
		}
		if ex.PauseBeforeMS > 0 {
			time.Sleep(time.Duration(ex.PauseBeforeMS) * time.Millisecond)
		}
		if !ex.Held {
			checkAnswer(t, c, i, send(t, client, base, c, ex))
			continue
		}
		arrived := be.gates.Hold(hold.ID(ex.Target))
		done := make(chan recAnswer, 1)
		go func(ex *recExchange) { done <- send(t, client, base, c, ex) }(ex)
		select {
		case <-arrived:
		case a := <-done:
			t.Fatalf("request %d, held, answered %d before its release", i, a.status)
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d, held: no backend got it", i)
		}
		held[i] = done
	}
	for j, done := range held {
		be.gates.Release(hold.ID(c.Requests[j].Target))
		checkAnswer(t, c, j, <-done)
	}
}

// convertedSettings are the middleware's settings that the converter
// writes for the recorded block (with realip trusting the test's address
// for ip_hash, as the recorder's nginx had it), and the YAML it wrote.
func convertedSettings(t *testing.T, c *recCase) (map[string]any, string) {
	realip := ""
	if c.Method == "ip_hash" {
		realip = "    set_real_ip_from 127.0.0.1;\n    real_ip_header X-Forwarded-For;\n"
	}
	conf := "events {}\nhttp {\n" + realip + c.Upstream + "\n    server {\n        listen 127.0.0.1:44100;\n        " + c.Location + "\n    }\n}\n"
	path := filepath.Join(t.TempDir(), "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := nginxconf.LoadFile(path)
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, conf)
	}
	yml, _ := cfg.Traefik()
	dyn, err := settingsMap(string(yml))
	if err != nil {
		t.Fatalf("converted YAML: %v\n%s", err, yml)
	}
	httpCfg, _ := dyn["http"].(map[string]any)
	mws, _ := httpCfg["middlewares"].(map[string]any)
	if len(mws) != 1 {
		t.Fatalf("converted YAML: %d middlewares, want 1\n%s", len(mws), yml)
	}
	for _, mw := range mws {
		plugin, _ := mw.(map[string]any)["plugin"].(map[string]any)
		if settings, ok := plugin["lbpack"].(map[string]any); ok {
			return settings, string(yml)
		}
	}
	t.Fatalf("converted YAML: no lbpack middleware\n%s", yml)
	return nil, ""
}

// caseYAML is the plugin's configuration for a recorded upstream, in
// proxy or steer mode.
func caseYAML(c *recCase, steer bool) (string, error) {
	var b strings.Builder
	if steer {
		b.WriteString("mode: steer\ncookie: lb\n")
	}
	switch c.Method {
	case "round_robin":
		b.WriteString("strategy: smooth_wrr\n")
	case "least_conn":
		b.WriteString("strategy: least_conn\n")
	case "ip_hash":
		b.WriteString("strategy: ip_hash\ntrustedIPs: [127.0.0.1]\n") // X-Real-IP goes as X-Forwarded-For
	case "hash":
		b.WriteString("strategy: url_hash\nhashMode: modulo\nhashKey: query:k\n")
	case "hash_consistent":
		b.WriteString("strategy: url_hash\nhashMode: ketama\nhashKey: query:k\n")
	default:
		return "", fmt.Errorf("method %q: not lbpack's", c.Method)
	}
	if strings.Contains(c.Location, "proxy_next_upstream off;") && !steer {
		b.WriteString("retries: 0\n")
	}
	words := strings.Fields(c.Sticky)
	if len(words) < 2 || words[0] != "sticky" {
		return "", fmt.Errorf("sticky %q", c.Sticky)
	}
	b.WriteString("sticky:\n")
	switch words[1] {
	case "cookie":
		b.WriteString("  cookie:\n    name: " + words[2] + "\n")
		for _, p := range words[3:] {
			k, v, _ := strings.Cut(p, "=")
			switch k {
			case "expires":
				b.WriteString("    expires: \"" + v + "\"\n")
			case "domain", "path":
				b.WriteString("    " + k + ": \"" + v + "\"\n")
			case "httponly":
				b.WriteString("    httpOnly: true\n")
			case "secure":
				b.WriteString("    secure: true\n")
			case "samesite":
				b.WriteString("    sameSite: " + v + "\n")
			default:
				return "", fmt.Errorf("sticky cookie parameter %q", p)
			}
		}
	case "route":
		b.WriteString("  route:\n")
		for _, v := range words[2:] {
			src, err := source(v)
			if err != nil {
				return "", err
			}
			b.WriteString("    - " + src + "\n")
		}
	case "learn":
		b.WriteString("  learn:\n")
		for _, p := range words[2:] {
			k, v, _ := strings.Cut(p, "=")
			switch k {
			case "create", "lookup":
				src, err := source(v)
				if err != nil {
					return "", err
				}
				b.WriteString("    " + k + ": [" + src + "]\n")
			case "timeout":
				b.WriteString("    timeout: " + v + "\n")
			case "header":
				b.WriteString("    header: true\n")
			case "zone":
			default:
				return "", fmt.Errorf("sticky learn parameter %q", p)
			}
		}
	default:
		return "", fmt.Errorf("sticky %q", c.Sticky)
	}
	b.WriteString("servers:\n")
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "  - url: http://%s\n    weight: %d\n", s.Address, s.Weight)
		for _, f := range []struct {
			key string
			on  bool
		}{{"down", s.Down}, {"drain", s.Drain}, {"backup", s.Backup}} {
			if f.on {
				b.WriteString("    " + f.key + ": true\n")
			}
		}
		if s.Route != "" {
			b.WriteString("    route: " + s.Route + "\n")
		}
		if s.MaxConns > 0 {
			fmt.Fprintf(&b, "    maxConns: %d\n", s.MaxConns)
		}
	}
	return b.String(), nil
}

// source is the plugin's name of an nginx variable.
func source(v string) (string, error) {
	for _, m := range []struct{ prefix, kind string }{
		{"$arg_", "query:"}, {"$cookie_", "cookie:"}, {"$http_", "header:"},
		{"$upstream_cookie_", "upstream_cookie:"}, {"$upstream_http_", "upstream_header:"},
	} {
		if name, ok := strings.CutPrefix(v, m.prefix); ok {
			if m.prefix == "$http_" || m.prefix == "$upstream_http_" {
				name = strings.ReplaceAll(name, "_", "-")
			}
			return m.kind + name, nil
		}
	}
	return "", fmt.Errorf("variable %q", v)
}

// recAnswer is the plugin's answer to a replayed request.
type recAnswer struct {
	status    int
	backend   string
	setCookie []string
	date      time.Time
}

// send sends a recorded request through the plugin.
func send(t *testing.T, client *http.Client, base string, c *recCase, ex *recExchange) recAnswer {
	req, err := http.NewRequest(ex.Method, base+ex.Target, nil)
	if err != nil {
		t.Error(err)
		return recAnswer{}
	}
	for _, h := range ex.Headers {
		name, value, _ := strings.Cut(h, ": ")
		if name == "X-Real-IP" && c.Method == "ip_hash" {
			name = "X-Forwarded-For" // nginx's realip; the plugin trusts the test's address
		}
		req.Header.Add(name, value)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return recAnswer{}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	a := recAnswer{status: resp.StatusCode, setCookie: resp.Header.Values("Set-Cookie")}
	if resp.Header.Get("X-Replay-Backend") != "" {
		a.backend = string(body)
	}
	a.date, err = http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		t.Errorf("%s: Date %q: %v", ex.Target, resp.Header.Get("Date"), err)
	}
	return a
}

// checkAnswer compares the plugin's answer to request i with nginx's. One
// difference is nginx's answer when no server can be chosen, 502, where
// the plugin answers 503 (with no Set-Cookie either).
func checkAnswer(t *testing.T, c *recCase, i int, got recAnswer) {
	t.Helper()
	want := c.Requests[i].Answer
	status := want.Status
	if status == http.StatusBadGateway && want.Backend == "" && len(want.SetCookie) == 0 {
		status = http.StatusServiceUnavailable
	}
	ok := got.status == status && got.backend == want.Backend && len(got.setCookie) == len(want.SetCookie)
	for k := 0; ok && k < len(want.SetCookie); k++ {
		ok = sameCookie(got.setCookie[k], want.SetCookie[k], got.date, c.ExpiresSeconds)
	}
	if !ok {
		t.Errorf("request %d (%s %s): %d from %q, Set-Cookie %q (Date %s);\nnginx: %d from %q, Set-Cookie %q",
			i, c.Requests[i].Method, c.Requests[i].Target, got.status, got.backend, got.setCookie, got.date.Format(time.RFC1123),
			want.Status, want.Backend, want.SetCookie)
	}
}

// cookieDate writes t as nginx's cookies carry dates (a two-digit year up
// to 2037).
func cookieDate(t time.Time) string { return t.UTC().Format("Mon, 02-Jan-06 15:04:05 GMT") }

// sameCookie compares a Set-Cookie the plugin wrote with nginx's: equal,
// but for an expires date (not expires=max's constant), which must be the
// plugin's answer's Date plus the configured time, or one second less
// (the clock read at the pick and at the header, as nginx's).
func sameCookie(got, want string, date time.Time, expires *int64) bool {
	if got == want {
		return !strings.Contains(want, "; expires=") || expires != nil && *expires < 0
	}
	i := strings.Index(want, "; expires=")
	if i < 0 || expires == nil || *expires < 0 {
		return false
	}
	j := i + len("; expires=") + len(cookieDate(date))
	if j > len(want) {
		return false
	}
	for _, back := range []time.Duration{0, time.Second} {
		at := date.Add(time.Duration(*expires)*time.Second - back)
		if got == want[:i]+"; expires="+cookieDate(at)+want[j:] {
			return true
		}
	}
	return false
}

// replayBackends are the backends of the replay, one listener per
// recorded address, on the test's ports: LBPACK_STICKY_PORT_TRAEFIK and
// the ports after it, or ports the system picks.
type replayBackends struct {
	srv   *http.Server
	next  int // the next port to try, 0: the system's
	mu    sync.Mutex
	addrs map[string]string // recorded address: the listener's
	gates *hold.Gates
}

func newReplayBackends(t *testing.T) *replayBackends {
	be := &replayBackends{addrs: map[string]string{}, gates: hold.New()}
	if v := os.Getenv("LBPACK_STICKY_PORT_TRAEFIK"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p <= 0 || p > 65000 {
			t.Fatalf("LBPACK_STICKY_PORT_TRAEFIK=%q: want a port", v)
		}
		be.next = p
	}
	be.srv = &http.Server{Handler: http.HandlerFunc(be.serve), ReadHeaderTimeout: 5 * time.Second}
	t.Cleanup(func() {
		be.gates.ReleaseAll()
		be.srv.Close()
	})
	return be
}

// addrFor returns the address the recorded one is dialled at: a listener
// answering as the recorded address, or, for a recorded address nothing
// listened on, a port of the test's where nothing listens.
func (be *replayBackends) addrFor(t *testing.T, recorded string, listening bool) string {
	be.mu.Lock()
	defer be.mu.Unlock()
	if a, ok := be.addrs[recorded]; ok {
		return a
	}
	host, _, _ := net.SplitHostPort(recorded)
	for tries := 0; tries < 50; tries++ {
		port := 0
		if be.next != 0 {
			port = be.next
			be.next++
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil && be.next == 0 {
			if host == "::1" {
				t.Skipf("no IPv6 loopback (%v): the case has an IPv6 server", err)
			}
			t.Fatal(err)
		}
		if err != nil {
			continue
		}
		a := ln.Addr().String()
		if !listening {
			ln.Close() // nothing listens there: connections are refused
		} else {
			go be.srv.Serve(ln)
		}
		be.addrs[recorded] = a
		return a
	}
	t.Fatalf("no port for %s", recorded)
	return ""
}

// serve answers as the recording's backends do: the body is the recorded
// address; set= sets the session cookie; hold= waits for the release.
func (be *replayBackends) serve(w http.ResponseWriter, r *http.Request) {
	as := ""
	if c, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		as = be.recordedOf(c.String())
	}
	if id := r.URL.Query().Get("set"); id != "" {
		w.Header().Add("Set-Cookie", "sess="+id+"; path=/")
	}
	if id := hold.ID(r.URL.RawQuery); id != "" && !be.gates.Wait(r, id, nil) {
		http.Error(w, "unknown hold "+id, http.StatusInternalServerError)
		return
	}
	w.Header().Set("X-Replay-Backend", "1")
	io.WriteString(w, as)
}

// recordedOf is the recorded address a listener's address stands for.
func (be *replayBackends) recordedOf(local string) string {
	be.mu.Lock()
	defer be.mu.Unlock()
	for rec, a := range be.addrs {
		if a == local {
			return rec
		}
	}
	return "?" + local
}

// replayService stands for the router's service in steer mode: a Traefik
// loadBalancer with the sticky cookie lb over the recorded servers, which
// proxies a request to the server the cookie names (Traefik's value: from
// the server's URL), dialled at the test's address for it, and answers
// 502 when the connection fails, as Traefik's proxy does.
type replayService struct {
	proxies map[string]http.Handler // by cookie value
}

func newReplayService(t *testing.T, to map[string]string) *replayService {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := to[addr]; ok {
			addr = a
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	s := &replayService{proxies: map[string]http.Handler{}}
	for recorded := range to {
		u := &url.URL{Scheme: "http", Host: recorded}
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.Transport = tr
		s.proxies[sha256Cookie(u.String())] = rp
	}
	return s
}

func (s *replayService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie("lb")
	if err != nil || s.proxies[c.Value] == nil {
		http.Error(w, "the plugin steered to no server of the service's", http.StatusInternalServerError)
		return
	}
	s.proxies[c.Value].ServeHTTP(w, r)
}
