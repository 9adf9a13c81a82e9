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
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/lbpack/lbpack/caddyplugin"
	"github.com/lbpack/lbpack/sticky"
)

// Ports of this test: the forward proxy playing the backends, and Caddy.
const (
	proxyAddr = "127.0.0.1:47150"
	caddyAddr = "127.0.0.1:47151"
)

const dataDir = "../../../conformance/testdata/sticky"

// The recordings' schema (conformance/testdata/sticky/README.md), the parts
// the replay reads.
type family struct {
	Family string       `json:"family"`
	Cases  []stickyCase `json:"cases"`
}

type stickyCase struct {
	Name           string            `json:"name"`
	Method         string            `json:"method"`
	HashKey        string            `json:"hash_key"`
	Sticky         string            `json:"sticky"`
	Mode           string            `json:"mode"`
	ExpiresSeconds *int64            `json:"expires_seconds"`
	Location       string            `json:"location"`
	Servers        []server          `json:"servers"`
	ConfigTest     struct{ OK bool } `json:"config_test"`
	Requests       []exchange        `json:"requests"`
}

type server struct {
	Address   string `json:"address"`
	Weight    int    `json:"weight"`
	Down      bool   `json:"down"`
	Drain     bool   `json:"drain"`
	Backup    bool   `json:"backup"`
	Route     string `json:"route"`
	MaxConns  int    `json:"max_conns"`
	Listening bool   `json:"listening"`
}

type exchange struct {
	Method        string   `json:"method"`
	Target        string   `json:"target"`
	Headers       []string `json:"headers"`
	PauseBeforeMS int      `json:"pause_before_ms"`
	Held          bool     `json:"held"`
	ReleaseBefore []int    `json:"release_before"`
	Answer        struct {
		Status       int      `json:"status"`
		Backend      string   `json:"backend"`
		UpstreamAddr string   `json:"upstream_addr"`
		SetCookie    []string `json:"set_cookie"`
		Date         string   `json:"date"`
	} `json:"answer"`
}

// notReplayed says why a case cannot go through Caddy, "" when it can.
func notReplayed(c *stickyCase) string {
	switch {
	case !c.ConfigTest.OK:
		return "nginx refuses the configuration (the Caddyfile and JSON error tests cover lbpack's refusals)"
	case strings.HasPrefix(c.Name, "cfg_sticky_before_"):
		return "nginx silently drops a sticky written before the method; lbpack has no such placement to replay"
	case c.Mode == "cookie" && strings.Contains(c.Sticky, "=$"):
		return "a cookie attribute from an nginx variable (" + c.Sticky + "); lbpack's attributes are constants"
	}
	return ""
}

// policy returns the case's lb_policy as JSON: nginx's method, its servers'
// parameters, nginx's default max_fails=1, and the sticky directive.
func policy(t *testing.T, c *stickyCase) map[string]any {
	p := map[string]any{"name": c.Name, "max_fails": 1}
	switch c.Method {
	case "round_robin":
		p["policy"] = "smooth_wrr"
	case "least_conn":
		p["policy"] = "weighted_least_conn"
	case "ip_hash":
		p["policy"] = "nginx_ip_hash"
	case "hash", "hash_consistent":
		if c.HashKey != "$arg_k" {
			t.Fatalf("%s: hash key %q: the replay knows $arg_k only", c.Name, c.HashKey)
		}
		p["policy"], p["key"], p["mode"] = "url_hash", "{http.request.uri.query.k}", "modulo"
		if c.Method == "hash_consistent" {
			p["mode"] = "ketama"
		}
	default:
		t.Fatalf("%s: method %q", c.Name, c.Method)
	}
	ups := map[string]any{}
	for _, s := range c.Servers {
		u := map[string]any{}
		if s.Weight != 1 {
			u["weight"] = s.Weight
		}
		for k, v := range map[string]bool{"down": s.Down, "drain": s.Drain, "backup": s.Backup} {
			if v {
				u[k] = true
			}
		}
		if s.Route != "" {
			u["route"] = s.Route
		}
		if s.MaxConns != 0 {
			u["max_conns"] = s.MaxConns
		}
		if len(u) > 0 {
			ups[s.Address] = u
		}
	}
	if len(ups) > 0 {
		p["upstreams"] = ups
	}
	p["sticky"] = stickyOf(t, c)
	return p
}

// stickyOf translates nginx's sticky directive to the policy's sticky
// option.
func stickyOf(t *testing.T, c *stickyCase) map[string]any {
	f := strings.Fields(strings.TrimSuffix(c.Sticky, ";"))
	if len(f) < 2 || f[0] != "sticky" {
		t.Fatalf("%s: sticky %q", c.Name, c.Sticky)
	}
	switch f[1] {
	case "cookie":
		ck := map[string]any{"name": f[2]}
		for _, a := range f[3:] {
			k, v, ok := strings.Cut(a, "=")
			switch {
			case !ok && (k == "httponly" || k == "secure"):
				ck[k] = true
			case ok && (k == "expires" || k == "domain" || k == "path" || k == "samesite"):
				ck[k] = v
			default:
				t.Fatalf("%s: cookie parameter %q", c.Name, a)
			}
		}
		return map[string]any{"cookie": ck}
	case "route":
		var srcs []string
		for _, v := range f[2:] {
			srcs = append(srcs, source(t, c, v))
		}
		return map[string]any{"route": srcs}
	case "learn":
		l := map[string]any{}
		var create, lookup []string
		for _, a := range f[2:] {
			k, v, _ := strings.Cut(a, "=")
			switch k {
			case "create":
				create = append(create, source(t, c, v))
			case "lookup":
				lookup = append(lookup, source(t, c, v))
			case "timeout":
				l["timeout"] = v
			case "header":
				l["header"] = true
			case "zone":
			default:
				t.Fatalf("%s: learn parameter %q", c.Name, a)
			}
		}
		l["create"], l["lookup"] = create, lookup
		return map[string]any{"learn": l}
	}
	t.Fatalf("%s: sticky %q", c.Name, c.Sticky)
	return nil
}

