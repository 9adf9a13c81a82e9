package traefikplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

func withServers(c *Config, urls ...string) *Config {
	for _, u := range urls {
		c.Servers = append(c.Servers, Server{URL: u})
	}
	return c
}

func TestParseDefaults(t *testing.T) {
	s, err := parse(withServers(CreateConfig(), "http://10.0.0.1", "https://[::1]/api", "http://b.example:8080"))
	if err != nil {
		t.Fatal(err)
	}
	c := s.balancer
	if c.Strategy != core.SmoothWRR || s.keyKind != keyNone {
		t.Errorf("strategy %q key %d", c.Strategy, s.keyKind)
	}
	var addrs []string
	for _, b := range c.Backends {
		addrs = append(addrs, b.Address)
		if b.Weight != 1 || b.MaxFails != 1 || b.FailTimeout != 10*time.Second {
			t.Errorf("%s: weight %d maxFails %d failTimeout %v", b.Address, b.Weight, b.MaxFails, b.FailTimeout)
		}
	}
	if got := strings.Join(addrs, " "); got != "10.0.0.1:80 [::1]:443 b.example:8080" {
		t.Errorf("addresses %q", got)
	}
	if s.retries != 2 || !s.passHost || s.maxRetryBody != 1<<20 || s.healthPath != "" {
		t.Errorf("retries %d passHost %v maxRetryBody %d health %q", s.retries, s.passHost, s.maxRetryBody, s.healthPath)
	}
	if s.connectTimeout != 10*time.Second || s.responseTimeout != 60*time.Second {
		t.Errorf("timeouts %v %v", s.connectTimeout, s.responseTimeout)
	}
}

