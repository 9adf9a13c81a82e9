package nginxconf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// traefikPlugin returns the lines of the first middleware's plugin
// settings from strategy up to (not including) maxFails.
func traefikPlugin(out string) string {
	start := strings.Index(out, "          strategy:")
	end := strings.Index(out, "          maxFails:")
	if start < 0 || end < start {
		return ""
	}
	return out[start:end]
}

// policy is the lb_policy block a TestSticky case expects: its head, its
// lines (nested ones with a leading tab), then nginx's default failure
// settings.
func policy(head string, lines ...string) string {
	lines = append(lines, "# nginx's max_fails and fail_timeout (1 and 10s unless written)", "max_fails 1", "fail_timeout 10s")
	return "lb_policy " + head + " {\n\t\t\t\t" + strings.Join(lines, "\n\t\t\t\t") + "\n\t\t\t}"
}

// plugin is the plugin's settings a TestSticky case expects, each line
// indented as the middleware's keys are.
func plugin(lines ...string) string {
	return "          " + strings.Join(lines, "\n          ") + "\n"
}

// TestSticky: sticky in its three forms, drain and route= become the
// hosts' options, exactly; each case also names the warnings Load gives,
// exactly.
func TestSticky(t *testing.T) {
	two := []string{"servers:", "  - url: http://10.0.0.1:80", "  - url: http://10.0.0.2:80"}
	one := []string{"servers:", "  - url: http://10.0.0.1:80"}
	with := func(head []string, tail []string) []string { return append(append([]string(nil), head...), tail...) }
	cases := []struct {
		name, upstream string
		caddy          string // the lb_policy block
		retries        string // the lb_retries line, "" none
		traefik        string // the plugin's settings from strategy to the servers' end
		warnings       string
	}{
		{"cookie with every attribute, in nginx's written order whatever the configured one",
			" sticky cookie srv_id path=/app samesite=lax secure httponly domain=example.com expires=30m;\n server 10.0.0.1:80;\n server 10.0.0.2:80;",
			policy("smooth_wrr", "# sticky (nginx.conf:3)", "sticky cookie srv_id {", "\texpires 30m", "\tdomain example.com", "\tpath /app", "\thttponly", "\tsecure", "\tsamesite lax", "}"),
			"lb_retries 1",
			plugin(with([]string{"strategy: smooth_wrr", "# sticky (nginx.conf:3)", "sticky:", "  cookie:", "    name: srv_id", "    maxAge: 1800",
				"    domain: example.com", "    path: /app", "    httpOnly: true", "    secure: true", "    sameSite: lax"}, two)...), ""},
		{"cookie with samesite in capitals, as written", " least_conn;\n sticky cookie srv samesite=Lax;\n server 10.0.0.1:80;\n server 10.0.0.2:80;",
			policy("weighted_least_conn", "# sticky (nginx.conf:4)", "sticky cookie srv {", "\tsamesite Lax", "}"), "lb_retries 1",
			plugin(with([]string{"strategy: least_conn", "# sticky (nginx.conf:4)", "sticky:", "  cookie:", "    name: srv", "    sameSite: Lax"}, two)...), ""},
		{"cookie name alone", " ip_hash;\n sticky cookie srv;\n server 10.0.0.1:80;\n server 10.0.0.2:80;",
			policy("nginx_ip_hash", "# sticky (nginx.conf:4)", "sticky cookie srv"), "lb_retries 1",
			plugin(with([]string{"strategy: ip_hash", "# sticky (nginx.conf:4)", "sticky:", "  cookie:", "    name: srv"}, two)...), ""},
		{"expires=max, a domain YAML must quote", " sticky cookie srv expires=max domain=.example.com secure samesite=strict;\n server 10.0.0.1:80;",
			policy("smooth_wrr", "# sticky (nginx.conf:3)", "sticky cookie srv {", "\texpires max", "\tdomain .example.com", "\tsecure", "\tsamesite strict", "}"), "",
			plugin(with([]string{"strategy: smooth_wrr", "# sticky (nginx.conf:3)", "sticky:", "  cookie:", "    name: srv", "    expires: max",
				`    domain: ".example.com"`, "    secure: true", "    sameSite: strict"}, one)...), ""},
		{"expires=2145916555 is nginx's marker for max", " sticky cookie srv expires=2145916555;\n server 10.0.0.1:80;",
			policy("smooth_wrr", "# sticky (nginx.conf:3)", "sticky cookie srv {", "\texpires max", "}"), "",
			plugin(with([]string{"strategy: smooth_wrr", "# sticky (nginx.conf:3)", "sticky:", "  cookie:", "    name: srv", "    expires: max"}, one)...), ""},
		{"expires=0: expires now, max-age=0", " sticky cookie srv expires=0;\n server 10.0.0.1:80;",
			policy("smooth_wrr", "# sticky (nginx.conf:3)", "sticky cookie srv {", "\texpires 0", "}"), "",
			plugin(with([]string{"strategy: smooth_wrr", "# sticky (nginx.conf:3)", "sticky:", "  cookie:", "    name: srv", "    maxAge: -1"}, one)...), ""},
		{"expires in combined units", " sticky cookie srv expires=1w1d12h;\n server 10.0.0.1:80;",
			policy("smooth_wrr", "# sticky (nginx.conf:3)", "sticky cookie srv {", "\texpires 8d12h", "}"), "",
			plugin(with([]string{"strategy: smooth_wrr", "# sticky (nginx.conf:3)", "sticky:", "  cookie:", "    name: srv", "    maxAge: 734400"}, one)...), ""},
		{"expires in bare seconds", " sticky cookie srv expires=3661;\n server 10.0.0.1:80;",
			policy("smooth_wrr", "# sticky (nginx.conf:3)", "sticky cookie srv {", "\texpires 1h1m1s", "}"), "",
			plugin(with([]string{"strategy: smooth_wrr", "# sticky (nginx.conf:3)", "sticky:", "  cookie:", "    name: srv", "    maxAge: 3661"}, one)...), ""},
		{"route: query, cookie and header sources; route= and drain",
			" hash $arg_k;\n sticky route $arg_route $cookie_Route $http_X_ROUTE_id;\n server 10.0.0.1:80 route=one;\n server 10.0.0.2:80 route=2;\n server 10.0.0.3:80 drain route=three;",
			policy("url_hash", "key {nginx.arg_k}", "mode modulo", "drain 10.0.0.3:80", "route 10.0.0.1:80 one", "route 10.0.0.2:80 2", "route 10.0.0.3:80 three",
				"# sticky (nginx.conf:4)", "sticky route query:route cookie:Route header:X-Route-Id"),
			"lb_retries 1",
			plugin("strategy: url_hash", "hashKey: query:k", "hashMode: modulo", "# sticky (nginx.conf:4)", "sticky:", `  route: ["query:route", "cookie:Route", "header:X-Route-Id"]`,
				"servers:", "  - url: http://10.0.0.1:80", "    route: one", "  - url: http://10.0.0.2:80", `    route: "2"`, "  - url: http://10.0.0.3:80", "    drain: true", "    route: three"), ""},
		{"learn from the upstream's cookie and header, a 32k zone",
			" hash $arg_k consistent;\n sticky learn create=$upstream_cookie_sess create=$upstream_http_x_session lookup=$cookie_sess lookup=$arg_sid zone=sessions:32k timeout=2s header;\n server 10.0.0.1:80;\n server 10.0.0.2:80;",
			policy("url_hash", "key {nginx.arg_k}", "mode ketama", "# sticky (nginx.conf:4)", "sticky learn {", "\tcreate upstream_cookie:sess", "\tcreate upstream_header:X-Session",
				"\tlookup cookie:sess", "\tlookup query:sid", "\ttimeout 2s", "\theader",
				"\t# zone=sessions:32k: as many sessions as nginx's zone holds by its note (1m, about 8000)", "\tmax_sessions 250", "}"),
			"lb_retries 1",
			plugin(with([]string{"strategy: url_hash", "hashKey: query:k", "hashMode: ketama", "# sticky (nginx.conf:4)", "sticky:", "  learn:",
				`    create: ["upstream_cookie:sess", "upstream_header:X-Session"]`, `    lookup: ["cookie:sess", "query:sid"]`, "    timeout: 2s", "    header: true",
				"    # zone=sessions:32k: as many sessions as nginx's zone holds by its note (1m, about 8000)", "    maxSessions: 250"}, two)...), ""},
		{"learn with nginx's default timeout, a 1m zone, a request cookie to create",
			" sticky learn create=$cookie_app lookup=$cookie_app zone=z:1M;\n server 10.0.0.1:80;\n server app.internal:80;",
			policy("smooth_wrr", "# sticky (nginx.conf:3)", "sticky learn {", "\tcreate cookie:app", "\tlookup cookie:app",
				"\t# zone=z:1M: as many sessions as nginx's zone holds by its note (1m, about 8000)", "\tmax_sessions 8000", "}"),
			"lb_retries 1",
			plugin("strategy: smooth_wrr", "# sticky (nginx.conf:3)", "sticky:", "  learn:", `    create: ["cookie:app"]`, `    lookup: ["cookie:app"]`,
				"    # zone=z:1M: as many sessions as nginx's zone holds by its note (1m, about 8000)", "    maxSessions: 8000",
				"servers:", "  - url: http://10.0.0.1:80", "  - url: http://app.internal:80"),
			"nginx.conf:5: server: app.internal:80 is a name: nginx resolves it once and balances over each of its addresses, Caddy and Traefik dial the name\n"},
		{"down and drain: the last written holds; drain counts for no retry",
			" server 10.0.0.1:80 down drain;\n server 10.0.0.2:80 drain down;\n server 10.0.0.3:80;\n server 10.0.0.4:80;",
			policy("smooth_wrr", "down 10.0.0.2:80", "drain 10.0.0.1:80"), "lb_retries 1",
			plugin("strategy: smooth_wrr", "servers:", "  - url: http://10.0.0.1:80", "    drain: true", "  - url: http://10.0.0.2:80", "    down: true",
				"  - url: http://10.0.0.3:80", "  - url: http://10.0.0.4:80"), ""},
		{"sticky written before the method: dropped, as nginx drops it", " sticky cookie srv;\n least_conn;\n server 10.0.0.1:80;\n server 10.0.0.2:80;",
			policy("weighted_least_conn"), "lb_retries 1", plugin(with([]string{"strategy: least_conn"}, two)...),
			`nginx.conf:3: sticky: written before least_conn (nginx.conf:4): nginx drops it without an error (the method replaces it; nginx only warns "load balancing method redefined"), so it binds no client to a server; converted the same, without sticky sessions, so that each request goes where nginx sends it; to have them, write sticky after least_conn` + "\n"},
		{"least_time and sticky: fair binds as nginx's least_time does",
			" least_time last_byte;\n sticky cookie srv;\n server 10.0.0.1:80;\n server app.internal:80;\n server app2.internal:80 route=b;",
			policy("fair", "route app2.internal:80 b", "# sticky (nginx.conf:4)", "sticky cookie srv"), "lb_retries 2",
			plugin("strategy: fair", "# sticky (nginx.conf:4)", "sticky:", "  cookie:", "    name: srv", "servers:", "  - url: http://10.0.0.1:80",
				"  - url: http://app.internal:80", "  - url: http://app2.internal:80", "    route: b"),
			"nginx.conf:3: least_time: converted to lbpack's fair policy; " + fairVersusLeastTime + "\n" +
				"nginx.conf:6: server: app.internal:80 is a name: nginx resolves it once and balances over each of its addresses, Caddy and Traefik dial the name\n" +
				"nginx.conf:6: server: app.internal:80: sticky: nginx's id for this server is the MD5 of each address the name resolves to (IP:PORT), lbpack's the MD5 of app.internal:80: the ids nginx gave out for it bind no one after the move; give the server a route= (in nginx first) to keep them\n" +
				"nginx.conf:7: server: app2.internal:80 is a name: nginx resolves it once and balances over each of its addresses, Caddy and Traefik dial the name\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustLoad(t, site("upstream u {\n"+c.upstream+"\n}"))
			checkHostsTake(t, cfg)
			if got := warningsText(sortWarnings(cfg.Warnings)); got != c.warnings {
				t.Errorf("warnings:\n%s\nwant:\n%s", got, c.warnings)
			}
			caddy, _ := cfg.Caddyfile()
			if got := strings.TrimSpace(section(string(caddy), "lb_policy")); got != c.caddy {
				t.Errorf("Caddy:\n%s\nwant:\n%s", got, c.caddy)
			}
			if got := strings.TrimSpace(section(string(caddy), "lb_retries")); got != c.retries {
				t.Errorf("Caddy: %q, want %q", got, c.retries)
			}
			traefik, _ := cfg.Traefik()
			if got := traefikPlugin(string(traefik)); got != c.traefik {
				t.Errorf("Traefik:\n%s\nwant:\n%s", got, c.traefik)
			}
		})
	}
}