// source translates an nginx variable to a sticky source.
func source(t *testing.T, c *stickyCase, v string) string {
	for _, m := range []struct{ prefix, kind string }{
		{"$arg_", "query:"}, {"$cookie_", "cookie:"}, {"$upstream_cookie_", "upstream_cookie:"},
		{"$upstream_http_", "upstream_header:"}, {"$http_", "header:"},
	} {
		if name, ok := strings.CutPrefix(v, m.prefix); ok {
			if strings.HasSuffix(m.kind, "header:") {
				name = strings.ReplaceAll(name, "_", "-")
			}
			return m.kind + name
		}
	}
	t.Fatalf("%s: variable %q", c.Name, v)
	return ""
}

// retries is the reverse proxy's lb_retries for the case's location: nginx
// passes a failed try on (proxy_next_upstream's default, error timeout)
// to every other server, unless the location says off.
func retries(c *stickyCase) int {
	if strings.Contains(c.Location, "proxy_next_upstream off") {
		return 0
	}
	return len(c.Servers)
}

// config is one Caddy config holding every replayable case of a family at
// /NAME, as the recorder's nginx held them.
func config(t *testing.T, cases []*stickyCase) []byte {
	var routes []any
	for _, c := range cases {
		var ups []any
		for _, s := range c.Servers {
			ups = append(ups, map[string]any{"dial": s.Address})
		}
		lb := map[string]any{"selection_policy": policy(t, c)}
		if n := retries(c); n > 0 {
			lb["retries"] = n
		}
		routes = append(routes, map[string]any{
			"match": []any{map[string]any{"path": []string{"/" + c.Name}}},
			"handle": []any{map[string]any{
				"handler":        "reverse_proxy",
				"upstreams":      ups,
				"load_balancing": lb,
				"transport": map[string]any{"protocol": "http",
					"network_proxy": map[string]any{"from": "url", "url": "http://" + proxyAddr}},
				// Through a proxy, Go names the upstream by the Host header.
				"headers": map[string]any{"request": map[string]any{"set": map[string]any{
					"Host": []string{"{http.reverse_proxy.upstream.hostport}"}}}},
			}},
			"terminal": true,
		})
	}
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps": map[string]any{"http": map[string]any{"servers": map[string]any{"replay": map[string]any{
			"listen":            []string{caddyAddr},
			"automatic_https":   map[string]any{"disable": true},
			"trusted_proxies":   map[string]any{"source": "static", "ranges": []string{"127.0.0.1/32"}},
			"client_ip_headers": []string{"X-Real-IP"},
			"routes":            routes,
		}}}},
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// backends is the forward proxy that plays every backend: it answers with
// the address the request was sent to, sets sess=ID for set=ID, holds a
// request with hold=ID until released, and drops the connection of a
// request to an address that does not listen in the recording.
type backends struct {
	mu      sync.Mutex
	dead    map[string]bool
	gates   map[string]chan struct{}
	arrived chan string
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
	if id := q.Get("hold"); id != "" {
		b.mu.Lock()
		gate := b.gates[id]
		b.mu.Unlock()
		if gate == nil {
			http.Error(w, "unknown hold "+id, http.StatusInternalServerError)
			return
		}
		b.arrived <- id
		select {
		case <-gate:
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}
	io.WriteString(w, addr)
}

func (b *backends) gate(id string) {
	b.mu.Lock()
	b.gates[id] = make(chan struct{})
	b.mu.Unlock()
}

func (b *backends) release(id string) {
	b.mu.Lock()
	if g := b.gates[id]; g != nil {
		close(g)
		delete(b.gates, id)
	}
	b.mu.Unlock()
}

func startBackends(t *testing.T) *backends {
	b := &backends{dead: map[string]bool{}, gates: map[string]chan struct{}{}, arrived: make(chan string, 16)}
	ln, err := net.Listen("tcp", proxyAddr)
	if err != nil {
		t.Fatalf("the backends' proxy: %v", err)
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		b.mu.Lock()
		for id, g := range b.gates {
			close(g)
			delete(b.gates, id)
		}
		b.mu.Unlock()
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
			b.release(holdID(c.Requests[j].Target))
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
			id := holdID(ex.Target)
			b.gate(id)
			f := &flight{done: make(chan answer, 1)}
			held[i] = f
			go func(ex *exchange, done chan<- answer) {
				own := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
				done <- send(own, c, ex)
				own.CloseIdleConnections()
			}(ex, f.done)
			select {
			case <-b.arrived:
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
		b.release(holdID(c.Requests[j].Target))
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

func holdID(target string) string {
	i := strings.LastIndex(target, "hold=")
	return target[i+len("hold="):]
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
		if err := caddy.Load(config(t, cases), true); err != nil {
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
	t.Logf("replayed %d cases, %d requests, through Caddy %s; %d cases not replayed", replayed, requests, caddyVersion(), len(skipped))
}

func caddyVersion() string {
	_, full := caddy.Version()
	sc := bufio.NewScanner(strings.NewReader(full))
	sc.Scan()
	return strconv.Quote(sc.Text())
}
