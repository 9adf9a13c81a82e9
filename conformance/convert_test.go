package conformance

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/standard"

	_ "github.com/lbpack/lbpack/caddyplugin"
	"github.com/lbpack/lbpack/conformance/corpus"
	"github.com/lbpack/lbpack/internal/lbsim"
	"github.com/lbpack/lbpack/internal/nginxconf"
)

var update = flag.Bool("update", false, "rewrite the corpus's requests.txt files from their generators")

// caddyMu lets one Caddy run at a time in this test binary: Caddy's
// configuration is process-wide.
var caddyMu sync.Mutex

// caddyAdmin is the address of the admin endpoint of the Caddy that
// startCaddy runs, on a port of this suite's range, 36000-36999.
var caddyAdmin string

// startCaddy converts the nginx configuration at conf and runs the result in
// Caddy, in process (admin endpoint on caddyAdmin, nothing persisted),
// until the test ends. It returns the conversion's Caddyfile and warnings.
func startCaddy(t *testing.T, conf string) (string, []nginxconf.Warning) {
	t.Helper()
	cfg, err := nginxconf.LoadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	cf, warnings := cfg.Caddyfile()
	js, _, err := lbsim.AdaptCaddyfile(cf, "Caddyfile") // what lbsim convert --to json prints
	if err != nil {
		t.Fatalf("Caddy refuses the converted Caddyfile: %v\n%s", err, cf)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	m["logging"] = map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}}
	// Caddy keeps its instance id under the user's data directory.
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	caddyMu.Lock()
	// A port of the range that another process (or a backend on a random
	// port) holds makes the load fail: try the next, 20 at most.
	port := 36000 + rand.IntN(900)
	for try := 0; ; try++ {
		caddyAdmin = "127.0.0.1:" + strconv.Itoa(port+try)
		m["admin"] = map[string]any{"listen": caddyAdmin, "config": map[string]any{"persist": false}}
		js, _ = json.Marshal(m)
		err = caddy.Load(js, true)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "address already in use") || try == 19 {
			caddyMu.Unlock()
			t.Fatalf("caddy.Load: %v\n%s", err, cf)
		}
	}
	t.Cleanup(func() {
		caddy.Stop()
		caddyMu.Unlock()
	})
	return string(cf), warnings
}

// through returns a copy of n that sends its requests to the Caddy of
// startCaddy at base, over connections of its own, with the same backends.
// Each request waits until Caddy's lbpack policies count in flight only the
// requests the pool holds: a policy counts a request until Caddy's handler
// returns, which can come after the client has the whole answer, while
// nginx's count drops before it. A client that sends its next request at
// once could find least_conn or max_conns counting the previous one;
// nginx's sequential requests never do.
func (n *nginx) through(t *testing.T, base string) *nginx {
	c := *n
	c.base = base
	c.client = &http.Client{Timeout: 5 * time.Second, Transport: settled{&http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, DisableCompression: true}, n.pool}}
	c.heldClient = &http.Client{Timeout: 30 * time.Second, Transport: settled{&http.Transport{Proxy: nil, DisableKeepAlives: true}, n.pool}}
	t.Cleanup(c.client.CloseIdleConnections)
	return &c
}

// settled sends a request once every lbpack policy of the running Caddy
// counts as many requests in flight as the pool holds (those before this
// one), polling the admin endpoint's /lbpack/state every millisecond for
// at most 2s. Without a pool, that is none.
type settled struct {
	next http.RoundTripper
	pool *pool
}

func (f settled) RoundTrip(r *http.Request) (*http.Response, error) {
	var state struct {
		Policies []struct {
			Upstreams []struct {
				InFlight int64 `json:"in_flight"`
			} `json:"upstreams"`
		} `json:"policies"`
	}
	want := int64(0)
	if f.pool != nil {
		want = int64(f.pool.gates.Len())
		if strings.Contains(r.URL.RawQuery, "hold=") {
			want-- // this request's gate is registered before it is sent
		}
	}
	busy := int64(-1)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		resp, err := http.Get("http://" + caddyAdmin + "/lbpack/state")
		if err != nil {
			return nil, fmt.Errorf("admin endpoint: %v", err)
		}
		err = json.NewDecoder(resp.Body).Decode(&state)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("/lbpack/state: %v", err)
		}
		busy = 0
		for _, p := range state.Policies {
			for _, u := range p.Upstreams {
				busy += u.InFlight
			}
		}
		if busy == want {
			return f.next.RoundTrip(r)
		}
	}
	return nil, fmt.Errorf("Caddy's policies count %d requests in flight after 2s, the pool holds %d", busy, want)
}

