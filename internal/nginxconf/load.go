package nginxconf

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lbpack/lbpack/core"
)

// Balancing methods of an upstream block, by their nginx directive.
const (
	RoundRobin = ""
	LeastConn  = "least_conn"
	IPHash     = "ip_hash"
	Hash       = "hash"
	Random     = "random"
	LeastTime  = "least_time" // open source since nginx 1.31.0
)

// nginx's defaults for a server of an upstream block.
const (
	defaultMaxFails    = 1
	defaultFailTimeout = 10 * time.Second
)

// Config is what the converters carry over from an nginx configuration.
type Config struct {
	Upstreams []*Upstream
	Sites     []*Site
	// Warnings are the directives no host carries over.
	Warnings []Warning
}

// Warning is a directive, or a part of one, that the conversion does not
// carry over, with the reason.
type Warning struct {
	Pos       Pos
	Directive string
	Msg       string
}

func (w Warning) String() string { return fmt.Sprintf("%s: %s: %s", w.Pos, w.Directive, w.Msg) }

// sortWarnings orders warnings by file and line, as a reader goes through
// the configuration.
func sortWarnings(ws []Warning) []Warning {
	sort.SliceStable(ws, func(i, j int) bool {
		if ws[i].Pos.File != ws[j].Pos.File {
			return ws[i].Pos.File < ws[j].Pos.File
		}
		return ws[i].Pos.Line < ws[j].Pos.Line
	})
	return ws
}

// Upstream is an upstream block.
type Upstream struct {
	Name      string
	Pos       Pos
	Method    string // RoundRobin, LeastConn, IPHash, Hash, Random or LeastTime
	MethodPos Pos
	// Key is the hash method's key; Consistent is its "consistent" flag.
	Key        Key
	Consistent bool
	// Two is random's "two" (of two random servers, the one with fewer
	// connections, or by least_time when TwoLeastTime).
	Two          bool
	TwoLeastTime bool
	Servers      []*Peer
	// Keepalive is the idle connections kept open to the servers (0: none
	// written); KeepaliveTimeout their idle timeout.
	Keepalive        int
	KeepaliveTimeout time.Duration
	// Sticky is the sticky directive in effect; nil when none (or when
	// nginx drops it: see dropSticky).
	Sticky *Sticky
	used   bool
}

// Peer is one server line of an upstream block, with nginx's defaults
// filled in.
type Peer struct {
	Addr        string // host:port, IPv6 in brackets
	Pos         Pos
	Weight      int
	Down        bool
	Backup      bool
	MaxFails    int
	FailTimeout time.Duration
	MaxConns    int
	SlowStart   time.Duration
	// Drain is nginx's drain: only requests bound to the server by sticky
	// reach it. Down and Drain are one setting in nginx: the one written
	// last holds.
	Drain bool
	// Route is route=: the server's sticky id, "" for nginx's MD5 of its
	// address.
	Route string
}

// Key is a hash key: literal text and variables in the order written.
type Key struct {
	Text  string
	Parts []KeyPart
	Pos   Pos
}

// KeyPart is literal text (Var empty) or one variable, named without "$".
type KeyPart struct {
	Literal string
	Var     string
}

// Site is a server block.
type Site struct {
	Pos       Pos
	Listens   []Listen
	Names     []string
	Default   bool // the default server of its ports, by default_server or by coming first
	Locations []*Location
	RealIP    RealIP
	// Return is a return directive of the server itself, which nginx runs
	// before choosing a location: it answers every request.
	Return *Return
}

// Listen is one listen directive.
type Listen struct {
	Host, Port    string
	SSL           bool
	DefaultServer bool
	Pos           Pos
}

// RealIP is the realip module's settings in effect for a server.
type RealIP struct {
	From      []string // set_real_ip_from: addresses and CIDR ranges
	Header    string   // real_ip_header; "" when not set (nginx: X-Real-IP)
	Recursive bool
	Pos       Pos
}

// Location is a location block (nested ones are flattened after their
// parent).
type Location struct {
	Pos      Pos
	Modifier string // "", "=", "^~", "~" or "~*"
	Path     string
	Proxy    *Proxy  // nil when the location does not proxy
	Return   *Return // a return directive, when it has one
	// AddHeaders are add_header directives whose values the hosts can set.
	AddHeaders []Header
}

// Return is a location's return directive.
type Return struct {
	Code int
	Text Key // the body (2xx and other codes) or the URL (3xx)
}

// Header is a header name and its value, with nginx variables.
type Header struct {
	Name  string
	Value Key
	Pos   Pos
}

// Proxy is a location's proxy_pass and the proxy settings in effect there.
type Proxy struct {
	Pos      Pos
	Scheme   string    // http or https
	Host     string    // the host (and port) as proxy_pass writes it: nginx's $proxy_host
	URI      string    // the URI part of proxy_pass ("/v2/"), which replaces the location's prefix; "" when none
	Upstream *Upstream // nil for a proxy_pass to one address
	Addr     string    // the address, when Upstream is nil
	Retry    Retry
	// Timeouts: proxy_connect_timeout, proxy_read_timeout,
	// proxy_send_timeout; 0 when not written.
	ConnectTimeout, ReadTimeout, SendTimeout time.Duration
	SetHeaders                               []Header
	// TLS is the proxy_ssl_ settings in effect, for an https proxy_pass.
	TLS ProxyTLS
}

