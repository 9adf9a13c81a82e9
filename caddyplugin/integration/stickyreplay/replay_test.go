// Package stickyreplay replays nginx's recorded sticky sessions
// (conformance/testdata/sticky) through a real Caddy, in process, with
// lbpack's policies, request for request: the backend that answered, the
// status and every Set-Cookie header, byte for byte.
//
// The recordings' upstreams are fixed addresses, 127.0.0.1:44101 and on,
// whose MD5s are the cookies' values (and which ketama hashes). Caddy dials
// those very addresses, so the ids and the hash rings are the recorded
// ones; its transport reaches them through a forward proxy on this test's
// own port, which answers as the backend the request was sent to. Nothing
// listens on the recorded ports.
//
// Caddy runs in process (its global state: one config at a time), in a
// test binary of its own.
package stickyreplay

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/lbpack/lbpack/caddyplugin"
	"github.com/lbpack/lbpack/conformance/hold"
	"github.com/lbpack/lbpack/conformance/stickydata"
	"github.com/lbpack/lbpack/internal/nginxconf"
	"github.com/lbpack/lbpack/sticky"
)

// Addresses of this test, on ports the system chooses (a fixed port in
// the ephemeral range can be any connection's local port): the forward
// proxy playing the backends, and Caddy.
var proxyAddr, caddyAddr string

const dataDir = "../../../conformance/testdata/sticky"

// The recordings' schema (conformance/testdata/sticky/README.md).
type (
	family     = stickydata.Family
	stickyCase = stickydata.Case
	exchange   = stickydata.Exchange
)

// notReplayed says why a case cannot go through Caddy, "" when it can:
// nginx refused its configuration (no answers recorded), or lbpack's
// converter refuses it.
func notReplayed(c *stickyCase) string {
	if !c.ConfigTest.OK {
		return "nginx refuses the configuration; no answers recorded (the converter's tests hold its refusals to nginx's)"
	}
	if _, err := convert([]*stickyCase{c}); err != nil {
		return "the converter refuses it: " + err.Error()
	}
	return ""
}

// nginxConf is the nginx.conf the recorder ran cases in (their upstream
// blocks and locations, nginx's realip from X-Real-IP), listening on
// Caddy's address here.
func nginxConf(cases []*stickyCase) string {
	var b strings.Builder
	b.WriteString("http {\n    proxy_next_upstream off;\n")
	for _, c := range cases {
		b.WriteString(c.Upstream)
	}
	b.WriteString("    server {\n        listen " + caddyAddr + ";\n        set_real_ip_from 127.0.0.1;\n        real_ip_header X-Real-IP;\n")
	for _, c := range cases {
		b.WriteString(c.Location)
	}
	b.WriteString("    }\n}\n")
	return b.String()
}

// convert is lbpack's converter (what `lbsim convert` writes) on the
// cases' nginx.conf, adapted to Caddy's JSON, with what this test adds:
// no admin endpoint, quiet logs, and every reverse proxy's transport
// through the backends' proxy (see backends).
func convert(cases []*stickyCase) ([]byte, error) {
	ds, err := nginxconf.ParseFS(fstest.MapFS{"nginx.conf": {Data: []byte(nginxConf(cases))}}, "nginx.conf")
	if err != nil {
		return nil, err
	}
	cfg, err := nginxconf.Load(ds)
	if err != nil {
		return nil, err
	}
	caddyfile, _ := cfg.Caddyfile()
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(caddyfile, nil)
	if err != nil {
		return nil, fmt.Errorf("the converted Caddyfile does not adapt: %v\n%s", err, caddyfile)
	}
	var v map[string]any
	if err := json.Unmarshal(adapted, &v); err != nil {
		return nil, err
	}
	v["admin"] = map[string]any{"disabled": true}
	v["logging"] = map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}}
	proxies := 0
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			if x["handler"] == "reverse_proxy" {
				proxies++
				viaBackends(x)
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	if proxies != len(cases) {
		return nil, fmt.Errorf("%d reverse proxies in the converted config for %d cases:\n%s", proxies, len(cases), caddyfile)
	}
	return json.Marshal(v)
}