// checkHostsTake checks what the converter writes for sticky by package
// sticky's rules, which both hosts apply to their options: the cookie
// validates, every source parses back to itself.
func checkHostsTake(t *testing.T, cfg *Config) {
	t.Helper()
	for _, u := range cfg.Upstreams {
		st := u.Sticky
		if st == nil {
			continue
		}
		var srcs []string
		switch {
		case st.Cookie != nil:
			if err := st.Cookie.Validate(); err != nil {
				t.Errorf("upstream %s: %v", u.Name, err)
			}
		case st.Learn != nil:
			srcs = append(append(srcs, st.Learn.Create...), st.Learn.Lookup...)
		default:
			srcs = st.Route
		}
		for _, s := range srcs {
			if src, err := sticky.ParseSource(s); err != nil || src.String() != s {
				t.Errorf("upstream %s: source %s: %v, reads back as %s", u.Name, s, err, src)
			}
		}
	}
}

// TestNginxSeconds: the expires= the converter writes for Caddy reads back
// as the same seconds by nginx's rules (sticky.ParseExpires).
func TestNginxSeconds(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{1, "1s"}, {59, "59s"}, {60, "1m"}, {90, "1m30s"}, {3600, "1h"}, {3661, "1h1m1s"}, {86400, "1d"}, {129600, "1d12h"},
		{31536000, "365d"}, {sticky.ExpiresMax - 1, "24836d23h55m54s"}} {
		got := nginxSeconds(c.n)
		back, err := sticky.ParseExpires(got)
		if got != c.want || err != nil || back != c.n {
			t.Errorf("%d: written %q (want %q), read back as %d, %v", c.n, got, c.want, back, err)
		}
	}
}

