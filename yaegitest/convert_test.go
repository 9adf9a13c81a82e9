package yaegitest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbpack/lbpack/conformance/corpus"
	"github.com/lbpack/lbpack/internal/nginxconf"
)

// corpusDir is the conversion proof's corpus, shared with package
// conformance, which runs the same files and requests through Caddy.
const corpusDir = "../conformance/testdata/convert"

// nginxPath finds nginx as the conformance suite does: $NGINX, $PATH, the
// usual sbin directories; without it the test skips, or fails under CI.
func nginxPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NGINX"); p != "" {
		return p
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin"} {
		if p := filepath.Join(dir, "nginx"); fileExists(p) {
			return p
		}
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal("nginx not found and CI is set: install it (apt-get install -y nginx) or set NGINX")
	}
	t.Skip("nginx not found (install Debian's nginx package or set NGINX)")
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// convertRun is one corpus configuration with its backends, running in
// nginx.
type convertRun struct {
	vars  map[string]string
	kill  map[string]*http.Server
	nginx string // nginx's base URL
}

// addressServer answers every request with the address it was received on.
func addressServer(t *testing.T, ln net.Listener) *http.Server {
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		io.WriteString(w, addr.String())
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// startConvertRun starts the backends a corpus configuration names (@B,
// @V, @K placeholders) and nginx with it.
func startConvertRun(t *testing.T, dir string) *convertRun {
	t.Helper()
	bin := nginxPath(t)
	names, err := corpus.Placeholders(dir)
	if err != nil {
		t.Fatal(err)
	}
	run := &convertRun{vars: map[string]string{}, kill: map[string]*http.Server{}}
	for _, p := range names {
		network := "127.0.0.1:0"
		if strings.HasPrefix(p, "@V") {
			network = "[::1]:0"
		} else if p == "@PORT@" {
			continue
		}
		ln, err := net.Listen("tcp", network)
		if err != nil {
			t.Skipf("%s: %v (the corpus needs IPv6 loopback)", p, err)
		}
		run.vars[p] = ln.Addr().String()
		run.kill[p] = addressServer(t, ln)
	}
	files := t.TempDir()
	for _, sub := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(files, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := freeLoopbackPort(t)
	run.vars["@PORT@"] = strconv.Itoa(port)
	conf, err := corpus.Write(dir, files, run.vars)
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(files, "logs", "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-p", files+"/", "-c", conf, "-e", "stderr",
		"-g", "daemon off; master_process on; worker_processes 1;")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the workers too
	})
	run.nginx = "http://127.0.0.1:" + strconv.Itoa(port)
	probe := &http.Client{Timeout: 500 * time.Millisecond}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(files, "logs", "stderr.log"))
			t.Fatalf("nginx exited: %s", log)
		default:
		}
		if resp, err := probe.Get(run.nginx + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return run
			}
		}
	}
	t.Fatal("nginx did not answer /ready within 10s")
	return nil
}

func freeLoopbackPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// traefikRoute is a converted router with its interpreted middleware.
type traefikRoute struct {
	name     string
	hosts    []string
	hostRes  []*regexp.Regexp
	path     string
	kind     string // Path, PathPrefix or PathRegexp
	pathRe   *regexp.Regexp
	priority int
	settings map[string]any
	handler  http.Handler
}

var ruleTerm = regexp.MustCompile("(Host|HostRegexp|Path|PathPrefix|PathRegexp)\\(`([^`]*)`\\)")

// matches reports whether the route's rule, as Traefik reads the forms the
// converter writes ((Host(`a`) || ...) && PathPrefix(`/p`)), takes r.
func (rt *traefikRoute) matches(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if len(rt.hosts)+len(rt.hostRes) > 0 {
		ok := false
		for _, h := range rt.hosts {
			ok = ok || strings.EqualFold(h, host)
		}
		for _, re := range rt.hostRes {
			ok = ok || re.MatchString(host)
		}
		if !ok {
			return false
		}
	}
	switch rt.kind {
	case "Path":
		return r.URL.Path == rt.path
	case "PathRegexp":
		return rt.pathRe.MatchString(r.URL.Path)
	}
	return strings.HasPrefix(r.URL.Path, rt.path)
}