// viaBackends sends a reverse proxy's requests through the backends'
// proxy: its transport's network proxy, and the upstream's address in the
// Host header, by which Go's transport names the upstream to a proxy.
func viaBackends(h map[string]any) {
	tr, _ := h["transport"].(map[string]any)
	if tr == nil {
		tr = map[string]any{"protocol": "http"}
		h["transport"] = tr
	}
	tr["network_proxy"] = map[string]any{"from": "url", "url": "http://" + proxyAddr}
	set := child(child(h, "headers"), "request")
	set = child(set, "set")
	set["Host"] = []string{"{http.reverse_proxy.upstream.hostport}"}
}

// child returns m[key] as an object, making it if absent.
func child(m map[string]any, key string) map[string]any {
	c, _ := m[key].(map[string]any)
	if c == nil {
		c = map[string]any{}
		m[key] = c
	}
	return c
}

// backends is the forward proxy that plays every backend: it answers with
// the address the request was sent to, sets sess=ID for set=ID, holds a
// request with hold=ID until released, and drops the connection of a
// request to an address that does not listen in the recording.
type backends struct {
	mu    sync.Mutex
	dead  map[string]bool
	gates *hold.Gates
}

func (b *backends) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	addr := r.URL.Host
	b.mu.Lock()
	dead := b.dead[addr]
	b.mu.Unlock()
	if dead || addr == "" {
		// A refused connection, as near as a proxy gets: no answer.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	q := r.URL.Query()
	if id := q.Get("set"); id != "" {
		w.Header().Add("Set-Cookie", "sess="+id+"; path=/")
	}
	if id := q.Get("hold"); id != "" && !b.gates.Wait(r, id, nil) {
		http.Error(w, "unknown hold "+id, http.StatusInternalServerError)
		return
	}
	io.WriteString(w, addr)
}

func startBackends(t *testing.T) *backends {
	b := &backends{dead: map[string]bool{}, gates: hold.New()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("the backends' proxy: %v", err)
	}
	proxyAddr = ln.Addr().String()
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		b.gates.ReleaseAll()
		srv.Close()
	})
	return b
}

// answer is what the replay compares of Caddy's answer.
type answer struct {
	status    int
	backend   string
	setCookie []string
	date      time.Time
	closed    bool // the answer closed the connection
	err       error
}

func send(client *http.Client, c *stickyCase, ex *exchange) answer {
	req, err := http.NewRequest(ex.Method, "http://"+caddyAddr+ex.Target, nil)
	if err != nil {
		return answer{err: err}
	}
	for _, h := range ex.Headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, setCookie: res.Header.Values("Set-Cookie"), closed: res.Close, err: err}
	if res.StatusCode == http.StatusOK {
		a.backend = string(body)
	}
	a.date, _ = http.ParseTime(res.Header.Get("Date"))
	return a
}

var expiresDate = regexp.MustCompile(`; expires=([^;]+)`)

// cookiesMatch compares Caddy's Set-Cookie headers with nginx's: byte for
// byte, but for the sticky cookie's expires date, which must be the
// answer's Date plus the configured time (or, across a second boundary,
// one second less), as conformance's data test requires of nginx's.
func cookiesMatch(c *stickyCase, got, want []string, date time.Time) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] == want[i] {
			continue
		}
		if c.ExpiresSeconds == nil || *c.ExpiresSeconds < 0 || !expiresDate.MatchString(want[i]) {
			return false
		}
		ok := false
		for _, back := range []time.Duration{0, time.Second} {
			at := date.Add(-back).Add(time.Duration(*c.ExpiresSeconds) * time.Second)
			ok = ok || got[i] == expiresDate.ReplaceAllString(want[i], "; expires="+sticky.CookieTime(at))
		}
		if !ok {
			return false
		}
	}
	return true
}