// TestConvertUpstreams converts the suite's own nginx configuration, every
// method's upstream blocks with weights, down servers, backups, IPv6
// backends and raw keys, and checks that Caddy, running the converted
// Caddyfile, picks what nginx picks, request for request: round robin,
// backups taking over, least_conn while idle, ip_hash for IPv4 and IPv6
// clients, hash $arg_k consistent and not.
func TestConvertUpstreams(t *testing.T) {
	ups := []*upstream{
		fixedRR("smooth_532", smoothRR, []int{5, 3, 2}, 30),
		fixedRR("smooth_203050", smoothRR, []int{20, 30, 50}, 200),
	}
	r := rand.New(rand.NewPCG(15, 1))
	for i := 0; i < 8; i++ {
		sp := rrSpec{primaries: 2 + r.IntN(7)}
		if i%2 == 1 {
			sp.primDown = someDown(r, sp.primaries)
		}
		if i%4 == 3 {
			sp.backups = 1 + r.IntN(2)
		}
		ups = append(ups, randomRR(r, fmt.Sprintf("csmooth%d", i), smoothRR, sp))
	}
	for i := 0; i < 4; i++ {
		sp := rrSpec{primaries: 1 + r.IntN(3), backups: 2 + r.IntN(3)}
		sp.primDown = sp.primaries
		ups = append(ups, randomRR(r, fmt.Sprintf("cbackup%d", i), smoothRR, sp))
	}
	for i := 0; i < 4; i++ {
		sp := rrSpec{primaries: 2 + r.IntN(7)}
		if i%2 == 1 {
			sp.primDown, sp.backups = sp.primaries, 2
		}
		ups = append(ups, randomRR(r, fmt.Sprintf("cleast%d", i), leastConn, sp))
	}
	// Requests held in flight: least_conn's counts differ, and max_conns
	// fills servers, which every method then skips.
	for i := 0; i < 4; i++ {
		u := randomRR(r, fmt.Sprintf("clcbusy%d", i), leastConn, rrSpec{primaries: 2 + r.IntN(6), equal: i == 0, backups: i % 2})
		busy(r, u, 2+r.IntN(4))
		ups = append(ups, u)
	}
	for i, m := range []method{smoothRR, leastConn, ipHash, hashKetama, hashModulo} {
		var u *upstream
		switch m.keyed {
		case noKey:
			u = randomRR(r, fmt.Sprintf("cmaxconns%d", i), m, rrSpec{primaries: 2 + r.IntN(5)})
		case clientIP:
			u = randomHashed(r, fmt.Sprintf("cmaxconns%d", i), m, 3+r.IntN(5), 0, false, clientIPs(r, 80))
		default:
			u = randomHashed(r, fmt.Sprintf("cmaxconns%d", i), m, 3+r.IntN(5), 0, false, argKeys(r, 80))
		}
		limit(r, u, true)
		busy(r, u, 2+r.IntN(4))
		ups = append(ups, u)
	}
	ups = append(ups, hashedCases(r, "ciphash", ipHash, func(c int) []string { return clientIPs(r, c) })[:6]...)
	ups = append(ups, hashedCases(r, "cketama", hashKetama, func(c int) []string { return argKeys(r, c) })...)
	ups = append(ups, hashedCases(r, "cmodulo", hashModulo, func(c int) []string { return argKeys(r, c) })[:6]...)
	for _, u := range ups[len(ups)-8:] {
		for i := range u.servers {
			if r.IntN(3) == 0 {
				u.servers[i].slot += poolSize // backends on [::1]
			}
		}
	}

	n := startNginx(t, ups)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "nginx.conf")
	if err := os.WriteFile(conf, []byte(n.config(port, ups)), 0o644); err != nil {
		t.Fatal(err)
	}
	cf, _ := startCaddy(t, conf)
	c := n.through(t, "http://127.0.0.1:"+strconv.Itoa(port))
	compared := 0
	for _, u := range ups {
		want, err := n.sequence(u)
		if err != nil {
			t.Fatalf("nginx: %v\n%s", err, u.describe(n.addrs))
		}
		got, err := c.sequence(u)
		if err != nil {
			t.Fatalf("Caddy: %v\n%s\n%s", err, u.describe(n.addrs), section(cf, "handle /"+u.name+" {"))
		}
		compared += len(u.keys)
		if d := firstDivergence(want, got); d >= 0 {
			t.Errorf("%s: request %d (key %q): nginx chose %s, Caddy chose %s\n%s\nnginx: %s\nCaddy: %s\n%s",
				u.name, d, u.keys[d], letter(want[d]), letter(got[d]), u.describe(n.addrs),
				letters(want[:d+1]), letters(got[:d+1]), section(cf, "handle /"+u.name+" {"))
		}
	}
	// The raw argument and the client address, as the converted probes
	// answer them, are nginx's $arg_k and $remote_addr.
	for _, key := range append([]string{"", "a%2Fb", "x+y", "K=upper", "%E2%82%AC=1"}, argKeys(r, 40)...) {
		want, _, err1 := n.get("/arg_k", "z=1&k="+key+"&k=second", "")
		got, _, err2 := c.get("/arg_k", "z=1&k="+key+"&k=second", "")
		if err1 != nil || err2 != nil || got != want {
			t.Errorf("k=%s: nginx's $arg_k %q (%v), Caddy's %q (%v)", key, want, err1, got, err2)
		}
	}
	for _, ip := range clientIPs(r, 20) {
		want, _, err1 := n.get("/remote_addr", "", ip)
		got, _, err2 := c.get("/remote_addr", "", ip)
		if err1 != nil || err2 != nil || got != want {
			t.Errorf("X-Real-IP %s: nginx's $remote_addr %q (%v), Caddy's %q (%v)", ip, want, err1, got, err2)
		}
	}
	t.Logf("%d upstreams, %d requests: Caddy chose as nginx", len(ups), compared)
}

