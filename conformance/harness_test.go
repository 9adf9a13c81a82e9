package conformance

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbpack/lbpack/conformance/hold"
	"github.com/lbpack/lbpack/core"
)

// poolSize is the number of Go backends on 127.0.0.1 every nginx of a test
// proxies to; each case uses up to 8 of them, in an order of its own. Slot
// poolSize+i, when a case asks for it, is a backend on [::1].
const poolSize = 16

// method is an nginx balancing method and the core strategy that must match it.
type method struct {
	directive string // the line in the upstream block; "" for round robin
	strategy  string
	hashMode  string
	keyed     keyKind
}

// keyKind says how a request carries its key to nginx.
type keyKind int

const (
	noKey    keyKind = iota // round robin methods: core gets ""
	argKey                  // the raw query argument k ($arg_k)
	clientIP                // the client address, through X-Real-IP
)

var (
	smoothRR   = method{"", core.SmoothWRR, "", noKey}
	leastConn  = method{"least_conn;", core.LeastConn, "", noKey}
	ipHash     = method{"ip_hash;", core.IPHash, "", clientIP}
	hashKetama = method{"hash $arg_k consistent;", core.URLHash, core.HashKetama, argKey}
	hashModulo = method{"hash $arg_k;", core.URLHash, core.HashModulo, argKey}
)

// server is one server line of an upstream block.
type server struct {
	slot     int // which backend of the pool
	weight   int
	down     bool
	backup   bool
	maxConns int
}

// params returns the server's parameters as nginx's server directive takes them.
func (s server) params() string {
	p := fmt.Sprintf(" weight=%d", s.weight)
	if s.down {
		p += " down"
	}
	if s.backup {
		p += " backup"
	}
	if s.maxConns > 0 {
		p += fmt.Sprintf(" max_conns=%d", s.maxConns)
	}
	return p
}

// upstream is one case: an upstream block and the requests sent through it,
// in order. keys[i] is request i's key (empty for the round robin methods).
//
// A case may keep requests in flight: when holds[i] is set, the backend
// nginx picks for request i holds its answer until the request is released,
// which happens just before request j for every i in releases[j] (all still
// held are released after the last request). Those in-flight requests are
// what least_conn counts and max_conns limits; core counts them from the
// pick to its Done.
type upstream struct {
	name     string // upstream block name and location path
	method   method
	servers  []server
	keys     []string
	holds    []bool
	releases map[int][]int
}

func (u *upstream) held(i int) bool { return u.holds != nil && u.holds[i] }

// config returns the core configuration equivalent to the upstream block.
func (u *upstream) config(addrs []string) core.Config {
	c := core.Config{Strategy: u.method.strategy, HashMode: u.method.hashMode}
	for _, s := range u.servers {
		c.Backends = append(c.Backends, core.Backend{
			Address: addrs[s.slot], Weight: s.weight, Down: s.down, Backup: s.backup,
			MaxConns: s.maxConns,
		})
	}
	return c
}

// describe names the servers as the failure messages do: a, b, c, ... in order.
func (u *upstream) describe(addrs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "upstream %s {", u.name)
	if u.method.directive != "" {
		fmt.Fprintf(&b, " %s", u.method.directive)
	}
	for i, s := range u.servers {
		fmt.Fprintf(&b, " %s=%s%s;", letter(i), addrs[s.slot], s.params())
	}
	b.WriteString(" }")
	if u.holds != nil {
		// "3:-1" is "request 1 ends just before request 3"; "3:+" is
		// "request 3 stays in flight".
		b.WriteString("\nrequests held in flight:")
		for i := range u.keys {
			for _, j := range u.releases[i] {
				fmt.Fprintf(&b, " %d:-%d", i, j)
			}
			if u.held(i) {
				fmt.Fprintf(&b, " %d:+", i)
			}
		}
	}
	return b.String()
}