// replay sends a case's requests in order and compares each answer.
func replay(t *testing.T, b *backends, c *stickyCase) {
	client := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	type flight struct {
		done chan answer
		got  *answer
	}
	held := map[int]*flight{}
	newConn := false // the last answer closed its connection
	check := func(i int, ex *exchange, got answer) {
		want := ex.Answer
		status := want.Status
		if status == http.StatusBadGateway && want.Backend == "" && !strings.Contains(want.UpstreamAddr, ":") {
			// nginx's "no live upstreams" is a 502; Caddy answers 503
			// when the policy has no upstream to give.
			status = http.StatusServiceUnavailable
		}
		switch {
		case got.err != nil:
			t.Errorf("%s request %d (%s): %v", c.Name, i, ex.Target, got.err)
		case got.status != status || got.backend != want.Backend || !cookiesMatch(c, got.setCookie, want.SetCookie, got.date):
			t.Errorf("%s request %d (%s %v):\n got %d %q %q\nwant %d %q %q (nginx tried %s)",
				c.Name, i, ex.Target, ex.Headers, got.status, got.backend, got.setCookie, status, want.Backend, want.SetCookie, want.UpstreamAddr)
		}
	}
	for i := range c.Requests {
		ex := &c.Requests[i]
		for _, j := range ex.ReleaseBefore {
			f := held[j]
			if f == nil {
				t.Fatalf("%s request %d: releases %d, which is not held", c.Name, i, j)
			}
			b.gates.Release(hold.ID(c.Requests[j].Target))
			got := <-f.done
			check(j, &c.Requests[j], got)
			delete(held, j)
		}
		if len(ex.ReleaseBefore) > 0 || ex.Held || newConn {
			// This request and the one before are on different
			// connections: the policy sees a try end when the callback of
			// its request's end runs, a moment after the answer (a
			// request on the same connection ends the previous one's
			// try first).
			time.Sleep(50 * time.Millisecond)
		}
		if ex.PauseBeforeMS > 0 {
			time.Sleep(time.Duration(ex.PauseBeforeMS) * time.Millisecond)
		}
		if ex.Held {
			came := b.gates.Hold(hold.ID(ex.Target))
			f := &flight{done: make(chan answer, 1)}
			held[i] = f
			go func(ex *exchange, done chan<- answer) {
				own := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
				done <- send(own, c, ex)
				own.CloseIdleConnections()
			}(ex, f.done)
			select {
			case <-came:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s request %d: never reached its backend", c.Name, i)
			}
			continue
		}
		got := send(client, c, ex)
		newConn = got.closed
		check(i, ex, got)
	}
	for j, f := range held {
		b.gates.Release(hold.ID(c.Requests[j].Target))
		check(j, &c.Requests[j], <-f.done)
	}
}

// waitServing waits (at most a second) until the new config's server
// answers: the previous one's connections may be closing.
func waitServing(t *testing.T) {
	client := &http.Client{Transport: &http.Transport{}, Timeout: time.Second}
	defer client.CloseIdleConnections()
	for try := 0; ; try++ {
		res, err := client.Get("http://" + caddyAddr + "/not-a-case")
		if err == nil {
			res.Body.Close()
			return
		}
		if try == 50 {
			t.Fatalf("Caddy does not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every recorded request of the sticky families goes through Caddy with
// lbpack and gets nginx's backend, status and Set-Cookie headers. The cases
// that cannot be replayed are listed in the log with the reason.
func TestReplayStickyRecordings(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(dataDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in %s: %v", dataDir, err)
	}
	b := startBackends(t)
	caddyAddr = freeAddr(t)
	replayed, requests := 0, 0
	var skipped []string
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var fam family
		if err := json.Unmarshal(raw, &fam); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var cases []*stickyCase
		for i := range fam.Cases {
			c := &fam.Cases[i]
			if why := notReplayed(c); why != "" {
				skipped = append(skipped, fmt.Sprintf("%s/%s: %s", fam.Family, c.Name, why))
				continue
			}
			cases = append(cases, c)
			b.mu.Lock()
			for _, s := range c.Servers {
				if !s.Listening {
					b.dead[s.Address] = true
				}
			}
			b.mu.Unlock()
		}
		if len(cases) == 0 {
			continue
		}
		cfg, err := convert(cases)
		if err != nil {
			t.Fatalf("%s: %v", fam.Family, err)
		}
		if err := caddy.Load(cfg, true); err != nil {
			t.Fatalf("%s: Caddy refuses the config: %v", fam.Family, err)
		}
		waitServing(t)
		for _, c := range cases {
			t.Run(fam.Family+"/"+c.Name, func(t *testing.T) { replay(t, b, c) })
			replayed++
			requests += len(c.Requests)
		}
	}
	if err := caddy.Stop(); err != nil {
		t.Error(err)
	}
	sort.Strings(skipped)
	for _, s := range skipped {
		t.Logf("not replayed: %s", s)
	}
	t.Logf("replayed %d cases, %d requests, through Caddy with lbpack; %d cases not replayed", replayed, requests, len(skipped))
	// The recordings hold 57 cases nginx and the converter take: fewer
	// replayed means some went unchecked.
	if replayed < 57 {
		t.Errorf("replayed %d cases, want the 57 nginx and the converter take", replayed)
	}
}

// freeAddr returns a loopback address whose port nothing listens on now,
// for Caddy to listen on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