func TestParseRetries(t *testing.T) {
	for _, c := range []struct{ retries, servers, want int }{
		{-1, 1, 0}, {-1, 4, 3}, {0, 4, 0}, {2, 4, 2}, {9, 4, 3},
	} {
		cfg := CreateConfig()
		cfg.Retries = c.retries
		for k := 0; k < c.servers; k++ {
			cfg.Servers = append(cfg.Servers, Server{URL: fmt.Sprintf("http://10.0.0.%d", k+1)})
		}
		s, err := parse(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s.retries != c.want {
			t.Errorf("retries %d over %d servers: %d further tries, want %d", c.retries, c.servers, s.retries, c.want)
		}
	}
}

func TestParseKeys(t *testing.T) {
	for _, c := range []struct {
		strategy, key string
		kind          int
		name          string
	}{
		{core.URLHash, "", keyURI, ""},
		{core.URLHash, "uri", keyURI, ""},
		{core.URLHash, "path", keyPath, ""},
		{core.URLHash, "clientip", keyClientIP, ""},
		{core.URLHash, "header:x-user-id", keyHeader, "X-User-Id"},
		{core.URLHash, "cookie:sid", keyCookie, "sid"},
		{core.URLHash, "query:id", keyQuery, "id"},
		{core.IPHash, "", keyClientIP, ""},
		{core.IPHash, "clientip", keyClientIP, ""},
		{core.RoundRobin, "", keyNone, ""},
	} {
		cfg := withServers(CreateConfig(), "http://10.0.0.1")
		cfg.Strategy, cfg.HashKey = c.strategy, c.key
		s, err := parse(cfg)
		if err != nil {
			t.Errorf("%s %q: %v", c.strategy, c.key, err)
			continue
		}
		if s.keyKind != c.kind || s.keyName != c.name {
			t.Errorf("%s %q: kind %d name %q, want %d %q", c.strategy, c.key, s.keyKind, s.keyName, c.kind, c.name)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Servers = nil }, "servers: empty list"},
		{func(c *Config) { c.Strategy = "fastest" }, `strategy "fastest"`},
		{func(c *Config) { c.Servers[0].URL = "10.0.0.1:80" }, `servers[0].url "10.0.0.1:80"`},
		{func(c *Config) { c.Servers[1].URL = "http://a.example?x=1" }, `servers[1].url "http://a.example?x=1"`},
		{func(c *Config) { c.Servers[1].URL = "http://user:pw@a.example" }, `servers[1].url`},
		{func(c *Config) { c.Servers[1].URL = "http://10.0.0.1:80" }, "same host and port as servers[0]"},
		{func(c *Config) { c.Servers[1].Weight = intp(-4) }, "servers[1].weight -4"},
		{func(c *Config) { c.Servers[0].MaxConns = -1 }, "servers[0].maxConns -1"},
		{func(c *Config) { c.MaxFails = -2 }, "maxFails -2"},
		{func(c *Config) { c.Retries = -3 }, "retries -3"},
		{func(c *Config) { c.MaxRetryBody = -1 }, "maxRetryBody -1"},
		{func(c *Config) { c.FailTimeout = "10" }, `failTimeout "10"`},
		{func(c *Config) { c.FailTimeout = "-1s" }, `failTimeout "-1s"`},
		{func(c *Config) { c.SlowStart = "1 minute" }, `slowStart "1 minute"`},
		{func(c *Config) { c.DecayTime = "x" }, `decayTime "x"`},
		{func(c *Config) { c.ConnectTimeout = "" }, `connectTimeout ""`},
		{func(c *Config) { c.ResponseTimeout = "0s" }, `responseTimeout "0s"`},
		{func(c *Config) { c.HealthCheck.Path = "ping" }, `healthCheck.path "ping"`},
		{func(c *Config) { c.HealthCheck = HealthCheck{Path: "/ping", Interval: "soon", Timeout: "1s"} }, `healthCheck.interval "soon"`},
		{func(c *Config) { c.HealthCheck = HealthCheck{Path: "/ping", Interval: "1s"} }, `healthCheck.timeout ""`},
		{func(c *Config) { c.TrustedIPs = []string{"10.0.0.1", "10.0.0"} }, `trustedIPs[1] "10.0.0"`},
		{func(c *Config) { c.HashKey = "uri" }, `hashKey "uri"`},
		{func(c *Config) { c.Strategy, c.HashKey = core.URLHash, "cookie" }, `hashKey "cookie"`},
		{func(c *Config) { c.Strategy, c.HashKey = core.URLHash, "path:x" }, `hashKey "path:x"`},
		{func(c *Config) { c.Strategy, c.HashKey = core.IPHash, "path" }, `hashKey "path"`},
		{func(c *Config) { c.HashMode = core.HashMaglev }, `hashMode "maglev"`},
		{func(c *Config) { c.Strategy, c.HashMode = core.URLHash, "rendezvous" }, `"rendezvous"`},
		{func(c *Config) { c.Strategy, c.Servers[1].Backup = core.IPHash, true }, "backup"},
		{func(c *Config) { c.Stagger = true; c.Strategy = core.Random }, "stagger"},
		{func(c *Config) { c.Servers[1].Weight = intp(0) }, "servers[1].weight 0: must be at least 1"},
		{func(c *Config) { c.Servers[0].Weight = intp(1 << 40) }, "servers[0].weight 1099511627776"},
		{func(c *Config) { c.FailTimeout = "0s" }, `failTimeout "0s": must be positive`},
		{func(c *Config) { c.FailTimeout = "" }, `failTimeout ""`},
		{func(c *Config) { c.TrustedIPs = []string{"::ffff:10.0.0.0/64"} }, `trustedIPs[0] "::ffff:10.0.0.0/64": an IPv4-mapped range needs a prefix length of 96 or more`},
		{func(c *Config) { c.Unknown = map[string]interface{}{"retrys": "2"} }, "retrys: unknown key (did you mean retries?)"},
		{func(c *Config) { c.Unknown = map[string]interface{}{"maxFail": "2", "zz": "1"} }, "maxFail: unknown key (did you mean maxFails?)"},
		{func(c *Config) { c.Unknown = map[string]interface{}{"max_fails": "2"} }, "max_fails: unknown key (did you mean maxFails?)"},
		{func(c *Config) { c.Unknown = map[string]interface{}{"colour": "red"} }, "colour: unknown key (known keys: strategy, servers,"},
		{func(c *Config) { c.Servers[1].Unknown = map[string]interface{}{"wieght": "2"} }, "servers[1].wieght: unknown key (did you mean weight?)"},
		{func(c *Config) { c.HealthCheck.Unknown = map[string]interface{}{"intervall": "2s"} }, "healthCheck.intervall: unknown key (did you mean interval?)"},
		{func(c *Config) { c.Strategy, c.LoadFactor = core.URLHash, 2 }, "loadFactor 2: only url_hash's bounded mode"},
		{func(c *Config) { c.Strategy, c.HashMode, c.LoadFactor = core.URLHash, core.HashBounded, 0.5 }, "loadFactor 0.5: must be above 1"},
		{func(c *Config) { c.TwoChoices = true }, `twoChoices: only least_conn has it, not "smooth_wrr"`},
		{func(c *Config) { c.DecayTime = "5s" }, `decayTime 5s: only fair has a decay time`},
		{func(c *Config) { c.Strategy, c.Servers[1].Backup = core.IPHash, true }, `servers[1].backup: strategy "ip_hash" does not accept backup servers`},
		{func(c *Config) { c.HealthCheck.Method = "HEAD" }, "healthCheck: its options need a path, which turns checks on"},
		{func(c *Config) { c.HealthCheck.Path = "/h#x" }, `healthCheck.path "/h#x": want a path and an optional query`},
		{func(c *Config) { c.HealthCheck.Path, c.HealthCheck.Status = "/h", 99 }, "healthCheck.status 99: want a status from 100 to 599"},
		{func(c *Config) { c.HealthCheck.Path, c.HealthCheck.Port = "/h", 70000 }, "healthCheck.port 70000"},
		{func(c *Config) { c.HealthCheck.Path, c.HealthCheck.Scheme = "/h", "ftp" }, `healthCheck.scheme "ftp": want http or https`},
		{func(c *Config) { c.HealthCheck.Path, c.HealthCheck.Mode = "/h", "grpc" }, `healthCheck.mode "grpc": the plugin's checks speak HTTP only`},
		{func(c *Config) { c.HealthCheck.Path, c.HealthCheck.Mode = "/h", "tcp" }, `healthCheck.mode "tcp": want http`},
		{func(c *Config) { c.HealthCheck.Path, c.HealthCheck.UnhealthyInterval = "/h", "0s" }, `healthCheck.unhealthyInterval "0s": must be positive`},
		{func(c *Config) { c.FlushInterval = "soon" }, `flushInterval "soon": want a duration such as "100ms" (negative: after every write)`},
		{func(c *Config) { c.Mode, c.Cookie, c.FlushInterval = "steer", "lb", "1s" }, "flushInterval: proxy mode only; in steer mode Traefik proxies, so set it in the service's responseForwarding.flushInterval"},
		{func(c *Config) { c.Mode = "steering" }, `mode "steering": want proxy or steer`},
		{func(c *Config) { c.Cookie = "lb" }, `cookie "lb": only in steer mode (mode: steer)`},
		{func(c *Config) { c.CookieFormat = "fnv" }, `cookieFormat "fnv": only in steer mode`},
		{func(c *Config) { c.Mode = "steer" }, "cookie: steer mode needs the name of the service's sticky cookie"},
		{func(c *Config) { c.Mode, c.Cookie = "steer", "l b" }, `cookie "l b": not a valid cookie name`},
		{func(c *Config) { c.Mode, c.Cookie, c.CookieFormat = "steer", "lb", "md5" }, `cookieFormat "md5": want sha256 (Traefik v3.3.4 and later) or fnv (Traefik v3.0.0 to v3.3.3)`},
		{func(c *Config) { c.Mode, c.Cookie, c.Retries = "steer", "lb", 1 }, "retries: proxy mode only; in steer mode Traefik proxies, so set it in Traefik's retry middleware in front of this one"},
		{func(c *Config) { c.Mode, c.Cookie, c.HealthCheck.Path = "steer", "lb", "/health" }, "healthCheck: proxy mode only; in steer mode Traefik proxies, so set it in the service's healthCheck"},
		{func(c *Config) { c.Mode, c.Cookie, c.PassHostHeader = "steer", "lb", false }, "passHostHeader: proxy mode only"},
		{func(c *Config) { c.Mode, c.Cookie, c.ConnectTimeout = "steer", "lb", "1s" }, "connectTimeout: proxy mode only"},
		{func(c *Config) { c.Mode, c.Cookie, c.ResponseTimeout = "steer", "lb", "1s" }, "responseTimeout: proxy mode only"},
		{func(c *Config) { c.Mode, c.Cookie, c.MaxRetryBody = "steer", "lb", 10 }, "maxRetryBody: proxy mode only"},
		{func(c *Config) { c.ReadAnswers = false }, "readAnswers false: steer mode only"},
		{func(c *Config) { c.Mode, c.Cookie, c.ReadAnswers, c.Strategy = "steer", "lb", false, core.Fair }, "readAnswers false: strategy fair times every answer"},
		{func(c *Config) { c.Mode, c.Cookie, c.ReadAnswers, c.FailStatus = "steer", "lb", false, []string{"503"} }, `failStatus "503": needs readAnswers`},
		{func(c *Config) { c.Mode, c.Cookie, c.ReadAnswers, c.Sticky.Cookie.Name = "steer", "lb", false, "srv" }, "sticky: needs readAnswers"},
		{func(c *Config) { c.Servers[0].URL = "h2c://10.0.0.1:80" }, `servers[0].url "h2c://10.0.0.1:80": scheme must be http or https (h2c only in steer mode, where Traefik connects)`},
		{func(c *Config) { c.Mode, c.Cookie, c.Servers[0].URL = "steer", "lb", "ftp://10.0.0.1:80" }, `servers[0].url "ftp://10.0.0.1:80": scheme must be http, https or h2c`},
	} {
		cfg := withServers(CreateConfig(), "http://10.0.0.1", "http://10.0.0.2")
		c.edit(cfg)
		_, err := New(context.Background(), nil, cfg, "lb")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), `lbpack middleware "lb": `) {
			t.Errorf("error %v, want one naming the middleware and containing %q", err, c.want)
		} else if strings.Count(err.Error(), "lbpack") != 1 {
			t.Errorf("error %v: want one prefix", err)
		}
	}
}

