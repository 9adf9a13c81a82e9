package nginxconf

import (
	"strings"
	"testing"
	"testing/fstest"
)

// load parses and loads one nginx.conf held in memory.
func load(t *testing.T, conf string) (*Config, error) {
	t.Helper()
	ds, err := ParseFS(fstest.MapFS{"nginx.conf": {Data: []byte(conf)}}, "nginx.conf")
	if err != nil {
		return nil, err
	}
	return Load(ds)
}

// mustLoad is load for a configuration the test needs loaded.
func mustLoad(t *testing.T, conf string) *Config {
	t.Helper()
	cfg, err := load(t, conf)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// site wraps an upstream block in the smallest http block that uses it.
func site(upstream string) string {
	return "http {\n" + upstream + "\nserver { listen 8080; location / { proxy_pass http://u; } }\n}\n"
}

// section returns the lines of out from the first line containing start
// through the line, at the same indentation, that closes it.
func section(out, start string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.Contains(l, start) {
			continue
		}
		if !strings.HasSuffix(l, "{") {
			return l
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, "\t "))]
		for j := i + 1; j < len(lines); j++ {
			if lines[j] == indent+"}" {
				return strings.Join(lines[i:j+1], "\n")
			}
		}
		return l
	}
	return ""
}

func warningsText(ws []Warning) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.String() + "\n")
	}
	return b.String()
}