// ProxyTLS is the proxy_ssl_ settings of a location: how nginx checks an
// https upstream's certificate and which it presents.
type ProxyTLS struct {
	Verify    bool   // proxy_ssl_verify on (nginx's default: off)
	Trusted   string // proxy_ssl_trusted_certificate: the CA certificates' file
	Name      Key    // proxy_ssl_name; empty: nginx's $proxy_host
	SNI       bool   // proxy_ssl_server_name on (default off: no SNI)
	Cert, Key string // proxy_ssl_certificate and proxy_ssl_certificate_key
	// Where proxy_ssl_trusted_certificate, proxy_ssl_name and
	// proxy_ssl_certificate were written.
	TrustedPos, NamePos, CertPos Pos
}

// Retry is proxy_next_upstream and its limits.
type Retry struct {
	// Conditions are proxy_next_upstream's; nginx's default is error and
	// timeout. "off" disables retries.
	Conditions []string
	Pos        Pos
	Tries      int           // proxy_next_upstream_tries; 0: no limit
	Timeout    time.Duration // proxy_next_upstream_timeout; 0: none
}

// Off reports whether retries are disabled.
func (r Retry) Off() bool { return len(r.Conditions) == 1 && r.Conditions[0] == "off" }

// Has reports whether the condition is one of the retry conditions.
func (r Retry) Has(cond string) bool {
	for _, c := range r.Conditions {
		if c == cond {
			return true
		}
	}
	return false
}

// scope is what a server or location inherits from the block around it.
type scope struct {
	retry            Retry
	connect, read    time.Duration
	send             time.Duration
	setHeaders       []Header
	setHeadersLocal  bool
	addHeaders       []Header
	addHeadersLocal  bool
	realIP           RealIP
	realIPFromLocal  bool
	realIPFromParent []string
	tls              ProxyTLS
}

// loader collects a Config.
type loader struct {
	c         *Config
	upstreams map[string]*Upstream
	proxies   []*Proxy
	proxyTo   []string // by proxy: the upstream name proxy_pass wrote
	// stickyZones are sticky learn's zones, by name.
	stickyZones map[string]stickyZone
}

func (l *loader) warn(d *Directive, format string, args ...any) {
	l.c.Warnings = append(l.c.Warnings, Warning{Pos: d.Pos, Directive: d.Name, Msg: fmt.Sprintf(format, args...)})
}

// processSettings are main-context directives about nginx's own process:
// nothing to carry over to a host.
var processSettings = map[string]bool{
	"user": true, "worker_processes": true, "worker_rlimit_nofile": true, "pid": true,
	"error_log": true, "pcre_jit": true, "load_module": true, "daemon": true,
	"master_process": true, "worker_cpu_affinity": true, "env": true, "thread_pool": true,
	"timer_resolution": true, "lock_file": true, "working_directory": true, "events": true,
	"worker_priority": true, "worker_shutdown_timeout": true,
}

// LoadFile reads the nginx configuration file at name and its includes
// into a Config: ParseFile and Load.
func LoadFile(name string) (*Config, error) {
	ds, err := ParseFile(name)
	if err != nil {
		return nil, err
	}
	return Load(ds)
}

// Load reads the directives of an nginx configuration (from ParseFile) into
// a Config. Errors are bad input, with the position of the directive.
func Load(ds []*Directive) (*Config, error) {
	l := &loader{c: &Config{}, upstreams: map[string]*Upstream{}, stickyZones: map[string]stickyZone{}}
	https := 0
	for _, d := range ds {
		switch {
		case d.Name == "http":
			if err := l.http(d, &scope{}); err != nil {
				return nil, err
			}
			https++
		case processSettings[d.Name]:
			l.warn(d, "an nginx process setting: Caddy and Traefik need none")
		case d.Name == "stream" || d.Name == "mail":
			l.warn(d, "not converted: lbpack balances HTTP only")
		default:
			l.warn(d, "not converted: unknown in nginx's main context")
		}
	}
	if https == 0 {
		return nil, errorf(Pos{File: firstFile(ds), Line: 1}, "no http block: nothing to convert")
	}
	proxies := map[*Upstream]int{}
	for i, p := range l.proxies {
		if u := l.upstreams[l.proxyTo[i]]; u != nil && l.proxyTo[i] != "" {
			p.Upstream, p.Addr = u, ""
			u.used = true
			proxies[u]++
		}
	}
	for _, u := range l.c.Upstreams {
		l.warnLearnShared(u, proxies[u])
	}
	for _, u := range l.c.Upstreams {
		if !u.used {
			return nil, errorf(u.Pos, "upstream %s: no proxy_pass uses it (nginx would accept it; it is probably a mistake)", u.Name)
		}
		if err := l.checkUpstream(u); err != nil {
			return nil, err
		}
	}
	markDefaults(l.c.Sites)
	return l.c, nil
}