// TestStickyErrors: what nginx 1.31 refuses is refused at its file:line in
// nginx's own words; what lbpack cannot evaluate (variables nginx reads
// per request) is refused naming it.
func TestStickyErrors(t *testing.T) {
	cases := []struct{ upstream, want string }{
		// The directive and its mode.
		{"sticky cookie;", `nginx.conf:3: invalid number of arguments in "sticky" directive`},
		{"sticky route;", `nginx.conf:3: invalid number of arguments in "sticky" directive`},
		{"sticky hash $cookie_x;", `nginx.conf:3: unknown parameter "hash"`},
		{"sticky cookie a;\n sticky cookie b;", `nginx.conf:4: "sticky" directive is duplicate`},
		{"sticky cookie a;\n hash $arg_k;\n sticky route $arg_r;", `nginx.conf:5: "sticky" directive is duplicate`},
		// sticky cookie.
		{`sticky cookie "";`, `nginx.conf:3: "sticky" directive empty cookie name`},
		{"sticky cookie s domain=a.example domain=b.example;", `nginx.conf:3: "sticky" directive parameter "domain" is duplicate`},
		{"sticky cookie s domain=;", `nginx.conf:3: "sticky" directive no value for "domain"`},
		{"sticky cookie s path=/ path=/a;", `nginx.conf:3: "sticky" directive parameter "path" is duplicate`},
		{"sticky cookie s path=;", `nginx.conf:3: "sticky" directive no value for "path"`},
		{"sticky cookie s expires=1h expires=2h;", `nginx.conf:3: "sticky" directive parameter "expires" is duplicate`},
		{"sticky cookie s expires=1x;", `nginx.conf:3: "sticky" directive invalid "expires" parameter value`},
		{"sticky cookie s expires=500ms;", `nginx.conf:3: "sticky" directive invalid "expires" parameter value`},
		{"sticky cookie s expires=;", `nginx.conf:3: "sticky" directive invalid "expires" parameter value`},
		{"sticky cookie s expires=Max;", `nginx.conf:3: "sticky" directive invalid "expires" parameter value`},
		{"sticky cookie s httponly httponly;", `nginx.conf:3: "sticky" directive parameter "httponly" is duplicate`},
		{"sticky cookie s secure secure;", `nginx.conf:3: "sticky" directive parameter "secure" is duplicate`},
		{"sticky cookie s samesite=lax samesite=lax;", `nginx.conf:3: "sticky" directive parameter "samesite" is duplicate`},
		{"sticky cookie s samesite=foo;", `nginx.conf:3: "sticky" directive invalid "samesite" parameter value`},
		{"sticky cookie s samesite=;", `nginx.conf:3: "sticky" directive invalid "samesite" parameter value`},
		{"sticky cookie s max-age=10;", `nginx.conf:3: unknown parameter "max-age=10"`},
		{"sticky cookie s domain;", `nginx.conf:3: unknown parameter "domain"`},
		{"sticky cookie s domain=$host;", "nginx.conf:3: sticky cookie domain=$host: lbpack writes a fixed domain, where nginx evaluates the variables for each request: write the value itself"},
		{"sticky cookie s path=/$app;", "nginx.conf:3: sticky cookie path=/$app: a value from a variable is not supported"},
		{"sticky cookie s samesite=$arg_ss;", "nginx.conf:3: sticky cookie samesite=$arg_ss: lbpack writes a fixed samesite, where nginx evaluates the variables for each request: write the value itself"},
		// sticky route.
		{"sticky route route_cookie;", `nginx.conf:3: invalid variable name "route_cookie"`},
		{"sticky route $arg_r $;", `nginx.conf:3: invalid variable name "$"`},
		{"sticky route $remote_addr;", "nginx.conf:3: sticky route $remote_addr: lbpack cannot evaluate this variable: it reads $arg_NAME, $cookie_NAME or $http_NAME"},
		{"sticky route $arg_;", "nginx.conf:3: sticky route $arg_: lbpack cannot evaluate this variable: it reads $arg_NAME, $cookie_NAME or $http_NAME"},
		{"sticky route $upstream_cookie_s;", "nginx.conf:3: sticky route $upstream_cookie_s: read before the upstream answers, where nginx finds it empty: nothing would ever be looked up"},
		{"sticky route $http_x-route;", `nginx.conf:3: sticky route $http_x-route: '-' cannot be in the name lbpack reads`},
		{"sticky route ${arg_r};", `nginx.conf:3: sticky route ${arg_r}: lbpack cannot evaluate this variable: it reads $arg_NAME, $cookie_NAME or $http_NAME`},
		// sticky learn.
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s;", `nginx.conf:3: "sticky" directive "zone" parameter is not specified`},
		{"sticky learn lookup=$cookie_s zone=z:1m;", `nginx.conf:3: "sticky" directive "create" parameter is not specified`},
		{"sticky learn create=$upstream_cookie_s zone=z:1m;", `nginx.conf:3: "sticky" directive "lookup" parameter is not specified`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:16k;", `nginx.conf:3: "sticky" directive zone is too small`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1x;", `nginx.conf:3: "sticky" directive invalid zone size`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:;", `nginx.conf:3: "sticky" directive invalid zone size`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z;", `nginx.conf:3: "sticky" directive zone size is not specified`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=:1m;", `nginx.conf:3: "sticky" directive zone name is not specified`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1m zone=y:1m;", `nginx.conf:3: "sticky" directive duplicate zone`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1m timeout=0;", `nginx.conf:3: "sticky" directive invalid timeout`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1m timeout=1q;", `nginx.conf:3: "sticky" directive invalid timeout`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1m timeout=1s timeout=2s;", `nginx.conf:3: "sticky" directive duplicate timeout`},
		{"sticky learn create=sess lookup=$cookie_s zone=z:1m;", `nginx.conf:3: "sticky" directive missing variable in the "create" parameter`},
		{"sticky learn create=$upstream_cookie_s lookup= zone=z:1m;", `nginx.conf:3: "sticky" directive missing variable in the "lookup" parameter`},
		{"sticky learn create=$ lookup=$cookie_s zone=z:1m;", `nginx.conf:3: invalid variable name "$"`},
		{"sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1m inflight;", `nginx.conf:3: unknown parameter "inflight"`},
		{"sticky learn create=$request_id lookup=$cookie_s zone=z:1m;", "nginx.conf:3: sticky learn create= $request_id: lbpack cannot evaluate this variable: it reads $arg_NAME, $cookie_NAME, $http_NAME, $upstream_cookie_NAME or $upstream_http_NAME"},
		{"sticky learn create=$upstream_cookie_s lookup=$upstream_cookie_s zone=z:1m;", "nginx.conf:3: sticky learn lookup= $upstream_cookie_s: read before the upstream answers, where nginx finds it empty: nothing would ever be looked up"},
		// The server's parameters.
		{"server 10.0.0.1:80 route=;", "nginx.conf:3: route is empty"},
		{"server 10.0.0.1:80 route=" + strings.Repeat("r", 33) + ";", "nginx.conf:3: route is longer than 32"},
		{"server 10.0.0.1:80 route;", `nginx.conf:3: server 10.0.0.1:80: invalid parameter "route"`},
		{"server 10.0.0.1:80 drain=1;", `nginx.conf:3: server 10.0.0.1:80: invalid parameter "drain=1"`},
		{"hash $arg_k;\n sticky cookie srv;\n server 10.0.0.1:80;\n server 10.0.0.2:80 backup;", `nginx.conf:6: server 10.0.0.2:80: balancing method does not support parameter "backup" (nginx's hash takes no backup servers)`},
	}
	for _, c := range cases {
		up := c.upstream
		if !strings.Contains(up, "server ") {
			up += "\n server 10.0.0.1:80;"
		}
		_, err := load(t, site("upstream u {\n "+up+"\n}"))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s\nerror %v\nwant  %s", c.upstream, err, c.want)
		}
	}

	// A zone serves one upstream.
	for _, c := range []struct{ second, want string }{
		{"zone=z:1m", `nginx.conf:4: sticky zone "z" is already used in upstream "a"`},
		{"zone=z:2m", `nginx.conf:4: the size 2097152 of shared memory zone "z" conflicts with already declared size 1048576`},
	} {
		conf := "http {\nupstream a { sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1m; server 10.0.0.1:80; }\n" +
			"upstream b { server 10.0.0.2:80;\n sticky learn create=$upstream_cookie_s lookup=$cookie_s " + c.second + "; }\n" +
			"server { location /a { proxy_pass http://a; } location /b { proxy_pass http://b; } }\n}\n"
		if _, err := load(t, conf); err == nil || err.Error() != c.want {
			t.Errorf("%s\nerror %v\nwant  %s", c.second, err, c.want)
		}
	}
	// The longest route nginx takes.
	if _, err := load(t, site("upstream u {\n server 10.0.0.1:80 route="+strings.Repeat("r", 32)+";\n}")); err != nil {
		t.Errorf("route= of 32 bytes: %v", err)
	}
}