// traefikFront converts the configuration at conf to Traefik dynamic YAML,
// builds each middleware in the interpreter as Traefik does, and serves
// the routers on loopback. It returns the front's URL, the routes and the
// conversion's warnings.
func traefikFront(t *testing.T, l *loader, conf string) (string, []*traefikRoute, string) {
	t.Helper()
	cfg, err := nginxconf.LoadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	yml, warnings := cfg.Traefik()
	var ws strings.Builder
	for _, w := range warnings {
		ws.WriteString(w.String() + "\n")
	}
	dyn, err := settingsMap(string(yml))
	if err != nil {
		t.Fatalf("converted YAML: %v\n%s", err, yml)
	}
	httpCfg, _ := dyn["http"].(map[string]any)
	routers, _ := httpCfg["routers"].(map[string]any)
	middlewares, _ := httpCfg["middlewares"].(map[string]any)
	var routes []*traefikRoute
	for name, v := range routers {
		rc := v.(map[string]any)
		rt := &traefikRoute{name: name}
		rt.priority, _ = strconv.Atoi(rc["priority"].(string))
		for _, m := range ruleTerm.FindAllStringSubmatch(rc["rule"].(string), -1) {
			switch m[1] {
			case "Host":
				rt.hosts = append(rt.hosts, m[2])
			case "HostRegexp":
				rt.hostRes = append(rt.hostRes, regexp.MustCompile(m[2]))
			case "PathRegexp":
				rt.kind, rt.pathRe = m[1], regexp.MustCompile(m[2])
			default:
				rt.kind, rt.path = m[1], m[2]
			}
		}
		mws := rc["middlewares"].([]any)
		if len(mws) != 1 || rc["service"] != "noop@internal" {
			t.Fatalf("router %s: middlewares %v, service %v", name, mws, rc["service"])
		}
		mw := middlewares[mws[0].(string)].(map[string]any)
		rt.settings = mw["plugin"].(map[string]any)["lbpack"].(map[string]any)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		if rt.handler, err = l.newHandlerMap(ctx, rt.settings, name); err != nil {
			t.Fatalf("middleware %s: %v\n%s", name, err, yml)
		}
		routes = append(routes, rt)
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].priority > routes[j].priority })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, rt := range routes {
			if rt.matches(r) {
				rt.handler.ServeHTTP(w, r)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, routes, ws.String()
}

// rawArg is nginx's $arg_NAME of a raw query: the first NAME= (any case) at
// the start or after "&", up to the next "&".
func rawArg(query, name string) (string, bool) {
	for _, kv := range strings.Split(query, "&") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, name) {
			return v, k == name
		}
	}
	return "", true
}

var unreserved = regexp.MustCompile(`^[A-Za-z0-9._~-]*$`)

// comparable reports whether the plugin's key for r is nginx's. The
// converter warns where it is not: query:NAME hashes the decoded value of
// the argument named exactly NAME, so only requests whose argument is
// written plainly, its name in the same case, can be compared.
func comparable(rt *traefikRoute, r corpus.Request) bool {
	key, _ := rt.settings["hashKey"].(string)
	name, ok := strings.CutPrefix(key, "query:")
	if !ok {
		return true
	}
	_, query, _ := strings.Cut(r.Target, "?")
	v, exact := rawArg(query, name)
	return exact && unreserved.MatchString(v)
}

