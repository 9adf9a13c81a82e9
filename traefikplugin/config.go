package traefikplugin

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lbpack/lbpack/core"
)

// Config is the middleware's configuration, as Traefik decodes it from the
// dynamic configuration: every scalar arrives as a string and is converted
// weakly, so durations are strings parsed by New.
type Config struct {
	// Strategy is any lbpack strategy: smooth_wrr (the default, nginx's
	// round robin), gcd_wrr, round_robin, random, weighted_random, ip_hash,
	// url_hash, least_conn or fair.
	Strategy string

	// Servers are the backends, in order (nginx's tie-breaks and hash walks
	// follow the order).
	Servers []Server

	// HashKey is what url_hash hashes: "uri" (the default: path and query as
	// sent), "path", "clientip", "header:NAME", "cookie:NAME" or
	// "query:NAME". ip_hash always hashes the client IP.
	HashKey string

	// HashMode is url_hash's mapping: ketama (default), modulo, maglev or
	// bounded.
	HashMode string

	// LoadFactor is the bounded mode's c (default 1.25).
	LoadFactor float64

	// Stagger starts smooth_wrr or gcd_wrr at a random point of its period.
	Stagger bool

	// TwoChoices makes least_conn compare two random backends.
	TwoChoices bool

	// DecayTime is fair's latency decay time, as a duration ("10s").
	DecayTime string

	// MaxFails failed requests within FailTimeout take a backend out for
	// FailTimeout, as nginx's max_fails (default 1; 0 disables).
	MaxFails int

	// FailTimeout is nginx's fail_timeout, as a positive duration (default
	// "10s"); "0s" is refused: maxFails 0 is what turns failures off.
	FailTimeout string

	// SlowStart ramps a backend added to the balancer up over this duration.
	SlowStart string

	// FailStatus are the statuses of an answer that count as the server's
	// failure, as a transport error does: toward maxFails, and for fair as
	// a failure rather than a fast answer. Each entry is a status (503), a
	// class (5xx) or a range (500-504), in a list or comma-separated.
	// Default: 5xx for fair, which would otherwise send most requests to a
	// server that fails fast; none for the other strategies, as nginx,
	// which counts an answer as a failure only for the http_ conditions of
	// proxy_next_upstream (its default is "error timeout"). Outside fair it
	// needs maxFails. The answer still goes to the client: a request the
	// server answered is not retried.
	FailStatus []string

	// Retries is how many other backends a failed request may move on to,
	// with nginx's proxy_next_upstream rules (connection errors and
	// timeouts; POST, PATCH and LOCK only when the request was not sent).
	// -1, the default, tries each backend at most once, as nginx does; 0
	// disables retries.
	Retries int

	// MaxRetryBody is how much of a request's body, in bytes, is kept in
	// memory so that a retry can send it again (default 1 MiB). The body
	// streams to the server as the client sends it; a request that has
	// read more of it than this goes to one server only. POST, PATCH and
	// LOCK keep nothing: they move to another server only when the
	// connection to the first was never made, before any of it was read.
	MaxRetryBody int

	// ConnectTimeout bounds connecting to a backend (default "10s").
	ConnectTimeout string

	// ResponseTimeout bounds the wait for a backend's response headers
	// (default "60s", as nginx's proxy_read_timeout).
	ResponseTimeout string

	// HealthCheck probes each backend actively when Path is set.
	HealthCheck HealthCheck

	// PassHostHeader forwards the client's Host header (default true);
	// otherwise the backend's host is sent.
	PassHostHeader bool

	// TLS configures the connections to https servers, as a Traefik
	// serversTransport does.
	TLS TLS

	// FlushInterval is how often a response being copied to the client is
	// flushed, as a duration (default "100ms", as Traefik's
	// responseForwarding.flushInterval); negative flushes after every
	// write. A response of unknown length is flushed after every write
	// whatever it says.
	FlushInterval string

	// TrustedIPs are addresses or CIDR ranges of proxies in front of
	// Traefik. Only when the connection comes from one of them is the client
	// IP taken from X-Forwarded-For (the rightmost untrusted address; a hop
	// written with a port counts as its address, and every address is
	// written as nginx writes $remote_addr, however the header spells it:
	// 2001:db8::1, ::ffff:192.0.2.1). Traefik's entry point
	// deletes X-Forwarded-For from peers it does not trust before any
	// middleware runs, so the same proxies must also be in the entry point's
	// forwardedHeaders.trustedIPs. IPv4-mapped ranges (::ffff:10.0.0.0/104)
	// match the IPv4 addresses they map.
	TrustedIPs []string

	// Mode is how the middleware balances: "proxy" (the default) proxies
	// each request to one of Servers by itself, and the router's service is
	// noop@internal; "steer" picks one of Servers and steers the router's
	// own service, a Traefik loadBalancer with a sticky cookie named
	// Cookie over the same servers, to it (see steer.go).
	Mode string

	// Cookie is the name of the service's sticky cookie, in steer mode.
	Cookie string

	// CookieFormat is how the service's Traefik writes a server's sticky
	// cookie value, in steer mode: "sha256" (the default: Traefik v3.3.4
	// and later) or "fnv" (Traefik v3.0.0 to v3.3.3).
	CookieFormat string

	// ReadAnswers, in steer mode, sends each answer through the plugin,
	// which reads its status and time (for maxFails, failStatus and fair)
	// and takes the service's sticky cookie out of it (the default). false
	// lets the service's proxy write the answer straight to the client: a
	// steered request then costs about what a middleware that only calls
	// the next one costs, and streams as Traefik streams; the plugin
	// learns only what the answer's headers show once it is sent (the
	// service's sticky cookie, when it overrode the choice because it has
	// the server down), so the service's own passiveHealthCheck and
	// healthCheck must find failures. Not with fair, failStatus or sticky.
	ReadAnswers bool

	// Sticky binds clients to servers as nginx's sticky directive does
	// (see sticky.go); off by default.
	Sticky Sticky

	// Unknown collects the keys that match no setting above (Traefik's
	// decoder would drop them without a word); New refuses each, naming
	// the nearest known key. It is not a setting.
	Unknown map[string]interface{} `mapstructure:",remain"`
}