// section returns the block of a Caddyfile that starts at the line holding
// start, for failure messages.
func section(cf, start string) string {
	i := strings.Index(cf, start)
	if i < 0 {
		return ""
	}
	j := strings.Index(cf[i:], "\n\t}\n")
	if j < 0 {
		return cf[i:]
	}
	return cf[i : i+j+3]
}

// corpusRun is one corpus configuration running in nginx, with its backends.
type corpusRun struct {
	nginx  *nginx
	vars   map[string]string
	files  string // the configuration with the placeholders filled in
	killer map[string]*http.Server
}

// startCorpus fills in a corpus configuration's placeholders (the proxy
// port, the pool's backends, killable backends of their own) and starts
// nginx with it.
func startCorpus(t *testing.T, dir string) *corpusRun {
	t.Helper()
	bin := nginxBinary(t)
	names, err := corpus.Placeholders(dir)
	if err != nil {
		t.Fatal(err)
	}
	ipv6 := false
	for _, p := range names {
		ipv6 = ipv6 || strings.HasPrefix(p, "@V")
	}
	n := &nginx{pool: startPool(t, ipv6), index: map[string]int{}}
	n.addrs = n.pool.addrs
	for i, a := range n.addrs {
		n.index[a] = i
	}
	n.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, DisableCompression: true}}
	t.Cleanup(n.client.CloseIdleConnections)
	run := &corpusRun{nginx: n, vars: map[string]string{}, killer: map[string]*http.Server{}}
	for i := 0; i < poolSize; i++ {
		run.vars[fmt.Sprintf("@B%d@", i)] = n.addrs[i]
		if ipv6 {
			run.vars[fmt.Sprintf("@V%d@", i)] = n.addrs[poolSize+i]
		}
	}
	for _, p := range names {
		if strings.HasPrefix(p, "@K") {
			run.vars[p] = run.killable(t, p)
		}
	}
	run.files = nginxPrefix(t)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	run.vars["@PORT@"] = strconv.Itoa(port)
	if _, err := corpus.Write(dir, run.files, run.vars); err != nil {
		t.Fatal(err)
	}
	if err := n.start(bin, run.files, port); err != nil {
		t.Fatalf("nginx: %v", err)
	}
	t.Cleanup(n.stop)
	return run
}

// killable starts a backend of its own for placeholder p, which the test
// may stop.
func (run *corpusRun) killable(t *testing.T, p string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, addr)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	run.killer[p] = srv
	return addr
}

// caddyFiles writes the configuration again for Caddy, on a port of its
// own, and returns its nginx.conf and base URL.
func (run *corpusRun) caddyFiles(t *testing.T, dir string) (string, string) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for k, v := range run.vars {
		vars[k] = v
	}
	vars["@PORT@"] = strconv.Itoa(port)
	conf, err := corpus.Write(dir, t.TempDir(), vars)
	if err != nil {
		t.Fatal(err)
	}
	return conf, "http://127.0.0.1:" + strconv.Itoa(port)
}

// answers sends every request to base and returns the bodies (the
// backends' addresses).
func answers(t *testing.T, c *http.Client, base string, reqs []corpus.Request) []string {
	t.Helper()
	out := make([]string, len(reqs))
	for i, r := range reqs {
		status, body, err := corpus.Send(c, base, r)
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s: request %d (%s): status %d, %v: %q", base, i, r, status, err, body)
		}
		out[i] = body
	}
	return out
}