func firstFile(ds []*Directive) string {
	if len(ds) > 0 {
		return ds[0].Pos.File
	}
	return "nginx.conf"
}

// http reads an http block.
func (l *loader) http(h *Directive, sc *scope) error {
	for _, d := range h.Block {
		ok, err := l.inherited(d, sc, "http")
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		switch d.Name {
		case "upstream":
			if err := l.upstream(d); err != nil {
				return err
			}
		case "server":
			if err := l.server(d, sc); err != nil {
				return err
			}
		default:
			l.warn(d, "not converted")
		}
	}
	return nil
}

// inherited handles the directives a server or location inherits from
// the block around it; it reports whether d was one.
func (l *loader) inherited(d *Directive, sc *scope, ctx string) (bool, error) {
	var err error
	switch d.Name {
	case "proxy_next_upstream":
		if len(d.Args) == 0 {
			return true, errorf(d.Pos, "proxy_next_upstream: missing its conditions")
		}
		for _, a := range d.Args {
			switch a {
			case "error", "timeout", "invalid_header", "http_500", "http_502", "http_503", "http_504",
				"http_403", "http_404", "http_429", "non_idempotent":
			case "off":
				if len(d.Args) > 1 {
					return true, errorf(d.Pos, "proxy_next_upstream: off with other conditions")
				}
			default:
				return true, errorf(d.Pos, "proxy_next_upstream: unknown condition %q", a)
			}
		}
		sc.retry.Conditions = d.Args
		sc.retry.Pos = d.Pos
	case "proxy_next_upstream_tries":
		if sc.retry.Tries, err = intArg(d, 0); err != nil {
			return true, err
		}
	case "proxy_next_upstream_timeout":
		sc.retry.Timeout, err = l.durationArg(d)
	case "proxy_connect_timeout":
		sc.connect, err = l.durationArg(d)
	case "proxy_read_timeout":
		sc.read, err = l.durationArg(d)
	case "proxy_send_timeout":
		sc.send, err = l.durationArg(d)
	case "proxy_set_header":
		if len(d.Args) != 2 {
			return true, errorf(d.Pos, "proxy_set_header: want a header name and a value, have %d arguments", len(d.Args))
		}
		if !sc.setHeadersLocal {
			sc.setHeaders, sc.setHeadersLocal = nil, true // nginx: a level with its own replaces the inherited ones
		}
		if upgradeHeader(d.Args[0], d.Args[1]) {
			l.warn(d, "%s: not needed: Caddy and Traefik pass a WebSocket upgrade's Upgrade and Connection headers on themselves", d.Args[0])
			return true, nil
		}
		k, err := parseKey(d.Args[1], d.Pos)
		if err != nil {
			return true, err
		}
		sc.setHeaders = append(sc.setHeaders, Header{Name: d.Args[0], Value: k, Pos: d.Pos})
	case "set_real_ip_from":
		if len(d.Args) != 1 {
			return true, errorf(d.Pos, "set_real_ip_from: want one address or range")
		}
		a := d.Args[0]
		if strings.HasPrefix(a, "unix:") {
			l.warn(d, "not converted: Caddy's trusted_proxies takes IP ranges only")
			return true, nil
		}
		if _, err := prefix(a); err != nil {
			return true, errorf(d.Pos, "set_real_ip_from %s: not an IP address or CIDR range", a)
		}
		if ctx == "location" {
			l.warn(d, "not converted in a location: Caddy trusts proxies per server")
			return true, nil
		}
		if !sc.realIPFromLocal {
			sc.realIP.From, sc.realIPFromLocal = nil, true
		}
		sc.realIP.From = append(sc.realIP.From, a)
		sc.realIP.Pos = d.Pos
	case "real_ip_header":
		if len(d.Args) != 1 {
			return true, errorf(d.Pos, "real_ip_header: want one header name")
		}
		if ctx == "location" {
			l.warn(d, "not converted in a location: Caddy reads client_ip_headers per server")
			return true, nil
		}
		if d.Args[0] == "proxy_protocol" {
			l.warn(d, "not converted: use Caddy's proxy_protocol listener wrapper")
			return true, nil
		}
		sc.realIP.Header = d.Args[0]
	case "real_ip_recursive":
		if len(d.Args) != 1 || (d.Args[0] != "on" && d.Args[0] != "off") {
			return true, errorf(d.Pos, "real_ip_recursive: want on or off")
		}
		if ctx == "location" {
			l.warn(d, "not converted in a location")
			return true, nil
		}
		sc.realIP.Recursive = d.Args[0] == "on"
	case "add_header":
		if len(d.Args) < 2 || len(d.Args) > 3 || (len(d.Args) == 3 && d.Args[2] != "always") {
			return true, errorf(d.Pos, "add_header: want a name, a value and optionally always")
		}
		k, err := parseKey(d.Args[1], d.Pos)
		if err != nil {
			return true, err
		}
		if !sc.addHeadersLocal {
			sc.addHeaders, sc.addHeadersLocal = nil, true // as proxy_set_header: a level's own replace the inherited
		}
		sc.addHeaders = append(sc.addHeaders, Header{Name: d.Args[0], Value: k, Pos: d.Pos})
	case "proxy_ssl_verify", "proxy_ssl_server_name":
		if len(d.Args) != 1 || (d.Args[0] != "on" && d.Args[0] != "off") {
			return true, errorf(d.Pos, "%s: want on or off", d.Name)
		}
		if d.Name == "proxy_ssl_verify" {
			sc.tls.Verify = d.Args[0] == "on"
		} else {
			sc.tls.SNI = d.Args[0] == "on"
		}
	case "proxy_ssl_trusted_certificate", "proxy_ssl_certificate", "proxy_ssl_certificate_key", "proxy_ssl_name":
		if len(d.Args) != 1 {
			return true, errorf(d.Pos, "%s: want one argument", d.Name)
		}
		switch d.Name {
		case "proxy_ssl_trusted_certificate":
			sc.tls.Trusted, sc.tls.TrustedPos = d.Args[0], d.Pos
		case "proxy_ssl_certificate":
			sc.tls.Cert, sc.tls.CertPos = d.Args[0], d.Pos
		case "proxy_ssl_certificate_key":
			sc.tls.Key = d.Args[0]
		default:
			sc.tls.NamePos = d.Pos
			if sc.tls.Name, err = parseKey(d.Args[0], d.Pos); err != nil {
				return true, err
			}
		}
	case "proxy_http_version":
		if len(d.Args) == 1 && d.Args[0] == "1.1" {
			return true, nil // what both hosts speak to their upstreams
		}
		l.warn(d, "not converted: Caddy and Traefik speak HTTP/1.1 to upstreams")
	default:
		return false, nil
	}
	return true, err
}