// Server is one backend.
type Server struct {
	// URL is the backend's base URL: http or https, host and optional port
	// and path prefix.
	URL string
	// Weight is the backend's relative share, from 1; omitted (nil) means
	// 1. 0 is refused, as nginx refuses weight=0 (Traefik's own balancer
	// silently drops such a server): Down takes a server out.
	Weight *int
	// Backup servers get requests only when no primary is available.
	Backup bool
	// Down takes the server out of rotation without remapping hash keys.
	Down bool
	// MaxConns caps the requests in flight to the server (0: no cap).
	MaxConns int
	// Route is the server's sticky id, what a request names to be bound
	// to it (nginx's route=, at most 32 bytes); empty: the MD5 of its
	// host:port, or the id sticky.cookie.value gives it.
	Route string
	// Drain is nginx's drain: the server takes only requests bound to it
	// by sticky (cookie, route or learned session).
	Drain bool
	// Unknown collects the keys that match no setting (see Config.Unknown).
	Unknown map[string]interface{} `mapstructure:",remain"`
}

// TLS configures the connections to https servers. A certificate or key
// is a PEM file's path or the PEM text itself.
type TLS struct {
	// ServerName is the name the servers' certificates are checked against
	// and sent in SNI, instead of each server's host.
	ServerName string
	// InsecureSkipVerify accepts any server certificate.
	InsecureSkipVerify bool
	// RootCAs are the certificate authorities that sign the servers'
	// certificates, instead of the system's.
	RootCAs []string
	// CertFile is the client certificate the plugin presents to servers
	// that ask for one (mTLS).
	CertFile string
	// KeyFile is CertFile's private key.
	KeyFile string
	// Unknown collects the keys that match no setting (see Config.Unknown).
	Unknown map[string]interface{} `mapstructure:",remain"`
}