// TestStickyLearnShared: an upstream with sticky learn that several
// locations proxy to is warned of: one session table in nginx, one per
// location converted.
func TestStickyLearnShared(t *testing.T) {
	for _, c := range []struct {
		locations string
		want      string
	}{
		{"location /a { proxy_pass http://u; }", ""},
		{"location /a { proxy_pass http://u; } location /b { proxy_pass http://u; }",
			"nginx.conf:2: sticky: learn: 2 locations proxy to upstream u: nginx keeps one session table for it, the converted configuration one per location, so a session learned through one location binds no request of another\n"},
	} {
		conf := "http {\nupstream u { sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1m; server 10.0.0.1:80; }\nserver { " + c.locations + " }\n}\n"
		cfg := mustLoad(t, conf)
		if got := warningsText(cfg.Warnings); got != c.want {
			t.Errorf("%s: warnings\n%s\nwant\n%s", c.locations, got, c.want)
		}
	}
}

// stickyRecording is the part of a case of conformance/testdata/sticky the
// converter reads (README.md there has the schema).
type stickyRecording struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Location string `json:"location"`
	Servers  []struct {
		Address string `json:"address"`
		Down    bool   `json:"down"`
		Drain   bool   `json:"drain"`
		Route   string `json:"route"`
	} `json:"servers"`
	ConfigTest struct {
		OK       bool     `json:"ok"`
		Messages []string `json:"messages"`
	} `json:"config_test"`
}