func TestClientIP(t *testing.T) {
	cfg := withServers(CreateConfig(), "http://10.0.0.1")
	cfg.TrustedIPs = []string{"10.0.0.0/8", " 192.0.2.1", "2001:db8::/32", "::ffff:172.16.0.0/108"}
	s, err := parse(cfg)
	if err != nil {
		t.Fatal(err)
	}
	trusting := &Plugin{s: s}
	plain := &Plugin{s: &settings{}}
	for _, c := range []struct {
		p           *Plugin
		remote, xff string
		want        string
	}{
		{plain, "192.0.2.1:80", "203.0.113.1", "192.0.2.1"},
		{plain, "[2001:db8::5]:80", "", "2001:db8::5"},
		{plain, "bare-host", "", "bare-host"},
		{trusting, "203.0.113.50:80", "198.51.100.1", "203.0.113.50"},
		{trusting, "192.0.2.1:80", "198.51.100.1", "198.51.100.1"},
		{trusting, "192.0.2.1:80", "1.1.1.1, 198.51.100.1, 10.2.3.4", "198.51.100.1"},
		{trusting, "10.0.0.9:80", "10.1.1.1, 10.2.2.2", "10.1.1.1"},
		{trusting, "10.0.0.9:80", "", "10.0.0.9"},
		{trusting, "10.0.0.9:80", "junk", "10.0.0.9"},
		{trusting, "10.0.0.9:80", "198.51.100.1, junk, 10.1.1.1", "10.1.1.1"},
		{trusting, "[::ffff:10.0.0.9]:80", "198.51.100.7", "198.51.100.7"},
		{trusting, "[2001:db8::1]:80", "2001:db9::1", "2001:db9::1"},
		{trusting, "192.0.2.1:80", "203.0.113.9:4711", "203.0.113.9"},
		{trusting, "192.0.2.1:80", "[2001:db9::9]:4711, 10.0.0.3:80", "2001:db9::9"},
		{trusting, "192.0.2.1:80", "203.0.113.9:x", "192.0.2.1"},
		{trusting, "172.16.0.5:80", "198.51.100.2", "198.51.100.2"},
		{trusting, "172.32.0.5:80", "198.51.100.2", "172.32.0.5"},
		{trusting, "[::ffff:172.16.9.9]:80", "198.51.100.3", "198.51.100.3"},
		// A hop in nginx's form, whatever its text (see TestNginxAddr).
		{trusting, "192.0.2.1:80", "2001:0DB9:0000:0000:0000:0000:0000:0001", "2001:db9::1"},
		{trusting, "192.0.2.1:80", "[2001:db9:0::0:1]:4711", "2001:db9::1"},
		{trusting, "192.0.2.1:80", "::FFFF:c633:6407", "::ffff:198.51.100.7"},
		{trusting, "192.0.2.1:80", "fe80::1%eth0", "192.0.2.1"}, // nginx refuses a zone too
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = c.remote
		if c.xff != "" {
			req.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := clientIP(c.p.s, req); got != c.want {
			t.Errorf("remote %s xff %q: %q, want %q", c.remote, c.xff, got, c.want)
		}
	}
}

// TestNginxAddr: the client address in the form nginx writes
// $remote_addr (ngx_inet6_ntop), from any text netip reads: each want is
// what nginx 1.22 answered for $remote_addr with the input in
// X-Forwarded-For from a trusted peer (real_ip_header X-Forwarded-For).
func TestNginxAddr(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"192.0.2.1", "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1"},
		{"2001:0DB8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
		{"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},    // the first of two longest runs
		{"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"}, // one zero group stays
		{"::ffff:192.0.2.1", "::ffff:192.0.2.1"},
		{"::FFFF:C000:0201", "::ffff:192.0.2.1"},
		{"::c000:201", "::192.0.2.1"}, // IPv4-compatible: nginx dots it, netip does not
		{"::0.0.2.2", "::0.0.2.2"},
		{"::201", "::201"}, // ...except when the last byte is 1
		{"::1", "::1"},
		{"::", "::"},
		{"0:0:1:0:0:0:1:1", "0:0:1::1:1"}, // the longest run, not the first
	} {
		a, err := netip.ParseAddr(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := nginxAddr(a); got != c.want {
			t.Errorf("nginxAddr(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// peer reads a remote address as net.SplitHostPort does, through its own
// cut for the one-colon form and SplitHostPort for the rest.
func TestPeerMatchesSplitHostPort(t *testing.T) {
	for _, remote := range []string{
		"192.0.2.1:80", "192.0.2.1:", "host:8080", ":80", "192.0.2.1",
		"[2001:db8::5]:80", "[::1]:0", "[::ffff:10.0.0.9]:80", "2001:db8::5",
		"2001:db8::5:80", "[2001:db8::5]", "[2001:db8::5]x:80", "a]:80", "a[b:80",
		"[a:b]:c:d", "", ":", "bare-host", "1.2.3.4:5:6",
	} {
		want := remote
		if host, _, err := net.SplitHostPort(remote); err == nil {
			want = host
		}
		if got := peer(remote); got != want {
			t.Errorf("peer(%q) = %q, want %q", remote, got, want)
		}
	}
}

func TestKey(t *testing.T) {
	req := httptest.NewRequest("GET", "/a/b%20c?id=7&x=1", nil)
	req.RemoteAddr = "198.51.100.3:999"
	req.Header.Set("X-Tenant", "acme")
	req.AddCookie(&http.Cookie{Name: "sid", Value: "s-42"})
	for _, c := range []struct {
		kind       int
		name, want string
	}{
		{keyURI, "", "/a/b%20c?id=7&x=1"},
		{keyPath, "", "/a/b c"},
		{keyClientIP, "", "198.51.100.3"},
		{keyHeader, "X-Tenant", "acme"},
		{keyHeader, "X-Missing", ""},
		{keyCookie, "sid", "s-42"},
		{keyCookie, "nope", ""},
		{keyQuery, "id", "7"},
	} {
		p := &Plugin{s: &settings{keyKind: c.kind, keyName: c.name}}
		if got := requestKey(p.s, req); got != c.want {
			t.Errorf("kind %d %q: key %q, want %q", c.kind, c.name, got, c.want)
		}
	}
}

func TestRetryable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset")}
	for _, c := range []struct {
		method string
		err    error
		want   bool
	}{
		{"GET", read, true},
		{"PUT", io.ErrUnexpectedEOF, true},
		{"DELETE", read, true},
		{"POST", dial, true},
		{"POST", fmt.Errorf("proxy: %w", dial), true},
		{"POST", read, false},
		{"PATCH", io.EOF, false},
		{"LOCK", read, false},
	} {
		if got := retryable(c.method, c.err); got != c.want {
			t.Errorf("%s after %v: retryable %v, want %v", c.method, c.err, got, c.want)
		}
	}
}

// TestServeCompiled runs the plugin compiled, with a retry past a refusing
// server and the 503 when every server is down.
func TestServeCompiled(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := withServers(CreateConfig(), dead, srv.URL)
	cfg.Strategy = core.RoundRobin
	h, err := New(ctx, nil, cfg, "lb")
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 4; k++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/", strings.NewReader(fmt.Sprint("body", k))))
		if rec.Code != 200 {
			t.Fatalf("request %d: %d", k, rec.Code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != "body0,body1,body2,body3" {
		t.Errorf("server got %q", got)
	}
	cfg = withServers(CreateConfig(), dead)
	cfg.Servers[0].Down = true
	cfg.Servers = append(cfg.Servers, Server{URL: srv.URL, Down: true})
	if h, err = New(ctx, nil, cfg, "lb"); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("all down: %d %v", rec.Code, rec.Header())
	}
}

// The configuration a Traefik user writes in YAML, built in Go.
func ExampleNew() {
	cfg := CreateConfig()
	cfg.Strategy = "url_hash"
	cfg.HashKey = "header:X-Tenant"
	cfg.Servers = []Server{{URL: "http://10.0.0.1:8080", Weight: intp(2)}, {URL: "http://10.0.0.2:8080"}}
	_, err := New(context.Background(), nil, cfg, "tenants")
	fmt.Println(err)
	cfg.HashKey = "body"
	_, err = New(context.Background(), nil, cfg, "tenants")
	fmt.Println(err)
	// Output:
	// <nil>
	// lbpack middleware "tenants": hashKey "body": want uri, path, clientip, header:NAME, cookie:NAME or query:NAME
}

func intp(n int) *int { return &n }

// TestKnownKeys checks the key lists unknownKeys compares with against the
// fields Traefik's decoder fills in (matched case-insensitively).
func TestKnownKeys(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		keys []string
	}{
		{reflect.TypeOf(Config{}), configKeys},
		{reflect.TypeOf(Server{}), serverKeys},
		{reflect.TypeOf(HealthCheck{}), healthKeys},
		{reflect.TypeOf(TLS{}), tlsKeys},
		{reflect.TypeOf(Sticky{}), stickyKeys},
		{reflect.TypeOf(StickyCookie{}), cookieKeys},
		{reflect.TypeOf(StickyLearn{}), learnKeys},
	} {
		var fields []string
		for k := 0; k < c.typ.NumField(); k++ {
			if f := c.typ.Field(k); f.Name != "Unknown" {
				fields = append(fields, strings.ToLower(f.Name))
			} else if f.Tag.Get("mapstructure") != ",remain" {
				t.Errorf("%s.Unknown: tag %q", c.typ.Name(), f.Tag)
			}
		}
		var keys []string
		for _, k := range c.keys {
			keys = append(keys, strings.ToLower(k))
		}
		if strings.Join(fields, " ") != strings.Join(keys, " ") {
			t.Errorf("%s: fields %v, known keys %v", c.typ.Name(), fields, keys)
		}
	}
}

func TestNearest(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"maxFail", "maxFails"}, {"retrys", "retries"}, {"wieght", "weight"}, {"MAXCONN", "maxConns"},
		{"fail-timeout", "failTimeout"}, {"trustedIP", "trustedIPs"}, {"hashmod", "hashMode"},
		{"colour", ""}, {"x", ""}, {"", ""},
	} {
		known := append(append([]string{}, configKeys...), serverKeys...)
		if got := nearest(c.key, known); got != c.want {
			t.Errorf("nearest(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}