// upgradeHeader reports whether proxy_set_header name value is nginx's
// WebSocket recipe: Upgrade $http_upgrade, and Connection "upgrade" or a
// variable (a map of $http_upgrade, as nginx's documentation writes it).
func upgradeHeader(name, value string) bool {
	switch {
	case strings.EqualFold(name, "Upgrade"):
		return value == "$http_upgrade" || value == "${http_upgrade}"
	case strings.EqualFold(name, "Connection"):
		v := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(value, "$"), "{"), "}")
		return strings.EqualFold(value, "upgrade") || strings.HasPrefix(value, "$") && validName(v)
	}
	return false
}

// child returns the scope a nested block starts from.
func (sc *scope) child() *scope {
	c := *sc
	c.setHeadersLocal = false
	c.addHeadersLocal = false
	c.realIPFromLocal = false
	return &c
}

// upstream reads an upstream block.
func (l *loader) upstream(d *Directive) error {
	if len(d.Args) != 1 || !d.IsBlock {
		return errorf(d.Pos, "upstream: want a name and a block")
	}
	name := d.Args[0]
	if old := l.upstreams[name]; old != nil {
		return errorf(d.Pos, "upstream %s: duplicate (first at %s)", name, old.Pos)
	}
	u := &Upstream{Name: name, Pos: d.Pos}
	var stickyAt *Directive // the first sticky directive, dropped or not
	for _, s := range d.Block {
		var err error
		switch s.Name {
		case "server":
			err = l.peer(u, s)
		case "least_conn", "ip_hash":
			err = l.method(u, s, 0)
		case "hash":
			if err = l.method(u, s, 2); err == nil {
				if len(s.Args) == 0 || (len(s.Args) == 2 && s.Args[1] != "consistent") {
					return errorf(s.Pos, "hash: want a key and optionally consistent")
				}
				u.Consistent = len(s.Args) == 2
				u.Key, err = parseKey(s.Args[0], s.Pos)
			}
		case "random":
			if err = l.method(u, s, 2); err == nil && len(s.Args) > 0 {
				if s.Args[0] != "two" {
					return errorf(s.Pos, "random: want nothing or two [method]")
				}
				u.Two = true
				if len(s.Args) == 2 {
					switch {
					case s.Args[1] == "least_conn":
					case s.Args[1] == "least_time=header" || s.Args[1] == "least_time=last_byte":
						u.TwoLeastTime = true
						l.warn(s, "%s (NGINX Plus only: open-source nginx's random, 1.31 included, takes least_conn only): converted to lbpack's fair policy, which chooses among all the servers, not two drawn at random; %s", s.Args[1], fairVersusLeastTime)
					default:
						return errorf(s.Pos, "random two: unknown method %q", s.Args[1])
					}
				}
			}
		case "least_time":
			if err = l.method(u, s, 2); err == nil {
				if len(s.Args) == 0 || (s.Args[0] != "header" && s.Args[0] != "last_byte") || (len(s.Args) == 2 && s.Args[1] != "inflight") {
					return errorf(s.Pos, "least_time %q: want header or last_byte, and optionally inflight", strings.Join(s.Args, " "))
				}
				l.warn(s, "converted to lbpack's fair policy; %s", fairVersusLeastTime)
			}
		case "sticky":
			if stickyAt != nil {
				return errorf(s.Pos, `"sticky" directive is duplicate`)
			}
			stickyAt = s
			err = l.sticky(u, s)
		case "keepalive":
			u.Keepalive, err = intArg(s, 1)
		case "keepalive_timeout":
			u.KeepaliveTimeout, err = l.durationArg(s)
		case "zone":
			l.warn(s, "not needed: lbpack keeps one state per policy, shared by every request")
		default:
			l.warn(s, "not converted")
		}
		if err != nil {
			return err
		}
	}
	if len(u.Servers) == 0 {
		return errorf(d.Pos, "upstream %s: no servers", name)
	}
	if u.Method == IPHash || u.Method == Hash || u.Method == Random {
		for _, p := range u.Servers {
			if p.Backup {
				return errorf(p.Pos, `server %s: balancing method does not support parameter "backup" (nginx's %s takes no backup servers)`, p.Addr, u.Method)
			}
		}
	}
	l.warnStickyNames(u)
	if u.Method == Hash || u.Method == IPHash || u.Method == Random {
		for _, p := range u.Servers {
			if p.SlowStart > 0 {
				return errorf(p.Pos, "server %s: slow_start: not with the %s method (NGINX Plus refuses it)", p.Addr, u.Method)
			}
		}
	}
	l.upstreams[name] = u
	l.c.Upstreams = append(l.c.Upstreams, u)
	return nil
}