// nginxMessage splits nginx -t's first message, "[emerg] MSG in
// PREFIX/nginx.conf:LINE", into MSG and LINE.
var nginxMessage = regexp.MustCompile(`^\[emerg\] (.*) in PREFIX/nginx\.conf:(\d+)$`)

// lbpackRefuses are the recorded configurations nginx takes and lbpack
// refuses: variables nginx evaluates per request in the cookie's
// attributes.
var lbpackRefuses = map[string]string{
	"attr_samesite_variable": "nginx.conf:14: sticky cookie samesite=$arg_ss: lbpack writes a fixed samesite",
	"attr_domain_variable":   "nginx.conf:14: sticky cookie domain=$arg_d: lbpack writes a fixed domain",
}

// TestStickyRecordings converts every case the recorder ran through nginx
// 1.31.4, its upstream block at the line it had there (13) in the smallest
// http block: what nginx refused is refused at the same line with nginx's
// message; what it took converts (but for lbpackRefuses), with each
// server's down, drain and route= as nginx took them, and sticky in both
// outputs unless written before the method (nginx drops it: so does the
// converter, with a warning).
func TestStickyRecordings(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "conformance", "testdata", "sticky", "*.json"))
	if err != nil || len(files) < 10 {
		t.Fatalf("recordings: %v, %d files", err, len(files))
	}
	seen, refused := 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fam struct {
			Cases []stickyRecording `json:"cases"`
		}
		if err := json.Unmarshal(data, &fam); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range fam.Cases {
			seen++
			conf := "http {" + strings.Repeat("\n", 12) + c.Upstream + "    server {\n        listen 8080;\n" + c.Location + "    }\n}\n"
			cfg, err := load(t, conf)
			if !c.ConfigTest.OK {
				refused++
				m := nginxMessage.FindStringSubmatch(c.ConfigTest.Messages[0])
				if m == nil {
					t.Fatalf("%s: nginx's message %q", c.Name, c.ConfigTest.Messages[0])
				}
				prefix := "nginx.conf:" + m[2] + ": "
				if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), m[1]) {
					t.Errorf("%s: nginx refused it (%s), the converter: %v\n%s", c.Name, c.ConfigTest.Messages[0], err, conf)
				}
				continue
			}
			if want, ok := lbpackRefuses[c.Name]; ok {
				if err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Errorf("%s: error %v, want %s", c.Name, err, want)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: nginx took it, the converter refuses it: %v\n%s", c.Name, err, conf)
				continue
			}
			checkHostsTake(t, cfg)
			checkRecordedServers(t, c, cfg)
		}
	}
	if seen < 70 || refused < 16 {
		t.Errorf("%d cases, %d refused by nginx: fewer than recorded", seen, refused)
	}
}