func letter(i int) string {
	if i < 0 {
		return "-"
	}
	if i < 26 {
		return string(rune('a' + i))
	}
	return "s" + strconv.Itoa(i)
}

// letters renders a pick sequence, eliding the start of a long one.
func letters(seq []int) string {
	const keep = 40
	var parts []string
	start := 0
	if len(seq) > keep {
		start = len(seq) - keep
		parts = append(parts, fmt.Sprintf("...(%d before)", start))
	}
	for _, i := range seq[start:] {
		parts = append(parts, letter(i))
	}
	return strings.Join(parts, " ")
}

// nginxBinary finds nginx; without it the test skips, or fails under CI.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NGINX"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("NGINX=%s: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin"} {
		p := filepath.Join(dir, "nginx")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal("nginx not found and CI is set: install it (apt-get install -y nginx) or set NGINX to its path")
	}
	t.Skip("nginx not found (install Debian's nginx package or set NGINX); the conformance suite needs it")
	return ""
}

// pool is the Go backends: each answers with its own address. A request
// whose query ends in hold=ID is reported on arrived and answered only when
// the test closes the gate registered for ID; one with set=ID in its query
// also sets a cookie of the backend's own, sess=ID (what nginx's sticky learn
// learns from).
type pool struct {
	addrs   []string
	arrived chan arrival
	gates   *hold.Gates
}

type arrival struct{ id, addr string }

// startPool starts poolSize backends on 127.0.0.1 and, with ipv6, as many
// on [::1]; they stop when the test ends.
func startPool(t *testing.T, ipv6 bool) *pool {
	t.Helper()
	n := poolSize
	if ipv6 {
		n *= 2
	}
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = "127.0.0.1:0"
		if i >= poolSize {
			hosts[i] = "[::1]:0"
		}
	}
	return listenPool(t, hosts)
}

// listenPool starts a backend on each of hosts (port 0: any free port);
// they stop when the test ends. A host without IPv6 loopback skips the test.
func listenPool(t *testing.T, hosts []string) *pool {
	t.Helper()
	p := &pool{arrived: make(chan arrival, 64), gates: hold.New()}
	srv := &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 5 * time.Second}
	for _, host := range hosts {
		ln, err := net.Listen("tcp", host)
		if err != nil {
			srv.Close()
			if strings.HasPrefix(host, "[::1]") {
				t.Skipf("this host has no IPv6 loopback (%v); the IPv6 backend cases need it", err)
			}
			t.Fatalf("backend listener %s: %v", host, err)
		}
		p.addrs = append(p.addrs, ln.Addr().String())
		go srv.Serve(ln)
	}
	t.Cleanup(func() {
		p.gates.ReleaseAll()
		srv.Close()
	})
	return p
}

func (p *pool) serve(w http.ResponseWriter, r *http.Request) {
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		http.Error(w, "no local address", http.StatusInternalServerError)
		return
	}
	if id := r.URL.Query().Get("set"); id != "" {
		w.Header().Add("Set-Cookie", "sess="+id+"; path=/")
	}
	// hold.ID, not r.URL.Query: the raw keys before hold= need not be
	// valid for Go's query parser.
	if id := hold.ID(r.URL.RawQuery); id != "" {
		if !p.gates.Wait(r, id, func() { p.arrived <- arrival{id, addr.String()} }) {
			http.Error(w, "unknown hold "+id, http.StatusInternalServerError)
			return
		}
	}
	io.WriteString(w, addr.String())
}

// nginx is a running nginx with the upstreams of one test.
type nginx struct {
	base   string
	client *http.Client
	// heldClient sends the requests held in flight.
	heldClient *http.Client
	pool       *pool
	addrs      []string // the pool's addresses
	index      map[string]int
	cmd        *exec.Cmd
	exited     chan struct{}
	errlog     string
}