// fairVersusLeastTime says what differs when lbpack's fair takes the place
// of nginx's least_time.
const fairVersusLeastTime = "fair is latency-aware by its own estimate (a decaying average of each server's answer times, " +
	"times a penalty that doubles with each failure, 5xx answers included, stretched by its requests in flight), " +
	"where least_time averages times in 20 ms bands, multiplies them by connections and shares ties by round robin; " +
	"least_time takes a fast 5xx for a fast answer, so a server that fails fast gets many requests from nginx and few from fair; " +
	"header, last_byte and inflight have no setting: Caddy times an answer to its headers, the Traefik plugin to its end, " +
	"and fair always counts requests in flight"

// method records a balancing method directive with at most maxArgs
// arguments.
func (l *loader) method(u *Upstream, d *Directive, maxArgs int) error {
	if len(d.Args) > maxArgs {
		return errorf(d.Pos, "%s: unexpected argument %q", d.Name, d.Args[maxArgs])
	}
	if u.Method != RoundRobin {
		l.warn(d, "load balancing method redefined: %s (at %s) is replaced, as nginx does", u.Method, u.MethodPos)
	}
	u.Method, u.MethodPos = d.Name, d.Pos
	l.dropSticky(u, d)
	return nil
}

// peer reads a server line of an upstream block.
func (l *loader) peer(u *Upstream, d *Directive) error {
	if len(d.Args) == 0 {
		return errorf(d.Pos, "server: missing the address")
	}
	addr, err := peerAddr(d.Args[0])
	if err != nil {
		return errorf(d.Pos, "server %s: %v", d.Args[0], err)
	}
	host, _, _ := net.SplitHostPort(addr)
	if _, err := netip.ParseAddr(host); err != nil {
		l.warn(d, "%s is a name: nginx resolves it once and balances over each of its addresses, Caddy and Traefik dial the name", addr)
	}
	p := &Peer{Addr: addr, Pos: d.Pos, Weight: 1, MaxFails: defaultMaxFails, FailTimeout: defaultFailTimeout}
	for _, a := range d.Args[1:] {
		name, val, hasVal := strings.Cut(a, "=")
		var err error
		switch {
		case name == "weight" && hasVal:
			if p.Weight, err = paramInt(d, name, val, 1); err == nil && p.Weight > core.MaxWeight {
				err = errorf(d.Pos, "server %s: weight=%s: lbpack takes weights up to %d (nginx has no bound): scale this upstream's weights down", d.Args[0], val, core.MaxWeight)
			}
		case name == "max_fails" && hasVal:
			p.MaxFails, err = paramInt(d, name, val, 0)
		case name == "max_conns" && hasVal:
			p.MaxConns, err = paramInt(d, name, val, 0)
		case name == "fail_timeout" && hasVal:
			p.FailTimeout, err = l.paramDuration(d, name, val, true)
		case name == "slow_start" && hasVal:
			p.SlowStart, err = l.paramDuration(d, name, val, true)
		case a == "down":
			p.Down, p.Drain = true, false // one setting in nginx: the last written holds
		case a == "drain":
			p.Down, p.Drain = false, true
		case a == "backup":
			p.Backup = true
		case a == "resolve" || name == "service":
			l.warn(d, "%s: not converted: nginx keeps resolving the name (its addresses, or its SRV records with service=) and balances over what it finds; lbpack balances the server as one, which Caddy and Traefik dial by its name", a)
		case name == "route" && hasVal:
			p.Route, err = stickyPeerRoute(d, val)
		default:
			return errorf(d.Pos, "server %s: invalid parameter %q", d.Args[0], a)
		}
		if err != nil {
			return err
		}
	}
	if p.FailTimeout == 0 {
		// nginx counts failures and keeps a failed server out for the rest
		// of the second its clock is in; lbpack's fail_timeout is
		// positive, and a second is nginx's granularity.
		if p.MaxFails > 0 {
			l.warn(d, "fail_timeout=0: nginx keeps a failed server out until its clock's next second; lbpack takes a positive time: written as 1s")
		}
		p.FailTimeout = time.Second
	}
	for _, o := range u.Servers {
		if o.Addr == p.Addr {
			return errorf(d.Pos, "server %s: the same address as the server at %s (lbpack identifies servers by address)", p.Addr, o.Pos)
		}
	}
	u.Servers = append(u.Servers, p)
	return nil
}