// HealthCheck configures active health checks, with the options of a
// Traefik service's healthCheck: every Interval (UnhealthyInterval while
// the server is down), a request for Path on each server; an answer within
// Timeout with Status, or from 200 to 399 when Status is 0, is healthy.
type HealthCheck struct {
	// Path is the request's path, and may carry a query
	// ("/health?ready=1"); empty disables active checks.
	Path string
	// Interval between checks of one server (default "10s").
	Interval string
	// UnhealthyInterval between checks of a server that is down (default:
	// Interval).
	UnhealthyInterval string
	// Timeout of one check (default "5s").
	Timeout string
	// Method of the request (default GET).
	Method string
	// Status is the one healthy status; 0, the default, takes any from 200
	// to 399.
	Status int
	// Hostname is the request's Host (default: the server's).
	Hostname string
	// Headers are added to the request.
	Headers map[string]string
	// Port checks the server on another port (default: the server's).
	Port int
	// Scheme checks the server with another scheme, http or https
	// (default: the server's).
	Scheme string
	// FollowRedirects follows a redirect and judges the answer it leads
	// to (default true, as Traefik); false takes the redirect itself as
	// healthy.
	FollowRedirects bool
	// Mode is http, the only one: gRPC's health protocol needs an h2c
	// client, which the interpreter's net/http lacks.
	Mode string
	// Unknown collects the keys that match no setting (see Config.Unknown).
	Unknown map[string]interface{} `mapstructure:",remain"`
}

// CreateConfig returns the default configuration; Traefik decodes the
// user's settings over it.
func CreateConfig() *Config {
	return &Config{
		Strategy:        core.SmoothWRR,
		MaxFails:        1,
		FailTimeout:     "10s",
		Retries:         -1,
		MaxRetryBody:    1 << 20,
		ConnectTimeout:  "10s",
		ResponseTimeout: "60s",
		HealthCheck:     HealthCheck{Interval: "10s", Timeout: "5s", FollowRedirects: true},
		PassHostHeader:  true,
		FlushInterval:   "100ms",
		ReadAnswers:     true,
	}
}

// Kinds of hash key.
const (
	keyNone = iota
	keyURI
	keyPath
	keyClientIP
	keyHeader
	keyCookie
	keyQuery
)

// settings is a validated Config, in the form the request path uses.
type settings struct {
	balancer        core.Config
	targets         []*url.URL
	keyKind         int
	keyName         string
	retries         int // further backends a request may try; never negative
	maxRetryBody    int64
	connectTimeout  time.Duration
	responseTimeout time.Duration
	healthPath      string // "" when active checks are off
	healthInterval  time.Duration
	healthTimeout   time.Duration
	health          healthSettings
	passHost        bool
	tls             *tls.Config // nil: the standard library's defaults
	flushInterval   time.Duration
	trusted         []netip.Prefix
	// failStatus[code] is true for an answer's status that counts as the
	// server's failure; nil when none does.
	failStatus []bool
	// Steer mode (see steer.go): the service's sticky cookie's name, and
	// its value for each server, in the configured format.
	steer        bool
	cookie       string
	format       string   // cookieFormat
	rawURLs      []string // the servers' URLs as written: Traefik names its servers so
	cookieValues []string
	// unreadAnswers is readAnswers false: the service answers the client
	// directly (blindSteerer).
	unreadAnswers bool
	// sticky is nginx's sticky directive (see sticky.go); nil when off.
	sticky *stickySettings
}