// startNginx starts the backend pool and one nginx serving every upstream;
// both stop when the test ends.
func startNginx(t *testing.T, ups []*upstream) *nginx {
	t.Helper()
	bin := nginxBinary(t)
	ipv6 := false
	for _, u := range ups {
		for _, s := range u.servers {
			ipv6 = ipv6 || s.slot >= poolSize
		}
	}
	n := &nginx{pool: startPool(t, ipv6), index: map[string]int{}}
	n.addrs = n.pool.addrs
	for i, a := range n.addrs {
		n.index[a] = i
	}
	n.client = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: 1,
			DisableCompression:  true,
		},
	}
	t.Cleanup(n.client.CloseIdleConnections)
	// Held requests each need a connection of their own.
	n.heldClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

	dir := nginxPrefix(t)
	// The front port is chosen free here and handed to nginx; another
	// process may take it in between, so a failed bind is retried.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(conf, []byte(n.config(port, ups)), 0o644); err != nil {
			t.Fatal(err)
		}
		lastErr = n.start(bin, dir, port)
		if lastErr == nil {
			t.Cleanup(n.stop)
			return n
		}
		if !strings.Contains(lastErr.Error(), "in use") {
			break
		}
	}
	t.Fatalf("nginx did not start: %v", lastErr)
	return nil
}

// nginxPrefix returns a new prefix directory for an nginx: logs and tmp in a
// directory removed when the test ends.
func nginxPrefix(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// config writes nginx.conf: one upstream block and one location per case,
// plus probes that show the realip header and the raw argument arriving.
func (n *nginx) config(port int, ups []*upstream) string {
	var b strings.Builder
	b.WriteString(confHTTPStart)
	for _, u := range ups {
		fmt.Fprintf(&b, "    upstream %s {\n", u.name)
		if u.method.directive != "" {
			fmt.Fprintf(&b, "        %s\n", u.method.directive)
		}
		for _, s := range u.servers {
			fmt.Fprintf(&b, "        server %s%s;\n", n.addrs[s.slot], s.params())
		}
		b.WriteString("    }\n")
	}
	b.WriteString(confFrontServer(port))
	for _, u := range ups {
		fmt.Fprintf(&b, "        location = /%s { proxy_pass http://%s; add_header X-Upstream $upstream_addr always; }\n", u.name, u.name)
	}
	b.WriteString("    }\n}\n")
	return b.String()
}

// confHTTPStart opens every test's nginx.conf, up to inside its http block:
// paths under the prefix directory, no access log, and no second pick when a
// backend fails (a backend error must show as an error).
const confHTTPStart = `pid nginx.pid;
error_log stderr warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    keepalive_requests 100000;
    proxy_next_upstream off;
`

// confFrontServer opens the server block listening on port: the client's
// address from X-Real-IP (for ip_hash), the readiness probe start waits for,
// and probes that show the realip header and the raw argument arriving.
func confFrontServer(port int) string {
	return fmt.Sprintf(`    server {
        listen 127.0.0.1:%d;
        set_real_ip_from 127.0.0.1;
        real_ip_header X-Real-IP;
        location = /ready { return 200 "ready"; }
        location = /remote_addr { return 200 "$remote_addr"; }
        location = /arg_k { return 200 "$arg_k"; }
`, port)
}

// start runs nginx in its own process group and waits until it answers.
func (n *nginx) start(bin, dir string, port int) error {
	n.errlog = filepath.Join(dir, "logs", "stderr.log")
	// A file, not a pipe: the workers inherit it, and Wait must not wait
	// for them to close it.
	logf, err := os.Create(n.errlog)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-p", dir+"/", "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr",
		"-g", "daemon off; master_process on; worker_processes 1;")
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func() { cmd.Wait(); close(n.exited) }()
	n.base = "http://127.0.0.1:" + strconv.Itoa(port)

	probe := &http.Client{Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			return fmt.Errorf("nginx exited: %s", n.stderr())
		default:
		}
		resp, err := probe.Get(n.base + "/ready")
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == "ready" {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.stop()
	return fmt.Errorf("nginx did not answer within 10s: %s", n.stderr())
}

func (n *nginx) stderr() string {
	b, _ := os.ReadFile(n.errlog)
	return strings.TrimSpace(string(b))
}

// stop ends nginx's process group: TERM, then KILL after 5 seconds.
func (n *nginx) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	pgid := n.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-n.exited:
		case <-time.After(5 * time.Second):
		}
	}
	// The workers are in the group too; make sure none outlives the test.
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// get sends one request on the keep-alive connection and returns the body;
// status must be 200.
func (n *nginx) get(path, rawQuery, realIP string) (body string, header http.Header, err error) {
	return n.getOn(n.client, path, rawQuery, realIP)
}