// TestConvertTraefik runs the corpus's configurations in nginx and,
// converted to Traefik dynamic configuration, in the interpreted plugin,
// sends both the corpus's fixed requests, and checks that the same backend
// answers each: weighted round robin with down servers, backups taking
// over, least_conn while idle, ip_hash for IPv4 and IPv6 clients through
// X-Forwarded-For and trustedIPs, and hashing on $request_uri, $uri,
// $arg_NAME, $cookie_NAME, $http_NAME and $remote_addr, consistent and not.
// What the plugin cannot carry over the converter must have warned about.
func TestConvertTraefik(t *testing.T) {
	l := loadPlugin(t, nil)
	cases := []struct {
		name string
		// skip are the routes the plugin cannot carry over, with the warning
		// the converter must give for each.
		skip map[string]string
		// warned are the warnings for the requests comparable leaves out.
		warned []string
	}{
		{name: "shop"},
		{
			name: "keys",
			skip: map[string]string{"/composite/": "hash: $http_x_tenant_id/$arg_item: the plugin hashes one of"},
			warned: []string{
				"hash: $arg_item: the plugin hashes the decoded argument",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(corpusDir, c.name)
			reqs, err := corpus.ReadRequests(dir)
			if err != nil {
				t.Fatal(err)
			}
			run := startConvertRun(t, dir)
			conf, err := corpus.Write(dir, t.TempDir(), run.vars)
			if err != nil {
				t.Fatal(err)
			}
			base, routes, warnings := traefikFront(t, l, conf)
			for route, w := range c.skip {
				if !strings.Contains(warnings, w) {
					t.Errorf("route %s is skipped for a warning the converter did not give: %q\n%s", route, w, warnings)
				}
			}
			for _, w := range c.warned {
				if !strings.Contains(warnings, w) {
					t.Errorf("requests are left out for a warning the converter did not give: %q\n%s", w, warnings)
				}
			}
			nc := &http.Client{Timeout: 5 * time.Second}
			tc := &http.Client{Timeout: 5 * time.Second}
			defer nc.CloseIdleConnections()
			defer tc.CloseIdleConnections()
			compared, differ := 0, 0
			for i, r := range reqs {
				u, err := url.Parse(r.Target)
				if err != nil {
					t.Fatalf("request %d (%s): %v", i, r, err)
				}
				var rt *traefikRoute
				for _, x := range routes {
					if x.matches(&http.Request{Host: r.Host, URL: u}) {
						rt = x
						break
					}
				}
				if rt == nil {
					t.Fatalf("request %d (%s): no converted router takes it", i, r)
				}
				if _, skipped := c.skip[rt.path]; skipped || !comparable(rt, r) {
					continue
				}
				ns, nb, err1 := corpus.Send(nc, run.nginx, r)
				ts, tb, err2 := corpus.Send(tc, base, r)
				if err1 != nil || err2 != nil || ns != 200 || ts != 200 {
					t.Fatalf("request %d (%s): nginx %d %v, Traefik plugin %d %v %q", i, r, ns, err1, ts, err2, tb)
				}
				compared++
				if nb != tb && differ < 10 {
					differ++
					t.Errorf("request %d (%s): nginx's backend %s, the plugin's %s (router %s: %v)", i, r, nb, tb, rt.name, rt.settings)
				}
			}
			if compared < len(reqs)/2 {
				t.Errorf("only %d of %d requests compared", compared, len(reqs))
			}
			t.Logf("%d of %d requests compared: the plugin's backend is nginx's for %d", compared, len(reqs), compared-differ)
		})
	}
}

// TestConvertTraefikFailover kills one of the three servers of one
// upstream and every primary of another: nginx serves every request (the
// second from its backup), and so must the plugin with the converted
// maxFails, retries and backup.
func TestConvertTraefikFailover(t *testing.T) {
	l := loadPlugin(t, nil)
	dir := filepath.Join(corpusDir, "failover")
	run := startConvertRun(t, dir)
	conf, err := corpus.Write(dir, t.TempDir(), run.vars)
	if err != nil {
		t.Fatal(err)
	}
	base, _, _ := traefikFront(t, l, conf)
	dead := map[string]bool{}
	for _, k := range []string{"@K1@", "@K3@", "@K4@", "@K5@"} {
		dead[run.vars[k]] = true
		run.kill[k].Close()
	}
	backup := run.vars["@K6@"]
	for _, p := range []struct{ name, base string }{{"nginx", run.nginx}, {"Traefik plugin", base}} {
		c := &http.Client{Timeout: 5 * time.Second}
		failed := 0
		for i := 0; i < 60; i++ {
			method := http.MethodGet
			if i%4 >= 2 {
				method = http.MethodPost
			}
			target := fmt.Sprintf("/orders/%d", i)
			if i%2 == 1 {
				target = fmt.Sprintf("/shop/item/%d", i)
			}
			status, body, err := corpus.Send(c, p.base, corpus.Request{Method: method, Host: "app.example", Target: target})
			if err != nil || status != http.StatusOK || dead[body] || i%2 == 1 && body != backup {
				failed++
				if failed <= 3 {
					t.Errorf("%s, backends killed: request %d (%s %s): status %d, %v, %q", p.name, i, method, target, status, err, body)
				}
			}
		}
		c.CloseIdleConnections()
		if failed > 0 {
			t.Errorf("%s: %d of 60 requests failed or missed the backup", p.name, failed)
		}
	}
}