// peerAddr normalizes an upstream server address to host:port (port 80 when
// none is written).
func peerAddr(a string) (string, error) {
	if strings.HasPrefix(a, "unix:") {
		return "", fmt.Errorf("a unix socket: lbpack's policies balance host:port addresses only")
	}
	if strings.Contains(a, "://") || strings.Contains(a, "/") {
		return "", fmt.Errorf("want host[:port]")
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		// No port: the whole is the host (an IPv6 address in brackets or not).
		host, port = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), "80"
	}
	if host == "" {
		return "", fmt.Errorf("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q: want 1 to 65535", port)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.String()
	}
	return net.JoinHostPort(host, port), nil
}

// server reads a server block.
func (l *loader) server(d *Directive, parent *scope) error {
	sc := parent.child()
	s := &Site{Pos: d.Pos}
	var locs []*Directive
	var unix *Directive // a listen on a unix socket, which no host takes
	for _, c := range d.Block {
		ok, err := l.inherited(c, sc, "server")
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		switch c.Name {
		case "listen":
			ln, err := l.listen(c)
			if err != nil {
				return err
			}
			if ln != nil {
				s.Listens = append(s.Listens, *ln)
			} else if unix == nil {
				unix = c
			}
		case "server_name":
			for _, n := range c.Args {
				switch {
				case n == "_" || n == "":
				case strings.HasPrefix(n, "~"):
					l.warn(c, "%s: regular expression server names are not converted", n)
				case strings.HasPrefix(n, "."):
					s.Names = append(s.Names, n[1:], "*"+n)
				default:
					s.Names = append(s.Names, strings.ToLower(n))
				}
			}
		case "location":
			locs = append(locs, c)
		case "return":
			r, err := parseReturn(c)
			if err != nil {
				return err
			}
			s.Return = r
		default:
			l.warn(c, "not converted")
		}
	}
	if len(s.Listens) == 0 && unix != nil {
		// nginx's default (port 80 on every interface) would open to the
		// network what nginx served on a local socket only.
		return errorf(unix.Pos, "listen %s: this server listens on unix sockets only, which Caddy and Traefik do not take; converted, it would listen on port 80 of every interface: remove the server block, or give it a listen on a loopback address (listen 127.0.0.1:PORT)", unix.Args[0])
	}
	if len(s.Listens) == 0 {
		s.Listens = []Listen{{Port: "80", Pos: d.Pos}}
	}
	s.RealIP = sc.realIP
	if s.Return != nil && len(locs) > 0 {
		l.warn(locs[0], "the server's own return answers every request before a location is chosen: its locations are not converted")
		locs = nil
	}
	for _, c := range locs {
		if err := l.location(s, c, sc); err != nil {
			return err
		}
	}
	l.c.Sites = append(l.c.Sites, s)
	return nil
}

// listen reads a listen directive; nil when it cannot be carried over.
func (l *loader) listen(d *Directive) (*Listen, error) {
	if len(d.Args) == 0 {
		return nil, errorf(d.Pos, "listen: missing the address")
	}
	a := d.Args[0]
	if strings.HasPrefix(a, "unix:") {
		l.warn(d, "%s: unix sockets are not converted", a)
		return nil, nil
	}
	ln := &Listen{Pos: d.Pos}
	if n, err := strconv.Atoi(a); err == nil {
		ln.Port = strconv.Itoa(n)
	} else if host, port, err := net.SplitHostPort(a); err == nil {
		ln.Host, ln.Port = host, port
	} else {
		ln.Host, ln.Port = strings.Trim(a, "[]"), "80"
	}
	if ln.Host == "*" || ln.Host == "0.0.0.0" || ln.Host == "::" {
		ln.Host = ""
	}
	if n, err := strconv.Atoi(ln.Port); err != nil || n < 1 || n > 65535 {
		return nil, errorf(d.Pos, "listen %s: port %q: want 1 to 65535", a, ln.Port)
	}
	for _, p := range d.Args[1:] {
		switch {
		case p == "ssl":
			ln.SSL = true
			l.warn(d, "ssl: the site becomes https://; Caddy manages its certificates unless given a tls directive")
		case p == "default_server" || p == "default":
			ln.DefaultServer = true
		case p == "http2" || p == "reuseport" || strings.HasPrefix(p, "backlog=") || strings.HasPrefix(p, "ipv6only="):
			// Caddy speaks HTTP/2 and sizes its sockets itself.
		default:
			l.warn(d, "%s: not converted", p)
		}
	}
	return ln, nil
}