func (n *nginx) getOn(c *http.Client, path, rawQuery, realIP string) (body string, header http.Header, err error) {
	req, err := http.NewRequest(http.MethodGet, n.base+path, nil)
	if err != nil {
		return "", nil, err
	}
	req.URL.RawQuery = rawQuery // sent as is: nginx must see the raw argument
	if realIP != "" {
		req.Header.Set("X-Real-IP", realIP)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return "", nil, fmt.Errorf("GET %s?%s: status %d: %q", path, rawQuery, resp.StatusCode, b)
	}
	return string(b), resp.Header, nil
}

// query returns request i's query string and X-Real-IP value.
func (u *upstream) query(i int) (query, realIP string) {
	switch u.method.keyed {
	case argKey:
		query = "k=" + u.keys[i]
	case clientIP:
		realIP = u.keys[i]
	}
	return query, realIP
}

// pickOf checks a response (the body is the backend's address; nginx's
// X-Upstream lists every backend it tried) and returns the position in
// u.servers of the backend that answered.
func (n *nginx) pickOf(u *upstream, body string, h http.Header) (int, error) {
	if tried := h.Get("X-Upstream"); tried != body {
		return -1, fmt.Errorf("nginx tried %q but %q answered: a backend failed", tried, body)
	}
	slot, ok := n.index[body]
	if !ok {
		return -1, fmt.Errorf("answer %q is not a backend", body)
	}
	for pos, s := range u.servers {
		if s.slot == slot {
			return pos, nil
		}
	}
	return -1, fmt.Errorf("nginx picked %s, which is not in upstream %s", body, u.name)
}

// inflight is a request held at its backend.
type inflight struct {
	id   string
	pos  int
	done chan answer
}

// answer is a held request's outcome: the backend that answered.
type answer struct {
	pos int
	err error
}

// hold sends request i of u on a connection of its own and returns once the
// backend nginx picked has it (so nginx counts it as a connection to that
// backend); the backend answers when release is called.
func (n *nginx) hold(u *upstream, i int) (*inflight, error) {
	q, realIP := u.query(i)
	f := &inflight{id: fmt.Sprintf("%s-%d", u.name, i), done: make(chan answer, 1)}
	if q != "" {
		q += "&"
	}
	q += "hold=" + f.id
	n.pool.gates.Hold(f.id)
	go func() {
		body, h, err := n.getOn(n.heldClient, "/"+u.name, q, realIP)
		a := answer{pos: -1, err: err}
		if err == nil {
			a.pos, a.err = n.pickOf(u, body, h)
		}
		f.done <- a
	}()
	select {
	case a := <-n.pool.arrived:
		if a.id != f.id {
			return nil, fmt.Errorf("held request %s: request %s arrived instead", f.id, a.id)
		}
		f.pos = -1
		slot, ok := n.index[a.addr]
		for pos, s := range u.servers {
			if ok && s.slot == slot {
				f.pos = pos
			}
		}
		if f.pos < 0 {
			return nil, fmt.Errorf("held request %s arrived at %s, not in upstream %s", f.id, a.addr, u.name)
		}
		return f, nil
	case a := <-f.done:
		return nil, fmt.Errorf("held request %s: answered before its release: %v", f.id, a.err)
	case <-time.After(5 * time.Second):
		return nil, fmt.Errorf("held request %s: no backend got it within 5s", f.id)
	}
}