// parse validates c; errors name the field and the value.
func parse(c *Config) (*settings, error) {
	if c == nil {
		return nil, errors.New("no configuration")
	}
	if err := unknownKeys(c); err != nil {
		return nil, err
	}
	s := &settings{passHost: c.PassHostHeader, maxRetryBody: int64(c.MaxRetryBody)}
	if err := s.parseMode(c); err != nil {
		return nil, err
	}
	if len(c.Servers) == 0 {
		return nil, errors.New("servers: empty list")
	}
	if c.MaxFails < 0 {
		return nil, fmt.Errorf("maxFails %d: must not be negative", c.MaxFails)
	}
	if c.MaxRetryBody < 0 {
		return nil, fmt.Errorf("maxRetryBody %d: must not be negative", c.MaxRetryBody)
	}
	if c.Retries < -1 {
		return nil, fmt.Errorf("retries %d: must be -1 (each server once), 0 or more", c.Retries)
	}
	var err error
	var failTimeout, slowStart, decay time.Duration
	if failTimeout, err = duration("failTimeout", c.FailTimeout, true); err != nil {
		return nil, err
	}
	if slowStart, err = duration("slowStart", c.SlowStart, false); err != nil {
		return nil, err
	}
	if decay, err = duration("decayTime", c.DecayTime, false); err != nil {
		return nil, err
	}
	if s.connectTimeout, err = duration("connectTimeout", c.ConnectTimeout, true); err != nil {
		return nil, err
	}
	if s.responseTimeout, err = duration("responseTimeout", c.ResponseTimeout, true); err != nil {
		return nil, err
	}
	if err := s.parseHealth(c.HealthCheck); err != nil {
		return nil, err
	}
	if s.tls, err = parseTLS(c.TLS); err != nil {
		return nil, err
	}
	if s.flushInterval, err = time.ParseDuration(c.FlushInterval); err != nil {
		return nil, fmt.Errorf("flushInterval %q: want a duration such as \"100ms\" (negative: after every write)", c.FlushInterval)
	}

	seen := make(map[string]int, len(c.Servers))
	backends := make([]core.Backend, 0, len(c.Servers))
	urls := make([]string, 0, len(c.Servers))
	for i, sv := range c.Servers {
		u, addr, err := serverURL(sv.URL, s.steer)
		if err != nil {
			return nil, fmt.Errorf("servers[%d].url %q: %v", i, sv.URL, err)
		}
		if j, dup := seen[addr]; dup {
			return nil, fmt.Errorf("servers[%d].url %q: same host and port as servers[%d]", i, sv.URL, j)
		}
		seen[addr] = i
		w := 1
		if sv.Weight != nil {
			w = *sv.Weight
		}
		if w < 1 {
			return nil, fmt.Errorf("servers[%d].weight %d: must be at least 1 (leave it out for 1; down: true takes a server out)", i, w)
		}
		if sv.MaxConns < 0 {
			return nil, fmt.Errorf("servers[%d].maxConns %d: must not be negative", i, sv.MaxConns)
		}
		s.targets = append(s.targets, u)
		urls = append(urls, sv.URL)
		if s.steer {
			s.rawURLs = append(s.rawURLs, sv.URL)
			s.cookieValues = append(s.cookieValues, cookieValue(s.format, sv.URL))
		}
		backends = append(backends, core.Backend{
			Address:     addr,
			Weight:      w,
			Down:        sv.Down,
			Backup:      sv.Backup,
			MaxConns:    sv.MaxConns,
			MaxFails:    c.MaxFails,
			FailTimeout: failTimeout,
			SlowStart:   slowStart,
		})
	}
	if s.sticky, err = parseSticky(c, backends, urls); err != nil {
		return nil, err
	}
	s.retries = c.Retries
	if s.retries < 0 || s.retries > len(backends)-1 {
		s.retries = len(backends) - 1
	}

	strategy := c.Strategy
	if strategy == "" {
		strategy = core.SmoothWRR
	}
	if err := s.parseKey(strategy, c.HashKey); err != nil {
		return nil, err
	}
	for i, t := range c.TrustedIPs {
		p, err := prefix(strings.TrimSpace(t))
		if err == errMappedBits {
			return nil, fmt.Errorf("trustedIPs[%d] %q: %v", i, t, err)
		}
		if err != nil {
			return nil, fmt.Errorf("trustedIPs[%d] %q: want an IP address or CIDR range", i, t)
		}
		s.trusted = append(s.trusted, p)
	}
	traits, err := core.TraitsOf(strategy, c.HashMode)
	if err != nil {
		return nil, coreError(err)
	}
	if s.failStatus, err = parseFailStatus(c.FailStatus, traits, c.MaxFails, s.steer); err != nil {
		return nil, err
	}
	if !c.ReadAnswers {
		if err := s.unread(c, traits); err != nil {
			return nil, err
		}
	}
	s.balancer = core.Config{
		Strategy:   strategy,
		Backends:   backends,
		HashMode:   c.HashMode,
		LoadFactor: c.LoadFactor,
		Stagger:    c.Stagger,
		TwoChoices: c.TwoChoices,
		DecayTime:  decay,
	}
	return s, nil
}