// location reads a location block and the ones nested in it.
func (l *loader) location(s *Site, d *Directive, parent *scope) error {
	loc := &Location{Pos: d.Pos}
	switch len(d.Args) {
	case 1:
		loc.Path = d.Args[0]
		if strings.HasPrefix(loc.Path, "@") {
			l.warn(d, "%s: named locations are not converted", loc.Path)
			return nil
		}
	case 2:
		loc.Modifier, loc.Path = d.Args[0], d.Args[1]
		switch loc.Modifier {
		case "=", "^~", "~", "~*":
		default:
			return errorf(d.Pos, "location: unknown modifier %q", loc.Modifier)
		}
	default:
		return errorf(d.Pos, "location: want [modifier] path")
	}
	sc := parent.child()
	var nested []*Directive
	var pass *Directive
	for _, c := range d.Block {
		ok, err := l.inherited(c, sc, "location")
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		switch c.Name {
		case "proxy_pass":
			pass = c
		case "location":
			nested = append(nested, c)
		case "return":
			r, err := parseReturn(c)
			if err != nil {
				return err
			}
			loc.Return = r
		default:
			l.warn(c, "not converted")
		}
	}
	loc.AddHeaders = sc.addHeaders
	if pass != nil {
		p, name, err := l.proxyPass(pass, sc)
		if err != nil {
			return err
		}
		if p != nil {
			loc.Proxy = p
			l.proxies = append(l.proxies, p)
			l.proxyTo = append(l.proxyTo, name)
		}
	}
	if loc.Proxy != nil || loc.Return != nil {
		s.Locations = append(s.Locations, loc)
	} else {
		l.warn(d, "%s: neither proxies nor returns: not converted", strings.TrimSpace(loc.Modifier+" "+loc.Path))
	}
	for _, c := range nested {
		if err := l.location(s, c, sc); err != nil {
			return err
		}
	}
	return nil
}

// proxyPass reads proxy_pass; the name is the upstream it may refer to.
func (l *loader) proxyPass(d *Directive, sc *scope) (*Proxy, string, error) {
	if len(d.Args) != 1 {
		return nil, "", errorf(d.Pos, "proxy_pass: want one URL")
	}
	raw := d.Args[0]
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return nil, "", errorf(d.Pos, "proxy_pass %s: want http:// or https:// and a host", raw)
	}
	if strings.Contains(rest, "$") {
		l.warn(d, "%s: a proxy_pass with variables is not converted", raw)
		return nil, "", nil
	}
	hostport, uri, hasURI := strings.Cut(rest, "/")
	p := &Proxy{Pos: d.Pos, Scheme: scheme, Host: hostport, Retry: sc.retry, ConnectTimeout: sc.connect,
		ReadTimeout: sc.read, SendTimeout: sc.send, SetHeaders: sc.setHeaders, TLS: sc.tls}
	if err := checkTLS(p); err != nil {
		return nil, "", err
	}
	if hasURI {
		p.URI = "/" + uri
	}
	if p.Retry.Conditions == nil {
		p.Retry.Conditions = []string{"error", "timeout"}
	}
	if !strings.ContainsAny(hostport, ":[") {
		// An upstream name (Load resolves it: a later block may define it),
		// or else a host on the scheme's port, as nginx takes it.
		p.Addr = hostport + ":" + map[string]string{"http": "80", "https": "443"}[scheme]
		return p, hostport, nil
	}
	addr, err := peerAddr(hostport)
	if err != nil {
		return nil, "", errorf(d.Pos, "proxy_pass %s: %v", raw, err)
	}
	p.Addr = addr
	return p, "", nil
}

// checkTLS refuses the proxy_ssl_ settings nginx refuses for an https
// proxy_pass, and what the hosts cannot read (variables in file names).
func checkTLS(p *Proxy) error {
	t := p.TLS
	switch {
	case p.Scheme != "https":
		return nil
	case t.Verify && t.Trusted == "":
		return errorf(p.Pos, "proxy_ssl_verify on: no proxy_ssl_trusted_certificate (nginx refuses it too)")
	case t.Cert != "" && t.Key == "":
		return errorf(t.CertPos, "proxy_ssl_certificate %s: no proxy_ssl_certificate_key (nginx refuses it too)", t.Cert)
	case strings.Contains(t.Cert+t.Key+t.Trusted, "$"):
		return errorf(p.Pos, "proxy_ssl_ certificate files with variables are not converted (%s %s %s)", t.Trusted, t.Cert, t.Key)
	}
	return nil
}