// release lets a held request's backend answer and waits for the answer.
func (n *nginx) release(f *inflight) error {
	n.pool.gates.Release(f.id)
	select {
	case a := <-f.done:
		if a.err == nil && a.pos != f.pos {
			a.err = fmt.Errorf("answered by %s, arrived at %s", letter(a.pos), letter(f.pos))
		}
		if a.err != nil {
			return fmt.Errorf("held request %s: %v", f.id, a.err)
		}
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("held request %s: no answer within 5s of its release", f.id)
	}
}

// sequence sends u's requests one after another, holding and releasing
// those the case says, and returns nginx's picks.
func (n *nginx) sequence(u *upstream) ([]int, error) {
	seq := make([]int, len(u.keys))
	held := map[int]*inflight{}
	defer func() {
		for _, f := range held {
			n.release(f)
		}
	}()
	for i := range u.keys {
		for _, j := range u.releases[i] {
			if err := n.release(held[j]); err != nil {
				return nil, err
			}
			delete(held, j)
		}
		if u.held(i) {
			f, err := n.hold(u, i)
			if err != nil {
				return nil, err
			}
			held[i] = f
			seq[i] = f.pos
			continue
		}
		q, realIP := u.query(i)
		body, h, err := n.get("/"+u.name, q, realIP)
		if err == nil {
			seq[i], err = n.pickOf(u, body, h)
		}
		if err != nil {
			return nil, fmt.Errorf("%s request %d: %w", u.name, i, err)
		}
	}
	return seq, nil
}

// corePicks replays u's requests on a fresh balancer as a proxy would: each
// is picked, and ended with core.Done when nginx's was answered (at once,
// or when a held request is released). A request core cannot serve is -1.
func corePicks(u *upstream, addrs []string) ([]int, error) {
	b, err := core.New(u.config(addrs))
	if err != nil {
		return nil, err
	}
	seq := make([]int, len(u.keys))
	tickets := make([]core.Ticket, len(u.keys))
	for i, key := range u.keys {
		for _, j := range u.releases[i] {
			if seq[j] >= 0 {
				core.Done(b, seq[j], tickets[j], 0, false)
			}
		}
		pos, t := core.Pick(b, key, core.Filter{})
		seq[i], tickets[i] = pos, t
		if pos >= 0 && !u.held(i) {
			core.Done(b, pos, t, 0, false)
		}
	}
	return seq, nil
}

// conform runs every case through nginx and core and reports, per case, the
// first request where they differ. It returns the number of requests
// compared.
func conform(t *testing.T, ups []*upstream) int {
	t.Helper()
	n := startNginx(t, ups)
	compared := 0
	for _, u := range ups {
		got, err := n.sequence(u)
		if err != nil {
			t.Fatalf("%v\n%s\nnginx log: %s", err, u.describe(n.addrs), n.stderr())
		}
		want, err := corePicks(u, n.addrs)
		if err != nil {
			t.Errorf("%s: core: %v\n%s", u.name, err, u.describe(n.addrs))
			continue
		}
		compared += len(u.keys)
		if d := firstDivergence(got, want); d >= 0 {
			key := ""
			if u.method.keyed != noKey {
				key = fmt.Sprintf(" (key %q)", u.keys[d])
			}
			t.Errorf("%s: request %d%s: nginx chose %s, core chose %s\n%s\nnginx: %s\ncore:  %s",
				u.name, d, key, letter(got[d]), letter(want[d]), u.describe(n.addrs),
				letters(got[:d+1]), letters(want[:d+1]))
		}
	}
	return compared
}

// firstDivergence returns the first position where two equally long
// sequences differ, or -1.
func firstDivergence(a, b []int) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