// parseFailStatus reads failStatus into a table by status code (the
// statuses a response can carry, 0 to 999), nil when no status fails: the
// strategy's default (core.Traits.FailStatus: fair's is 5xx) when the list
// is empty, and, in steer mode with maxFails, 502 and 504: Traefik's answers
// for a connection error and a timeout, which the proxy mode sees as
// transport errors.
func parseFailStatus(list []string, traits core.Traits, maxFails int, steer bool) ([]bool, error) {
	if len(list) == 0 && traits.FailStatus != "" {
		list = []string{traits.FailStatus}
	}
	if len(list) == 0 && steer && maxFails > 0 {
		list = []string{"502", "504"}
	}
	if len(list) == 0 {
		return nil, nil
	}
	if !traits.Times && maxFails == 0 {
		return nil, fmt.Errorf("failStatus %q: has no effect with maxFails 0 (only fair follows failures without maxFails)", strings.Join(list, ","))
	}
	table := make([]bool, 1000)
	var los, his []int
	for i, v := range list {
		lo, hi, ok := core.ParseStatus(strings.TrimSpace(v))
		if !ok {
			return nil, fmt.Errorf("failStatus[%d] %q: want a status from 100 to 599, a class from 1xx to 5xx, or a range such as 500-504", i, v)
		}
		for j := range los {
			if lo <= his[j] && los[j] <= hi {
				return nil, fmt.Errorf("failStatus[%d] %q: overlaps failStatus[%d] %q", i, v, j, list[j])
			}
		}
		los = append(los, lo)
		his = append(his, hi)
		for code := lo; code <= hi; code++ {
			table[code] = true
		}
	}
	return table, nil
}

// duration parses a duration field; "" is zero unless required.
func duration(field, v string, required bool) (time.Duration, error) {
	if v == "" && !required {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a duration such as \"10s\"", field, v)
	}
	if d < 0 || (required && d == 0) {
		return 0, fmt.Errorf("%s %q: must be positive", field, v)
	}
	return d, nil
}

func (s *settings) parseHealth(h HealthCheck) error {
	if h.Path == "" {
		if h.Method != "" || h.Status != 0 || h.Hostname != "" || len(h.Headers) > 0 || h.Port != 0 || h.Scheme != "" || h.Mode != "" || h.UnhealthyInterval != "" {
			return errors.New("healthCheck: its options need a path, which turns checks on")
		}
		return nil
	}
	if !strings.HasPrefix(h.Path, "/") {
		return fmt.Errorf("healthCheck.path %q: must start with /", h.Path)
	}
	ref, err := url.Parse(h.Path)
	if err != nil || ref.Fragment != "" {
		return fmt.Errorf("healthCheck.path %q: want a path and an optional query", h.Path)
	}
	if s.healthInterval, err = duration("healthCheck.interval", h.Interval, true); err != nil {
		return err
	}
	if s.healthTimeout, err = duration("healthCheck.timeout", h.Timeout, true); err != nil {
		return err
	}
	hs := healthSettings{path: ref, interval: s.healthInterval, method: h.Method, status: h.Status,
		hostname: h.Hostname, scheme: h.Scheme, follow: h.FollowRedirects, header: http.Header{}}
	if h.UnhealthyInterval != "" {
		if hs.unhealthy, err = duration("healthCheck.unhealthyInterval", h.UnhealthyInterval, true); err != nil {
			return err
		}
	} else {
		hs.unhealthy = s.healthInterval
	}
	if hs.method == "" {
		hs.method = http.MethodGet
	}
	if hs.status != 0 && (hs.status < 100 || hs.status > 599) {
		return fmt.Errorf("healthCheck.status %d: want a status from 100 to 599 (or none: 200 to 399)", h.Status)
	}
	if h.Port < 0 || h.Port > 65535 {
		return fmt.Errorf("healthCheck.port %d: want a port from 1 to 65535", h.Port)
	}
	if h.Port != 0 {
		hs.port = strconv.Itoa(h.Port)
	}
	if hs.scheme != "" && hs.scheme != "http" && hs.scheme != "https" {
		return fmt.Errorf("healthCheck.scheme %q: want http or https", h.Scheme)
	}
	switch h.Mode {
	case "", "http":
	case "grpc":
		return errors.New(`healthCheck.mode "grpc": the plugin's checks speak HTTP only (gRPC's needs an h2c client, which Traefik's interpreter lacks); in steer mode the service's healthCheck has it`)
	default:
		return fmt.Errorf("healthCheck.mode %q: want http", h.Mode)
	}
	for k, v := range h.Headers {
		hs.header.Set(k, v)
	}
	s.health = hs
	s.healthPath = h.Path
	return nil
}