// checkRecordedServers checks a converted recording: every server's
// down, drain and route= in both outputs as nginx took them, and sticky
// in both unless written before the method.
func checkRecordedServers(t *testing.T, c stickyRecording, cfg *Config) {
	t.Helper()
	// The balancer both hosts build gives each server nginx's id.
	bal, err := core.New(coreConfig(cfg.Upstreams[0]))
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	for i, s := range c.Servers {
		want := s.Route
		if want == "" {
			want = core.StickyID(s.Address)
		}
		if got := bal.ID(i); got != want {
			t.Errorf("%s: server %s: id %q, want %q", c.Name, s.Address, got, want)
		}
	}
	// ... and sends no unbound request to a draining or down server.
	for k := 0; k < 20; k++ {
		i, ticket := core.Pick(bal, strconv.Itoa(k), core.Filter{})
		if i >= 0 && (c.Servers[i].Drain || c.Servers[i].Down) {
			t.Errorf("%s: an unbound request went to %s (drain %v, down %v)", c.Name, c.Servers[i].Address, c.Servers[i].Drain, c.Servers[i].Down)
		}
		core.Done(bal, i, ticket, time.Millisecond, false)
	}
	caddy, _ := cfg.Caddyfile()
	traefik, _ := cfg.Traefik()
	policy := unindent(section(string(caddy), "lb_policy"))
	for _, s := range c.Servers {
		checks := []struct {
			want bool
			line string
		}{{s.Drain, "drain " + s.Address}, {s.Route != "", "route " + s.Address + " " + s.Route}}
		for _, ck := range checks {
			if got := strings.Contains(policy, "\n"+ck.line+"\n"); got != ck.want {
				t.Errorf("%s: Caddy has %q: %v, want %v\n%s", c.Name, ck.line, got, ck.want, policy)
			}
		}
		down := strings.Contains(policy, "\ndown ") && strings.Contains(strings.SplitN(policy[strings.Index(policy, "\ndown "):], "\n", 3)[1]+" ", " "+s.Address+" ")
		if down != s.Down {
			t.Errorf("%s: Caddy has %s down: %v, want %v\n%s", c.Name, s.Address, down, s.Down, policy)
		}
		var entry string
		if i := strings.Index(string(traefik), "- url: http://"+s.Address+"\n"); i >= 0 {
			entry = string(traefik)[i:]
			if j := strings.Index(entry[1:], "- url:"); j >= 0 {
				entry = entry[:j+1]
			}
		}
		for _, ck := range []struct {
			want bool
			line string
		}{{s.Drain, "drain: true"}, {s.Down, "down: true"}, {s.Route != "", "route: " + yamlString(s.Route)}} {
			if got := strings.Contains(entry, "              "+ck.line+"\n"); got != ck.want {
				t.Errorf("%s: Traefik server %s has %q: %v, want %v\n%s", c.Name, s.Address, ck.line, got, ck.want, entry)
			}
		}
	}
	// nginx drops sticky written before the method directive.
	lines := strings.Split(c.Upstream, "\n")
	stickyAt, methodAt := -1, -1
	for i, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "sticky "):
			stickyAt = i
		case strings.HasPrefix(l, "hash ") || l == "least_conn;" || l == "ip_hash;":
			methodAt = i
		}
	}
	dropped := stickyAt < methodAt
	if got := strings.Contains(policy, "\nsticky "); got == dropped {
		t.Errorf("%s: Caddy has sticky: %v, nginx dropped it: %v\n%s", c.Name, got, dropped, policy)
	}
	if got := strings.Contains(string(traefik), "          sticky:\n"); got == dropped {
		t.Errorf("%s: Traefik has sticky: %v, nginx dropped it: %v", c.Name, got, dropped)
	}
	var warned bool
	for _, w := range cfg.Warnings {
		warned = warned || w.Directive == "sticky" && strings.Contains(w.Msg, "nginx drops it")
	}
	if warned != dropped {
		t.Errorf("%s: warned of sticky dropped: %v, want %v", c.Name, warned, dropped)
	}
}