func parseReturn(d *Directive) (*Return, error) {
	if len(d.Args) == 0 || len(d.Args) > 2 {
		return nil, errorf(d.Pos, "return: want a code and optionally a text or URL")
	}
	code, err := strconv.Atoi(d.Args[0])
	if err != nil || code < 100 || code > 999 {
		return nil, errorf(d.Pos, "return %s: want a status code", d.Args[0])
	}
	r := &Return{Code: code}
	if len(d.Args) == 2 {
		if r.Text, err = parseKey(d.Args[1], d.Pos); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// markDefaults marks the default server of each port: the one whose listen
// says default_server, else the first to listen on it.
func markDefaults(sites []*Site) {
	ports := map[string]*Site{}
	explicit := map[string]bool{}
	for _, s := range sites {
		for _, ln := range s.Listens {
			if ln.DefaultServer && !explicit[ln.Port] {
				ports[ln.Port], explicit[ln.Port] = s, true
			} else if ports[ln.Port] == nil {
				ports[ln.Port] = s
			}
		}
	}
	for _, s := range ports {
		s.Default = true
	}
}

// intArg reads a directive's one integer argument, at least min.
func intArg(d *Directive, min int) (int, error) {
	if len(d.Args) != 1 {
		return 0, errorf(d.Pos, "%s: want one number", d.Name)
	}
	return paramInt(d, d.Name, d.Args[0], min)
}

func paramInt(d *Directive, name, v string, min int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		return 0, errorf(d.Pos, "%s=%s: want a whole number of at least %d", name, v, min)
	}
	return n, nil
}

// durationArg reads a directive's one time argument, in nginx's
// milliseconds syntax (proxy_connect_timeout 500ms).
func (l *loader) durationArg(d *Directive) (time.Duration, error) {
	if len(d.Args) != 1 {
		return 0, errorf(d.Pos, "%s: want one time", d.Name)
	}
	return l.paramDuration(d, d.Name, d.Args[0], false)
}

// maxDuration is the longest time lbpack holds (about 292 years, Go's
// time.Duration); nginx takes longer ones.
const maxDuration = 2562047 * time.Hour

// paramDuration reads an nginx time as nginx does (see nginxTime): in whole
// seconds for a server's parameters (isSec: fail_timeout=10s, not 500ms),
// else in milliseconds. A time longer than lbpack holds is written as
// maxDuration, with a warning.
func (l *loader) paramDuration(d *Directive, name, v string, isSec bool) (time.Duration, error) {
	n, ok := nginxTime(v, isSec)
	if !ok {
		if isSec {
			return 0, errorf(d.Pos, "%s=%s: want a time in seconds such as 10s or 1m30s", name, v)
		}
		return 0, errorf(d.Pos, "%s=%s: want a time such as 10s or 500ms", name, v)
	}
	unit := time.Millisecond
	if isSec {
		unit = time.Second
	}
	if n > int64(maxDuration/unit) {
		l.warn(d, "%s=%s: longer than lbpack holds: written as %s (about 292 years)", name, v, caddyDuration(maxDuration))
		return maxDuration, nil
	}
	return time.Duration(n) * unit, nil
}

// nginxTime reads an nginx time as nginx's ngx_parse_time does: numbers
// with the units y, M, w, d, h, m, s (and ms unless isSec) in that order,
// spaces between them, a number without a unit (seconds) last, every part
// and the sum within 63 bits; times in milliseconds take no y or M. It
// returns the time in seconds (isSec) or milliseconds.
func nginxTime(v string, isSec bool) (int64, bool) {
	const maxInt = int64(^uint64(0) >> 1)
	units := []struct {
		name  string
		scale int64 // seconds
	}{{"y", 365 * 86400}, {"M", 30 * 86400}, {"w", 7 * 86400}, {"d", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}, {"ms", 0}, {" ", 1}}
	step := 0 // the index of the next unit allowed
	if !isSec {
		step = 2
	}
	var total, value int64
	valid := false
	for i := 0; i < len(v); {
		if c := v[i]; c >= '0' && c <= '9' {
			if value > (maxInt-int64(c-'0'))/10 {
				return 0, false
			}
			value = value*10 + int64(c-'0')
			valid = true
			i++
			continue
		}
		u := -1
		for k := step; k < len(units); k++ {
			if strings.HasPrefix(v[i:], units[k].name) && (units[k].name != "m" || !strings.HasPrefix(v[i:], "ms")) {
				u = k
				break
			}
		}
		switch {
		case u < 0 || units[u].name == "ms" && isSec:
			return 0, false
		case units[u].name == " " && step > 6:
			return 0, false // a bare number after seconds
		case units[u].name == " ":
			step = len(units) // a bare number ends the time
		default:
			step = u + 1
		}
		i += len(units[u].name)
		scale := units[u].scale
		if !isSec {
			scale *= 1000
		}
		if units[u].name == "ms" {
			scale = 1
		}
		if value > maxInt/scale || total > maxInt-value*scale {
			return 0, false
		}
		total += value * scale
		value = 0
		for i < len(v) && v[i] == ' ' {
			i++
		}
	}
	if !valid {
		return 0, false
	}
	if !isSec {
		if value > maxInt/1000 {
			return 0, false
		}
		value *= 1000
	}
	if total > maxInt-value {
		return 0, false
	}
	return total + value, true
}

// prefix parses an address or a CIDR range.
func prefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// sortedKeys returns a map's keys in order.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