// healthSettings are the active health check's, as probe uses them.
type healthSettings struct {
	path      *url.URL // the path and query to request
	interval  time.Duration
	unhealthy time.Duration // the interval while a server is down
	method    string
	status    int // the healthy status; 0: 200 to 399
	hostname  string
	header    http.Header
	port      string // "": the server's
	scheme    string // "": the server's
	follow    bool
}

// serverURL checks a server URL and returns it with the balancer address
// ("host:port", the scheme's port when none is given). In steer mode
// Traefik connects to the server, so h2c, which it speaks and the proxy
// mode does not, is allowed.
func serverURL(raw string, steer bool) (*url.URL, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", errors.New("not a URL")
	}
	switch {
	case u.Scheme == "http" || u.Scheme == "https":
	case u.Scheme == "h2c" && steer:
	case steer:
		return nil, "", errors.New("scheme must be http, https or h2c")
	default:
		return nil, "", errors.New("scheme must be http or https (h2c only in steer mode, where Traefik connects)")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, "", errors.New("no host")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, "", errors.New("only scheme, host, port and path are allowed")
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	if err := core.CheckAddress(addr); err != nil {
		return nil, "", err
	}
	return u, addr, nil
}

// parseKey sets the hash key for the strategy.
func (s *settings) parseKey(strategy, key string) error {
	switch strategy {
	case core.IPHash:
		if key != "" && key != "clientip" {
			return fmt.Errorf("hashKey %q: ip_hash always hashes the client IP", key)
		}
		s.keyKind = keyClientIP
		return nil
	case core.URLHash:
		if key == "" {
			key = "uri"
		}
	default:
		if key != "" {
			return fmt.Errorf("hashKey %q: only url_hash and ip_hash hash a key, not %q", key, strategy)
		}
		return nil
	}
	// One assignment per statement below: yaegi v0.16.1 drops the first
	// value of "a, b = CONST, call()".
	kind, name, _ := strings.Cut(key, ":")
	s.keyName = name
	switch {
	case kind == "uri" && name == "":
		s.keyKind = keyURI
	case kind == "path" && name == "":
		s.keyKind = keyPath
	case kind == "clientip" && name == "":
		s.keyKind = keyClientIP
	case kind == "header" && name != "":
		s.keyKind = keyHeader
		s.keyName = http.CanonicalHeaderKey(name)
	case kind == "cookie" && name != "":
		s.keyKind = keyCookie
	case kind == "query" && name != "":
		s.keyKind = keyQuery
	default:
		return fmt.Errorf("hashKey %q: want uri, path, clientip, header:NAME, cookie:NAME or query:NAME", key)
	}
	return nil
}

// errMappedBits refuses an IPv4-mapped range wider than the mapped space.
var errMappedBits = errors.New("an IPv4-mapped range needs a prefix length of 96 or more")

// prefix parses an address ("10.0.0.1") or a range ("10.0.0.0/8"). An
// IPv4-mapped range (::ffff:10.0.0.0/104) becomes the IPv4 range it maps,
// since trusts compares addresses unmapped.
func prefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4In6() {
			return p.Masked(), err
		}
		if p.Bits() < 96 {
			return netip.Prefix{}, errMappedBits
		}
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// tracked reports whether the balancer needs every request's Done:
// strategies that count requests in flight or measure latency (their
// core.Traits), and max_conns. max_fails alone does not: it needs the
// failures and the successes after them only (see try).
func (s *settings) tracked() bool {
	c := s.balancer
	if t, _ := core.TraitsOf(c.Strategy, c.HashMode); t.Counts || t.Times {
		return true
	}
	for _, b := range c.Backends {
		if b.MaxConns > 0 {
			return true
		}
	}
	return false
}