// TestConvertCorpus runs each hand-written configuration of the corpus
// (several sites by server_name, includes, comments, realip through
// X-Forwarded-For, every key variable) in nginx and, converted, in Caddy,
// and checks that the same backend answers every request.
func TestConvertCorpus(t *testing.T) {
	for _, name := range []string{"shop", "keys"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "convert", name)
			reqs, err := corpus.ReadRequests(dir)
			if err != nil {
				t.Fatal(err)
			}
			run := startCorpus(t, dir)
			want := answers(t, run.nginx.client, run.nginx.base, reqs)
			conf, base := run.caddyFiles(t, dir)
			cf, _ := startCaddy(t, conf)
			client := &http.Client{Timeout: 5 * time.Second, Transport: settled{&http.Transport{Proxy: nil}, nil}}
			defer client.CloseIdleConnections()
			got := answers(t, client, base, reqs)
			differ := 0
			spread := map[string]map[string]bool{}
			for i := range reqs {
				route := reqs[i].Host + " " + strings.SplitN(strings.TrimPrefix(reqs[i].Target, "/"), "/", 2)[0]
				if spread[route] == nil {
					spread[route] = map[string]bool{}
				}
				spread[route][want[i]] = true
				if got[i] != want[i] && differ < 10 {
					differ++
					t.Errorf("request %d (%s): nginx's backend %s, Caddy's %s", i, reqs[i], want[i], got[i])
				}
			}
			if differ > 0 {
				t.Logf("converted Caddyfile:\n%s", cf)
			} else {
				t.Logf("%d requests over %d routes: Caddy's backend is nginx's for each", len(reqs), len(spread))
			}
			for route, backends := range spread {
				if len(backends) < 2 {
					t.Errorf("%s: every request went to %v: the requests do not tell balancing apart", route, backends)
				}
			}
		})
	}
}

// TestConvertFailover kills backends while nginx and Caddy, running the
// converted configuration, serve the same requests: one of the three
// servers of one upstream, and every primary of another (weights 5, 3 with
// max_fails=2 fail_timeout=5s, and 2), whose backup must then take over.
// nginx serves every request (its next server, max_fails, the backup), and
// so must Caddy with the converted retry and failure options (lb_retries,
// the policy's max_fails and backup).
func TestConvertFailover(t *testing.T) {
	dir := filepath.Join("testdata", "convert", "failover")
	run := startCorpus(t, dir)
	conf, base := run.caddyFiles(t, dir)
	cf, _ := startCaddy(t, conf)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	var before []corpus.Request
	for i := 0; i < 20; i++ {
		before = append(before, corpus.Request{Method: http.MethodGet, Host: "app.example", Target: "/"},
			corpus.Request{Method: http.MethodGet, Host: "app.example", Target: "/shop/cart"})
	}
	// While all are up, the two choose alike.
	if want, got := answers(t, run.nginx.client, run.nginx.base, before), answers(t, client, base, before); !reflect.DeepEqual(want, got) {
		t.Errorf("all up: nginx %v, Caddy %v", want, got)
	}
	dead := map[string]bool{}
	for _, k := range []string{"@K1@", "@K3@", "@K4@", "@K5@"} {
		dead[run.vars[k]] = true
		run.killer[k].Close()
	}
	backup := run.vars["@K6@"]
	var after []corpus.Request
	for i := 0; i < 30; i++ {
		method := http.MethodGet
		if i%2 == 1 {
			method = http.MethodPost // not sent to a dead server, so nginx retries it too
		}
		after = append(after, corpus.Request{Method: method, Host: "app.example", Target: fmt.Sprintf("/orders/%d", i)},
			corpus.Request{Method: method, Host: "app.example", Target: fmt.Sprintf("/shop/item/%d", i)})
	}
	for _, p := range []struct {
		name   string
		client *http.Client
		base   string
	}{{"nginx", run.nginx.client, run.nginx.base}, {"Caddy", client, base}} {
		failed := 0
		for i, r := range after {
			status, body, err := corpus.Send(p.client, p.base, r)
			shop := strings.HasPrefix(r.Target, "/shop/")
			if err != nil || status != http.StatusOK || dead[body] || shop && body != backup {
				failed++
				if failed <= 3 {
					t.Errorf("%s, backends killed: request %d (%s %s): status %d, %v, %q", p.name, i, r.Method, r.Target, status, err, body)
				}
			}
		}
		if failed > 0 {
			t.Errorf("%s: %d of %d requests failed or missed the backup\nconverted Caddyfile:\n%s", p.name, failed, len(after), cf)
		} else {
			t.Logf("%s served %d of %d requests with one of three servers and all primaries of the other upstream dead", p.name, len(after), len(after))
		}
	}
}