// TestCaddyPolicies: every nginx method and server parameter, and the
// reverse_proxy it becomes.
func TestCaddyPolicies(t *testing.T) {
	cases := []struct {
		name, upstream, want string
	}{
		{"round robin, weights, backup and down", `upstream u {
	server 10.0.0.1:80 weight=5;
	server 10.0.0.2:80 weight=3;
	server 10.0.0.3 weight=2 down;
	server [2001:db8::0001]:8080 backup;
}`, `reverse_proxy 10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 [2001:db8::1]:8080 {
			lb_policy smooth_wrr 5 3 2 1 {
				backup [2001:db8::1]:8080
				down 10.0.0.3:80
				# nginx's max_fails and fail_timeout (1 and 10s unless written)
				max_fails 1
				fail_timeout 10s
			}
			# proxy_next_upstream error timeout: each server at most once
			lb_retries 2
			lb_retry_match {
				method GET HEAD PUT DELETE OPTIONS TRACE
			}
			# nginx sends proxy_pass's host unless proxy_set_header Host says otherwise
			header_up Host u
		}`},
		{"least_conn with uniform failures and max_conns", `upstream u {
	least_conn;
	server 10.0.0.1:80 max_fails=3 fail_timeout=30s max_conns=100;
	server 10.0.0.2:80 max_fails=3 fail_timeout=30s slow_start=1m;
}`, `reverse_proxy 10.0.0.1:80 10.0.0.2:80 {
			lb_policy weighted_least_conn {
				slow_start 10.0.0.2:80 1m
				# nginx's max_fails and fail_timeout (1 and 10s unless written)
				max_fails 3
				fail_timeout 30s
				max_conns 10.0.0.1:80 100
			}
			# proxy_next_upstream error timeout: each server at most once
			lb_retries 1
			lb_retry_match {
				method GET HEAD PUT DELETE OPTIONS TRACE
			}
			# nginx sends proxy_pass's host unless proxy_set_header Host says otherwise
			header_up Host u
		}`},
		{"per-server max_fails and fail_timeout go to the policy", `upstream u {
	server 10.0.0.1:80 weight=5;
	server 10.0.0.2:80 weight=3 max_fails=2 fail_timeout=5s;
	server 10.0.0.3:80 max_fails=0;
}`, `reverse_proxy 10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 {
			lb_policy smooth_wrr 5 3 1 {
				max_fails 10.0.0.1:80 1
				fail_timeout 10.0.0.1:80 10s
				max_fails 10.0.0.2:80 2
				fail_timeout 10.0.0.2:80 5s
			}
			# proxy_next_upstream error timeout: each server at most once
			lb_retries 2
			lb_retry_match {
				method GET HEAD PUT DELETE OPTIONS TRACE
			}
			# nginx sends proxy_pass's host unless proxy_set_header Host says otherwise
			header_up Host u
		}`},
		{"ip_hash, max_fails=0 everywhere, keepalive", `upstream u {
	ip_hash;
	server 10.0.0.1:80 max_fails=0;
	server 10.0.0.2:80 max_fails=0 down;
	keepalive 32;
	keepalive_timeout 90s;
}`, `reverse_proxy 10.0.0.1:80 10.0.0.2:80 {
			lb_policy nginx_ip_hash {
				down 10.0.0.2:80
			}
			# nginx sends proxy_pass's host unless proxy_set_header Host says otherwise
			header_up Host u
			transport http {
				keepalive_idle_conns 32
				keepalive 1m30s
			}
		}`},
		{"hash consistent on a composite key", `upstream u {
	hash "$http_x_user_id/$cookie_sid:$request_uri{$remote_addr}" consistent;
	server 10.0.0.1:80;
	server 10.0.0.2:80;
}`, `lb_policy url_hash {
				key {http.request.header.X-User-Id}/{http.request.cookie.sid}:{http.request.orig_uri}\{{client_ip}\}
				mode ketama
				# nginx's max_fails and fail_timeout (1 and 10s unless written)
				max_fails 1
				fail_timeout 10s
			}`},
		{"hash modulo on a raw query argument", `upstream u {
	hash $arg_Key;
	server 10.0.0.1:80;
}`, `handle {
		map {http.request.uri.query} {nginx.arg_Key} {
			# $arg_Key: the raw argument, as nginx hashes it
			~(?:^|&)(?i:Key)=([^&]*) "${1}"
		}
		# proxy_pass (nginx.conf:6) to upstream u (nginx.conf:2)
		reverse_proxy 10.0.0.1:80 {
			lb_policy url_hash {
				key {nginx.arg_Key}
				mode modulo
				# nginx's max_fails and fail_timeout (1 and 10s unless written)
				max_fails 1
				fail_timeout 10s
			}
			# nginx sends proxy_pass's host unless proxy_set_header Host says otherwise
			header_up Host u
		}
	}`},
		{"random two least_conn", `upstream u {
	random two least_conn;
	server 10.0.0.1:80 weight=2;
	server 10.0.0.2:80;
}`, `lb_policy weighted_least_conn 2 1 {
				two_choices
				# nginx's max_fails and fail_timeout (1 and 10s unless written)
				max_fails 1
				fail_timeout 10s
			}`},
		{"random", `upstream u { random; server 10.0.0.1:80 weight=2; server 10.0.0.2:80; }`,
			`lb_policy smooth_wrr 2 1 {
				# nginx's max_fails and fail_timeout (1 and 10s unless written)
				max_fails 1
				fail_timeout 10s
			}`},
		{"least_time", `upstream u { least_time header; server 10.0.0.1:80; server 10.0.0.2:80; }`,
			`lb_policy fair {
				# nginx's max_fails and fail_timeout (1 and 10s unless written)
				max_fails 1
				fail_timeout 10s
			}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, site(c.upstream))
			if err != nil {
				t.Fatal(err)
			}
			out, _ := cfg.Caddyfile()
			first := strings.TrimSpace(strings.SplitN(c.want, "\n", 2)[0])
			if got := strings.TrimSpace(section(string(out), first)); got != strings.TrimSpace(c.want) {
				t.Errorf("got:\n%s\nwant:\n%s\nwhole output:\n%s", got, c.want, out)
			}
		})
	}
}

// TestCaddyRetries: proxy_next_upstream and its limits, inherited from
// http to server to location as nginx inherits them.
func TestCaddyRetries(t *testing.T) {
	up := "upstream u { server 10.0.0.1:80; server 10.0.0.2:80; server 10.0.0.3:80; server 10.0.0.4:80 backup; }\n"
	cases := []struct {
		name, http, server, location, want string
	}{
		{"off", "proxy_next_upstream off;", "", "", ""},
		{"tries caps the servers", "", "proxy_next_upstream_tries 2;", "", "lb_retries 1\nlb_retry_match {\nmethod GET HEAD PUT DELETE OPTIONS TRACE\n}"},
		{"statuses, non_idempotent, a timeout; the location's own replaces the server's", "proxy_next_upstream off;",
			"proxy_next_upstream_timeout 5s;", "proxy_next_upstream error http_502 http_404 non_idempotent;",
			"lb_retries 3\nlb_try_duration 5s\nlb_retry_match {\nmethod GET HEAD PUT DELETE OPTIONS TRACE POST LOCK PATCH\n}\n" +
				"lb_retry_match {\nexpression `{rp.status_code} in [502, 404]`\n}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conf := "http {\n" + c.http + up + "server { " + c.server + " location / { " + c.location + " proxy_pass http://u; } }\n}\n"
			cfg, err := load(t, conf)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := cfg.Caddyfile()
			got := unindent(string(out))
			if c.want == "" {
				if strings.Contains(got, "lb_retr") || strings.Contains(got, "lb_try") {
					t.Errorf("retries with proxy_next_upstream off:\n%s", out)
				}
				return
			}
			if !strings.Contains(got, "\n"+c.want+"\n") {
				t.Errorf("want:\n%s\nin:\n%s", c.want, out)
			}
		})
	}
}

// TestFailStatus: the statuses proxy_next_upstream names are failures of
// the server in nginx (towards max_fails; http_403 and http_404 never), so
// they become the Caddy policy's fail_status and the Traefik plugin's
// failStatus where failures are counted (in Traefik by the first server's
// max_fails, the plugin's one setting); fair counts 5xx already.
func TestFailStatus(t *testing.T) {
	cases := []struct {
		name, method, servers, next, caddy, traefik string
	}{
		{"the 5xx and 429 named, 403 and 404 left out", "", "server 10.0.0.1:80; server 10.0.0.2:80;",
			"error timeout http_500 http_502 http_403 http_404 http_429 http_502",
			"fail_status 500 502 429", "failStatus: 500,502,429"},
		{"nginx's default: error timeout", "", "server 10.0.0.1:80; server 10.0.0.2:80;", "", "", ""},
		{"only 403 and 404", "least_conn;", "server 10.0.0.1:80; server 10.0.0.2:80;", "error http_403 http_404", "", ""},
		{"no max_fails: nothing is counted", "", "server 10.0.0.1:80 max_fails=0; server 10.0.0.2:80 max_fails=0;", "error http_503", "", ""},
		{"max_fails on one server", "least_conn;", "server 10.0.0.1:80 max_fails=0; server 10.0.0.2:80 max_fails=2;", "error http_503", "fail_status 503", ""},
		{"off", "", "server 10.0.0.1:80; server 10.0.0.2:80;", "off", "", ""},
		{"fair counts 5xx already", "least_time header;", "server 10.0.0.1:80; server 10.0.0.2:80;", "error http_502 http_503", "", ""},
		{"fair is told of 429", "least_time header;", "server 10.0.0.1:80 max_fails=0; server 10.0.0.2:80 max_fails=0;", "error http_500 http_429", "fail_status 5xx 429", "failStatus: 5xx,429"},
	}
	lines := func(out, prefix string) string {
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, prefix) {
				got = append(got, l)
			}
		}
		return strings.Join(got, "\n")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := ""
			if c.next != "" {
				next = "proxy_next_upstream " + c.next + ";"
			}
			conf := "http {\nupstream u { " + c.method + " " + c.servers + " }\nserver { listen 8080; location / { " + next + " proxy_pass http://u; } }\n}\n"
			cfg, err := load(t, conf)
			if err != nil {
				t.Fatal(err)
			}
			caddy, _ := cfg.Caddyfile()
			if got := lines(section(string(caddy), "lb_policy"), "fail_status"); got != c.caddy {
				t.Errorf("Caddy, proxy_next_upstream %s: got %q, want %q in:\n%s", c.next, got, c.caddy, caddy)
			}
			traefik, _ := cfg.Traefik()
			if got := lines(string(traefik), "failStatus:"); got != c.traefik {
				t.Errorf("Traefik, proxy_next_upstream %s: got %q, want %q in:\n%s", c.next, got, c.traefik, traefik)
			}
		})
	}
}

// unindent drops every line's leading tabs.
func unindent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "\t")
	}
	return strings.Join(lines, "\n")
}

// TestCaddySites: listen, server_name, default servers, locations and the
// realip settings.
func TestCaddySites(t *testing.T) {
	conf := `http {
	set_real_ip_from 10.0.0.0/8;
	set_real_ip_from 2001:db8::/32;
	real_ip_header X-Forwarded-For;
	real_ip_recursive on;
	upstream u { server 10.0.0.1:80; }
	server {
		listen 127.0.0.1:8080;
		server_name example.com .example.org;
		location = /health { return 200 "ok"; }
		location /api/ { proxy_pass http://u; proxy_set_header X-Client $remote_addr; }
		location ~* \.php$ { proxy_pass http://127.0.0.1:9000; }
		location / { return 301 https://example.com$request_uri; }
	}
	server {
		listen 8080;
		server_name other.example;
		location / { proxy_pass https://u; }
	}
}
`
	cfg, err := load(t, conf)
	if err != nil {
		t.Fatal(err)
	}
	out, warnings := cfg.Caddyfile()
	want := `{
	servers {
		# set_real_ip_from (nginx.conf:3)
		trusted_proxies static 10.0.0.0/8 2001:db8::/32
		client_ip_headers X-Forwarded-For
		trusted_proxies_strict
	}
}

# server (nginx.conf:7)
http://example.com:8080, http://example.org:8080, http://*.example.org:8080, http://:8080 {
	bind 127.0.0.1
	# location = /health (nginx.conf:10)
	handle /health {
		respond ok 200
	}
	# location ~* \.php$ (nginx.conf:12)
	@location1 path_regexp (?i)\.php$
	handle @location1 {
		# proxy_pass (nginx.conf:12)
		reverse_proxy 127.0.0.1:9000 {
			# nginx sends proxy_pass's host unless proxy_set_header Host says otherwise
			header_up Host 127.0.0.1:9000
		}
	}
	# location /api/ (nginx.conf:11)
	handle /api/* {
		# proxy_pass (nginx.conf:11) to upstream u (nginx.conf:6)
		reverse_proxy 10.0.0.1:80 {
			lb_policy smooth_wrr {
				# nginx's max_fails and fail_timeout (1 and 10s unless written)
				max_fails 1
				fail_timeout 10s
			}
			# nginx sends proxy_pass's host unless proxy_set_header Host says otherwise
			header_up Host u
			header_up X-Client {client_ip}
		}
	}
	# location / (nginx.conf:13)
	handle {
		redir https://example.com{http.request.orig_uri} 301
	}
}

# server (nginx.conf:15)
http://other.example:8080 {
	# location / (nginx.conf:18)
	handle {
		# proxy_pass (nginx.conf:18) to upstream u (nginx.conf:6)
		reverse_proxy https://10.0.0.1:80 {
			lb_policy smooth_wrr {
				# nginx's max_fails and fail_timeout (1 and 10s unless written)
				max_fails 1
				fail_timeout 10s
			}
			# nginx sends proxy_pass's host unless proxy_set_header Host says otherwise
			header_up Host u
			transport http {
				tls
				# proxy_ssl_verify off (nginx's default): the upstream's certificate is not checked
				tls_insecure_skip_verify
			}
		}
	}
}
`
	if got := string(out); !strings.HasSuffix(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	ws := warningsText(warnings)
	if !strings.Contains(ws, "nginx.conf:12: location: ~* \\.php$: a regular expression") {
		t.Errorf("no warning for the regular expression location:\n%s", ws)
	}
}

// TestWarnings: what cannot be carried over names the directive and its
// place.
func TestWarnings(t *testing.T) {
	cases := []struct {
		name, conf string
		caddy      []string // in Caddyfile's warnings
		traefik    []string // in Traefik's warnings
	}{
		{"process settings and unknown directives", "worker_processes 4;\nevents { }\nhttp {\n gzip on;\n" +
			"upstream u { zone z 64k; server 10.0.0.1:80; sticky cookie s; }\nserver { access_log off; location / { proxy_pass http://u; proxy_buffering off; } }\n}\n",
			[]string{
				"nginx.conf:1: worker_processes: an nginx process setting",
				"nginx.conf:2: events: an nginx process setting",
				"nginx.conf:4: gzip: not converted",
				"nginx.conf:5: zone: not needed",
				"nginx.conf:6: access_log: not converted",
				"nginx.conf:6: proxy_buffering: not converted",
			}, nil},
		{"keys whose bytes differ", "http {\nupstream u {\n hash $uri$cookie_a consistent;\n server 10.0.0.1:80; }\nserver { location / { proxy_pass http://u; } }\n}\n",
			[]string{"nginx.conf:3: hash: $uri: Caddy's path is decoded", "nginx.conf:3: hash: $cookie_a: Caddy's cookie value"},
			[]string{"nginx.conf:3: hash: $uri$cookie_a: the plugin hashes one of"}},
		{"raw argument in Traefik", "http {\nupstream u {\n hash $arg_k;\n server 10.0.0.1:80; }\nserver { location / { proxy_pass http://u; } }\n}\n",
			nil, []string{"nginx.conf:3: hash: $arg_k: the plugin hashes the decoded argument"}},
		{"per-server failures in Traefik, resolve", "http {\nupstream u {\n least_time header;\n server 10.0.0.1:80 resolve;\n server 10.0.0.2:80 max_fails=3;\n}\n" +
			"server { location / { proxy_pass http://u; proxy_next_upstream error http_503; } }\n}\n",
			[]string{"nginx.conf:3: least_time: converted to lbpack's fair policy; fair is latency-aware by its own estimate",
				"nginx.conf:4: server: resolve: not converted: nginx keeps resolving the name"},
			[]string{"nginx.conf:5: server: 10.0.0.2:80: max_fails=3 fail_timeout=10s: the plugin has one setting", "nginx.conf:7: proxy_next_upstream: http_503: not retried"}},
		{"a host name, realip in Traefik", "http {\nreal_ip_header X-Real-IP;\nset_real_ip_from 10.0.0.1;\nupstream u { server app.internal:8080; }\nserver { location / { proxy_pass http://u; } }\n}\n",
			[]string{"nginx.conf:4: server: app.internal:8080 is a name"},
			[]string{"nginx.conf:3: real_ip_header: X-Real-IP: the plugin reads the client address from X-Forwarded-For only"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, c.conf)
			if err != nil {
				t.Fatal(err)
			}
			_, cw := cfg.Caddyfile()
			_, tw := cfg.Traefik()
			for _, pair := range []struct {
				host string
				got  string
				want []string
			}{{"caddy", warningsText(cw), c.caddy}, {"traefik", warningsText(tw), c.traefik}} {
				for _, w := range pair.want {
					if !strings.Contains(pair.got, w) {
						t.Errorf("%s warnings lack %q:\n%s", pair.host, w, pair.got)
					}
				}
			}
		})
	}
}

// TestTodaysNginx: least_time (open source since nginx 1.31.0) is
// converted to fair with a warning that says what differs, in words that
// are true of it; only random's least_time= is NGINX Plus's. Sticky, drain
// and route= (1.29.6): TestSticky.
func TestTodaysNginx(t *testing.T) {
	const fairSays = "fair is latency-aware by its own estimate (a decaying average of each server's answer times, times a penalty that doubles with each failure, 5xx answers included, stretched by its requests in flight), " +
		"where least_time averages times in 20 ms bands, multiplies them by connections and shares ties by round robin; " +
		"least_time takes a fast 5xx for a fast answer, so a server that fails fast gets many requests from nginx and few from fair; " +
		"header, last_byte and inflight have no setting: Caddy times an answer to its headers, the Traefik plugin to its end, and fair always counts requests in flight"
	cases := []struct {
		name, upstream string
		fair           bool   // converted to fair
		want           string // the one warning, exactly
	}{
		{"least_time header", " least_time header;\n server 10.0.0.1:80;\n server 10.0.0.2:80;", true,
			"nginx.conf:3: least_time: converted to lbpack's fair policy; " + fairSays},
		{"least_time last_byte inflight", " least_time last_byte inflight;\n server 10.0.0.1:80;\n server 10.0.0.2:80;", true,
			"nginx.conf:3: least_time: converted to lbpack's fair policy; " + fairSays},
		{"random two least_time=header", " random two least_time=header;\n server 10.0.0.1:80;\n server 10.0.0.2:80;", true,
			"nginx.conf:3: random: least_time=header (NGINX Plus only: open-source nginx's random, 1.31 included, takes least_conn only): converted to lbpack's fair policy, which chooses among all the servers, not two drawn at random; " + fairSays},
		{"service=", " server app.internal service=http;", false,
			"nginx.conf:3: server: service=http: not converted: nginx keeps resolving the name (its addresses, or its SRV records with service=) and balances over what it finds; lbpack balances the server as one, which Caddy and Traefik dial by its name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustLoad(t, site("upstream u {\n"+c.upstream+"\n}"))
			caddy, cw := cfg.Caddyfile()
			traefik, tw := cfg.Traefik()
			for _, pair := range []struct {
				host, out string
				ws        []Warning
				fair      string
			}{{"caddy", string(caddy), cw, "lb_policy fair"}, {"traefik", string(traefik), tw, "strategy: fair"}} {
				var found bool
				for _, w := range pair.ws {
					found = found || w.String() == c.want
					if strings.Contains(w.Msg, "NGINX Plus") && !strings.Contains(w.Msg, "least_time=") {
						t.Errorf("%s: calls an open-source feature NGINX Plus's: %s", pair.host, w)
					}
				}
				if !found {
					t.Errorf("%s warnings lack\n%s\nin\n%s", pair.host, c.want, warningsText(pair.ws))
				}
				if got := strings.Contains(pair.out, pair.fair); got != c.fair {
					t.Errorf("%s: %q in the output: %v, want %v\n%s", pair.host, pair.fair, got, c.fair, pair.out)
				}
			}
		})
	}
}

// TestTraefikClientAddr: hash $remote_addr becomes the plugin's clientip
// key without a warning: the plugin writes the client address as nginx
// writes $remote_addr, whatever the spelling in X-Forwarded-For.
func TestTraefikClientAddr(t *testing.T) {
	cfg, err := load(t, site("upstream u {\n hash $remote_addr;\n server 10.0.0.1:80;\n}"))
	if err != nil {
		t.Fatal(err)
	}
	out, warnings := cfg.Traefik()
	if !strings.Contains(string(out), "hashKey: clientip\n") {
		t.Errorf("no hashKey clientip in:\n%s", out)
	}
	if w := warningsText(warnings); strings.Contains(w, "remote_addr") {
		t.Errorf("a warning about $remote_addr, which the plugin hashes as nginx does:\n%s", w)
	}
}

// TestLoadErrors: bad input is an error with the file and line.
func TestLoadErrors(t *testing.T) {
	cases := []struct{ conf, want string }{
		{"events {}\n", "nginx.conf:1: no http block: nothing to convert"},
		{"http {\nupstream u { server 10.0.0.1:80; }\nupstream v { server 10.0.0.2:80; }\nserver { location / { proxy_pass http://u; } }\n}",
			"nginx.conf:3: upstream v: no proxy_pass uses it"},
		{site("upstream u {\n hash $binary_remote_addr;\n server 10.0.0.1:80;\n}"), `nginx.conf:3: "$binary_remote_addr": unknown variable $binary_remote_addr`},
		{site("upstream u {\n hash $arg_k$;\n server 10.0.0.1:80;\n}"), `nginx.conf:3: "$arg_k$": invalid variable name after $`},
		{site("upstream u {\n ip_hash;\n server 10.0.0.1:80;\n server 10.0.0.2:80 backup;\n}"), `nginx.conf:5: server 10.0.0.2:80: balancing method does not support parameter "backup" (nginx's ip_hash takes no backup servers)`},
		{site("upstream u {\n server 10.0.0.1:80 weight=0;\n}"), "nginx.conf:3: weight=0: want a whole number of at least 1"},
		{site("upstream u {\n server 10.0.0.1:80 wieght=2;\n}"), `nginx.conf:3: server 10.0.0.1:80: invalid parameter "wieght=2"`},
		{site("upstream u {\n server 10.0.0.1:80 fail_timeout=ten;\n}"), "nginx.conf:3: fail_timeout=ten: want a time in seconds such as 10s or 1m30s"},
		{site("upstream u {\n server unix:/run/app.sock;\n}"), "nginx.conf:3: server unix:/run/app.sock: a unix socket"},
		{site("upstream u {\n server 10.0.0.1:80;\n server 10.0.0.1;\n}"), "nginx.conf:4: server 10.0.0.1:80: the same address as the server at nginx.conf:3"},
		{site("upstream u { server 10.0.0.1:80; }\nupstream u { server 10.0.0.2:80; }"), "nginx.conf:3: upstream u: duplicate (first at nginx.conf:2)"},
		{site("upstream u {\n}"), "nginx.conf:2: upstream u: no servers"},
		{site("upstream u {\n hash;\n server 10.0.0.1:80;\n}"), "nginx.conf:3: hash: want a key and optionally consistent"},
		{site("upstream u {\n random three;\n server 10.0.0.1:80;\n}"), "nginx.conf:3: random: want nothing or two [method]"},
		{site("upstream u {\n random two least_time=first_byte;\n server 10.0.0.1:80;\n}"), `nginx.conf:3: random two: unknown method "least_time=first_byte"`},
		{site("upstream u {\n least_time;\n server 10.0.0.1:80;\n}"), `nginx.conf:3: least_time "": want header or last_byte, and optionally inflight`},
		{site("upstream u {\n least_time first_byte;\n server 10.0.0.1:80;\n}"), `nginx.conf:3: least_time "first_byte": want header or last_byte`},
		{site("upstream u {\n least_time last_byte slow;\n server 10.0.0.1:80;\n}"), `nginx.conf:3: least_time "last_byte slow": want header or last_byte, and optionally inflight`},
		{site("upstream u {\n least_time header inflight x;\n server 10.0.0.1:80;\n}"), `nginx.conf:3: least_time: unexpected argument "x"`},
		{site("upstream u {\n server 10.0.0.1:80 drain=1;\n}"), `nginx.conf:3: server 10.0.0.1:80: invalid parameter "drain=1"`},
		{"http {\nserver { location / { proxy_pass u; } }\n}", "nginx.conf:2: proxy_pass u: want http:// or https:// and a host"},
		{"http {\nserver { location / { proxy_next_upstream error sometimes; proxy_pass http://10.0.0.1:80; } }\n}", `nginx.conf:2: proxy_next_upstream: unknown condition "sometimes"`},
	}
	for _, c := range cases {
		_, err := load(t, c.conf)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s\nerror %v\nwant  %s", c.conf, err, c.want)
		}
	}
}

// TestTraefik: the middleware and router of a location.
func TestTraefik(t *testing.T) {
	conf := `http {
	set_real_ip_from 127.0.0.1;
	real_ip_header X-Forwarded-For;
	upstream u {
		hash $http_x_user consistent;
		server 10.0.0.1:80 weight=2 max_conns=10;
		server 10.0.0.2:80 down;
	}
	server {
		listen 8081;
		server_name a.example;
		location /api/ { proxy_pass http://u; proxy_next_upstream_tries 2; proxy_connect_timeout 2s; }
	}
}
`
	cfg, err := load(t, conf)
	if err != nil {
		t.Fatal(err)
	}
	out, warnings := cfg.Traefik()
	want := `http:
  routers:
    # location /api/ (nginx.conf:12)
    server1-location1:
      rule: "PathPrefix(` + "`/api/`" + `)"
      priority: 1005
      entryPoints: [port8081]
      middlewares: [server1-location1]
      service: noop@internal # the middleware answers every request
  middlewares:
    # upstream u (nginx.conf:4)
    server1-location1:
      plugin:
        lbpack:
          strategy: url_hash
          hashKey: header:X-User
          hashMode: ketama
          servers:
            - url: http://10.0.0.1:80
              weight: 2
              maxConns: 10
            - url: http://10.0.0.2:80
              down: true
          maxFails: 1
          failTimeout: 10s
          retries: 1
          connectTimeout: 2s
          trustedIPs: ["127.0.0.1"]
`
	if got := string(out); !strings.HasSuffix(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	for _, w := range []string{
		"nginx.conf:9: server: the default server of its port",
	} {
		if !strings.Contains(warningsText(warnings), w) {
			t.Errorf("warnings lack %q:\n%s", w, warningsText(warnings))
		}
	}
	if !strings.Contains(string(out), "#     port8081:\n#       address: \":8081\"\n#       forwardedHeaders:\n#         trustedIPs: [\"127.0.0.1\"]\n") {
		t.Errorf("no static entry point in the comment:\n%s", out)
	}
}

// TestCaddyServers: a server's own return, the same port written twice,
// names two servers claim, and proxy_pass with a URI part.
func TestCaddyServers(t *testing.T) {
	conf := `http {
	upstream u { server 10.0.0.1:80; }
	server {
		listen 80;
		listen [::]:80;
		server_name a.example;
		return 301 https://$host$request_uri;
		location / { proxy_pass http://u; }
	}
	server {
		listen 8080;
		server_name b.example;
		location /api/ { proxy_pass http://u/v2/; proxy_set_header Host $host; }
		location /strip/ { proxy_pass http://u/; proxy_set_header Host $host; }
		location /same/ { proxy_pass http://u/same/; proxy_set_header Host $host; }
		location /odd { proxy_pass http://u/x; proxy_set_header Host $host; }
	}
	server {
		listen 8080;
		server_name b.example c.example;
		location / { proxy_pass http://u; proxy_set_header Host $host; }
	}
}
`
	cfg, err := load(t, conf)
	if err != nil {
		t.Fatal(err)
	}
	if yml, _ := cfg.Traefik(); !strings.Contains(string(yml), "entryPoints: [port8080]\n") || strings.Contains(string(yml), "port80, port80") {
		t.Errorf("entry points not one per port:\n%s", yml)
	}
	out, warnings := cfg.Caddyfile()
	for _, want := range []string{
		"http://a.example:80, http://:80 {\n\tredir https://{http.request.host}{http.request.orig_uri} 301\n}\n",
		"\thandle /api/* {\n\t\t# proxy_pass (nginx.conf:13) to upstream u (nginx.conf:2)\n\t\t# proxy_pass's URI /v2/ replaces the location's prefix /api/\n\t\turi path_regexp ^/api/ /v2/\n",
		"\thandle /strip/* {\n\t\t# proxy_pass (nginx.conf:14) to upstream u (nginx.conf:2)\n\t\t# proxy_pass's URI / replaces the location's prefix /strip/\n\t\turi path_regexp ^/strip/ /\n",
		"\thandle /same/* {\n\t\t# proxy_pass (nginx.conf:15) to upstream u",
		"\n# server (nginx.conf:18)\nhttp://c.example:8080 {\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks\n%s\nin\n%s", want, out)
		}
	}
	for _, want := range []string{
		"nginx.conf:8: location: the server's own return answers every request before a location is chosen",
		"nginx.conf:16: proxy_pass: the URI part /x, which replaces what location /odd matched, is not converted",
		"nginx.conf:18: server_name: b.example on port 8080: also the server at nginx.conf:10's",
	} {
		if !strings.Contains(warningsText(warnings), want) {
			t.Errorf("warnings lack %q:\n%s", want, warningsText(warnings))
		}
	}
}

// TestInheritance: proxy_set_header and add_header of a level replace the
// inherited ones, as in nginx; others add to them.
func TestInheritance(t *testing.T) {
	conf := `http {
	proxy_set_header X-A a;
	add_header X-H h;
	upstream u { server 10.0.0.1:80; }
	server {
		proxy_set_header X-B b;
		location /own/ { proxy_set_header X-C c; add_header X-I i; proxy_pass http://u; }
		location /inherited/ { proxy_pass http://u; }
	}
}
`
	cfg, err := load(t, conf)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range cfg.Sites[0].Locations {
		var hs []string
		for _, h := range l.Proxy.SetHeaders {
			hs = append(hs, h.Name)
		}
		for _, h := range l.AddHeaders {
			hs = append(hs, "add "+h.Name)
		}
		got[l.Path] = strings.Join(hs, " ")
	}
	want := map[string]string{"/own/": "X-C add X-I", "/inherited/": "X-B add X-H"}
	for path, w := range want {
		if got[path] != w {
			t.Errorf("location %s: headers %q, want %q", path, got[path], w)
		}
	}
}