// TestConvertCorpusRequests checks that each corpus's requests.txt is what
// its generator makes (go test -run TestConvertCorpusRequests -update
// rewrites them), so that the fixed sequences the proxies are compared on
// are reviewable and shared with the Traefik test.
func TestConvertCorpusRequests(t *testing.T) {
	for name, gen := range corpusRequests {
		dir := filepath.Join("testdata", "convert", name)
		want := gen(rand.New(rand.NewPCG(16, uint64(len(name)))))
		if *update {
			if err := corpus.WriteRequests(dir, "Generated by conformance's TestConvertCorpusRequests -update; do not edit.", want); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := corpus.ReadRequests(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s/requests.txt is not what its generator makes: run go test -run TestConvertCorpusRequests -update", dir)
		}
	}
}

// corpusRequests are the generators of the corpus's requests.
var corpusRequests = map[string]func(*rand.Rand) []corpus.Request{
	"shop": shopRequests,
	"keys": keysRequests,
}

func xff(ip string) [2]string { return [2]string{"X-Forwarded-For", ip} }

func shopRequests(r *rand.Rand) []corpus.Request {
	var out []corpus.Request
	add := func(host, target string, h ...[2]string) {
		out = append(out, corpus.Request{Method: http.MethodGet, Host: host, Target: target, Header: h})
	}
	for i := 0; i < 30; i++ {
		add("shop.example", fmt.Sprintf("/product/%d", r.IntN(1000)))
	}
	for i := 0; i < 18; i++ {
		add("www.shop.example", fmt.Sprintf("/legacy/page%d", i))
	}
	for i := 0; i < 12; i++ {
		add("shop.example", fmt.Sprintf("/assets/img%d.png", i))
	}
	for _, ip := range clientIPs(r, 120) {
		add("shop.example", "/account/orders", xff(ip))
	}
	for i := 0; i < 24; i++ {
		add("api.example", fmt.Sprintf("/v1/items/%d", i))
	}
	return out
}

// token returns a random cookie- and header-safe value of 1 to 12 bytes.
func token(r *rand.Rand) string {
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
	b := make([]byte, 1+r.IntN(12))
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

// pathSegment returns a random path segment, some bytes percent-escaped
// (nginx's $uri and Go's path are both decoded; $request_uri is raw).
func pathSegment(r *rand.Rand) string {
	var b strings.Builder
	for n := 1 + r.IntN(10); n > 0; n-- {
		switch r.IntN(8) {
		case 0:
			fmt.Fprintf(&b, "%%%02X", "AZaz09-~"[r.IntN(8)])
		case 1:
			b.WriteString("%E2%82%AC")
		default:
			b.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)])
		}
	}
	return b.String()
}

func keysRequests(r *rand.Rand) []corpus.Request {
	var out []corpus.Request
	add := func(target string, h ...[2]string) {
		out = append(out, corpus.Request{Method: http.MethodGet, Host: "cache.example", Target: target, Header: h})
	}
	for i := 0; i < 60; i++ {
		add("/request_uri/" + pathSegment(r) + "/" + pathSegment(r) + "?" + argKeys(r, 1)[0])
	}
	for i := 0; i < 60; i++ {
		add("/uri/" + pathSegment(r) + "/" + pathSegment(r))
	}
	for _, loc := range []string{"/arg/", "/arg_modulo/"} {
		for i, key := range argKeys(r, 80) {
			// The argument among others, first or not, its name in any case:
			// nginx finds it without regard to case.
			q := "item=" + key
			switch i % 4 {
			case 1:
				q = "a=1&" + q
			case 2:
				q = "ITEM=" + key + "&item=other"
			case 3:
				q = "xitem=no&" + q + "&b"
			}
			add(loc + "list?" + q)
		}
	}
	for i := 0; i < 60; i++ {
		add("/cookie/cart", [2]string{"Cookie", "theme=dark; session=" + token(r) + "; lang=en"})
	}
	for i := 0; i < 60; i++ {
		if i%10 == 9 {
			add("/header/report") // no header: an empty key, which nginx sends round robin
			continue
		}
		add("/header/report", [2]string{"X-Tenant-Id", token(r)})
	}
	for _, ip := range clientIPs(r, 60) {
		add("/client/feed", xff(ip))
	}
	for i := 0; i < 60; i++ {
		add("/composite/q?item="+token(r), [2]string{"X-Tenant-Id", token(r)})
	}
	return out
}
