package lbsim_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	// The caddyfile adapter of convert --to json, as cmd/lbsim links it.
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/standard"
	_ "github.com/lbpack/lbpack/caddyplugin"

	"github.com/lbpack/lbpack/internal/lbsim"
)

// writeConf writes files under a fresh directory and returns the path of
// its nginx.conf.
func writeConf(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "nginx.conf")
}

func run(args ...string) (int, string, string) {
	var out, errOut strings.Builder
	code := lbsim.Run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

var convertFiles = map[string]string{
	"nginx.conf": `worker_processes 1;
http {
	include upstreams/*.conf;
	server {
		listen 8080;
		location / { proxy_pass http://app; }
	}
}
`,
	"upstreams/app.conf": "upstream app {\n\thash $arg_user consistent;\n\tserver 127.0.0.1:9001;\n\tserver 127.0.0.1:9002 down;\n}\n",
}

// TestConvert: lbsim convert prints the result on stdout and the warnings,
// with the file and line, on stderr; flags may follow the file.
func TestConvert(t *testing.T) {
	conf := writeConf(t, convertFiles)
	for _, to := range []string{"", "caddyfile", "json", "traefik"} {
		args := []string{"convert", conf}
		if to != "" {
			args = append(args, "--to", to)
		}
		code, out, errOut := run(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if want := conf + ":1: worker_processes: an nginx process setting"; !strings.Contains(errOut, want) {
			t.Errorf("%v: stderr lacks %q:\n%s", args, want, errOut)
		}
		switch to {
		case "", "caddyfile":
			for _, want := range []string{"http://:8080 {", "lb_policy url_hash {", "key {nginx.arg_user}", "mode ketama", "down 127.0.0.1:9002"} {
				if !strings.Contains(out, want) {
					t.Errorf("Caddyfile lacks %q:\n%s", want, out)
				}
			}
		case "json":
			var cfg struct {
				Apps struct {
					HTTP struct {
						Servers map[string]struct {
							Listen []string `json:"listen"`
						} `json:"servers"`
					} `json:"http"`
				} `json:"apps"`
			}
			if err := json.Unmarshal([]byte(out), &cfg); err != nil {
				t.Fatalf("--to json: %v\n%s", err, out)
			}
			if s := cfg.Apps.HTTP.Servers["srv0"]; len(s.Listen) != 1 || s.Listen[0] != ":8080" {
				t.Errorf("--to json: servers %+v, want srv0 listening on :8080", cfg.Apps.HTTP.Servers)
			}
			if !strings.Contains(out, `"policy": "url_hash"`) {
				t.Errorf("--to json lacks the url_hash policy:\n%s", out)
			}
		case "traefik":
			for _, want := range []string{"strategy: url_hash", "hashKey: query:user", "- url: http://127.0.0.1:9002\n              down: true"} {
				if !strings.Contains(out, want) {
					t.Errorf("Traefik YAML lacks %q:\n%s", want, out)
				}
			}
			if want := filepath.Join(filepath.Dir(conf), "upstreams", "app.conf") + ":2: hash: $arg_user: the plugin hashes the decoded argument"; !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q:\n%s", want, errOut)
			}
		}
	}
}

// TestConvertBadInput: bad input exits 2 with the file and line on stderr
// and nothing on stdout.
func TestConvertBadInput(t *testing.T) {
	unused := writeConf(t, map[string]string{"nginx.conf": "http {\n\tupstream app { server 127.0.0.1:9001; }\n}\n"})
	syntax := writeConf(t, map[string]string{"nginx.conf": "http {\n\tserver {\n"})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"convert"}, "want one nginx configuration file, have 0"},
		{[]string{"convert", "--to", "haproxy", unused}, `--to "haproxy": want caddyfile, json or traefik`},
		{[]string{"convert", filepath.Join(t.TempDir(), "none.conf")}, "no such file"},
		{[]string{"convert", unused}, unused + ":2: upstream app: no proxy_pass uses it"},
		{[]string{"convert", syntax}, syntax + `:3: unexpected end of file, expecting "}"`},
	}
	for _, tc := range tests {
		code, out, errOut := run(tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// fences returns the contents of the fenced code blocks of a Markdown text
// after its heading, in order.
func fences(t *testing.T, doc, heading string) []string {
	t.Helper()
	i := strings.Index(doc, heading)
	if i < 0 {
		t.Fatalf("no %q", heading)
	}
	var out []string
	parts := strings.Split(doc[i:], "```")
	for k := 1; k+1 < len(parts); k += 2 {
		_, body, _ := strings.Cut(parts[k], "\n")
		out = append(out, body)
	}
	return out
}

// TestGuideExample: the worked example of docs/migrating-from-nginx.md is
// what lbsim convert prints for its nginx.conf, to Caddy and to Traefik,
// warnings included.
func TestGuideExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/migrating-from-nginx.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fences(t, string(doc), "## A worked example")
	if len(blocks) != 5 {
		t.Fatalf("the worked example has %d code blocks, want 5 (nginx.conf, Caddyfile, its warnings, Traefik YAML, its warnings)", len(blocks))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(blocks[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir) // positions read "nginx.conf:LINE", as in the guide
	for i, to := range []string{"caddyfile", "traefik"} {
		code, out, errOut := run("convert", "--to", to, "nginx.conf")
		if code != 0 {
			t.Fatalf("--to %s: exit %d: %s", to, code, errOut)
		}
		if out != blocks[1+2*i] {
			t.Errorf("--to %s: the guide shows\n%s\nlbsim prints\n%s", to, blocks[1+2*i], out)
		}
		if errOut != blocks[2+2*i] {
			t.Errorf("--to %s: the guide shows the warnings\n%s\nlbsim prints\n%s", to, blocks[2+2*i], errOut)
		}
	}
}

// TestConvertJSONValues: nginx values lbpack holds otherwise (fail_timeout=0,
// times beyond 292 years) convert to JSON that Caddy's adapter takes; what
// Caddy's adapter refuses is bad input, exit 2.
func TestConvertJSONValues(t *testing.T) {
	conf := writeConf(t, map[string]string{"nginx.conf": "http {\n\tupstream app {\n\t\tserver 127.0.0.1:9001 fail_timeout=0;\n" +
		"\t\tserver 127.0.0.1:9002 fail_timeout=300y slow_start=400y;\n\t}\n\tserver { listen 8080; location / { proxy_pass http://app; } }\n}\n"})
	code, out, errOut := run("convert", "--to", "json", conf)
	if code != 0 || !strings.Contains(out, `"fail_timeout": 1000000000,`) || !strings.Contains(out, `"slow_start": 9223369200000000000`) {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if !strings.Contains(errOut, conf+":3: server: fail_timeout=0: nginx keeps a failed server out") ||
		!strings.Contains(errOut, conf+":4: server: slow_start=400y: longer than lbpack holds") {
		t.Errorf("stderr %s", errOut)
	}

	adapt := lbsim.AdaptCaddyfile
	defer func() { lbsim.AdaptCaddyfile = adapt }()
	lbsim.AdaptCaddyfile = func([]byte, string) ([]byte, []string, error) {
		return nil, nil, errors.New("Caddyfile:9 - Error during parsing: refused")
	}
	code, out, errOut = run("convert", "--to", "json", conf)
	if code != 2 || out != "" || !strings.Contains(errOut, "adapting the converted Caddyfile: Caddyfile:9 - Error during parsing: refused") {
		t.Errorf("a refused Caddyfile: exit %d, stdout %q, stderr %s; want exit 2", code, out, errOut)
	}
}

// TestConvertJSONTLS: an https proxy_pass's TLS settings adapt to Caddy's
// transport: no certificate check by nginx's default, the trusted CAs,
// server name and client certificate when nginx checks.
func TestConvertJSONTLS(t *testing.T) {
	conf := writeConf(t, map[string]string{"nginx.conf": "http {\n\tupstream app { server 127.0.0.1:9443; }\n\tserver {\n\t\tlisten 8080;\n" +
		"\t\tlocation / { proxy_pass https://app; }\n" +
		"\t\tlocation /checked/ { proxy_pass https://app; proxy_ssl_verify on; proxy_ssl_trusted_certificate /etc/ssl/ca.pem;\n" +
		"\t\t\tproxy_ssl_name app.internal; proxy_ssl_certificate /etc/ssl/c.pem; proxy_ssl_certificate_key /etc/ssl/c.key; }\n\t}\n}\n"})
	code, out, errOut := run("convert", "--to", "json", conf)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{`"insecure_skip_verify": true`, `"provider": "file"`, `"/etc/ssl/ca.pem"`,
		`"server_name": "app.internal"`, `"client_certificate_file": "/etc/ssl/c.pem"`, `"client_certificate_key_file": "/etc/ssl/c.key"`} {
		if !strings.Contains(out, want) {
			t.Errorf("JSON lacks %s:\n%s", want, out)
		}
	}
}

// caddyHasSticky says whether the Caddy policies take sticky, drain and
// route (issue 23's Caddy part). Until they do, Caddy's adapter refuses a
// converted sticky configuration, and TestConvertSticky checks that it is
// sticky it refuses; once they do, the test fails until this is true, and
// then requires the JSON.
const caddyHasSticky = true

// TestConvertSticky: sticky in its three forms, drain and route= go
// through lbsim convert to every output: the Caddyfile and Traefik YAML
// carry them, and Caddy's adapter takes the Caddyfile (see caddyHasSticky).
func TestConvertSticky(t *testing.T) {
	cases := []struct {
		name, upstream string
		caddyfile      []string // lines of the Caddyfile, tabs dropped
		traefik        []string
		json           []string // in Caddy's JSON
	}{
		{"cookie", "sticky cookie srv_id expires=1h path=/ httponly;\n\t\tserver 127.0.0.1:9001;\n\t\tserver 127.0.0.1:9002;",
			[]string{"sticky cookie srv_id {", "expires 1h", "path /", "httponly", "}"},
			[]string{"          sticky:", "            cookie:", "              name: srv_id", "              maxAge: 3600", "              path: /", "              httpOnly: true"},
			[]string{`"sticky"`, `"srv_id"`}},
		{"route, route= and drain", "sticky route $arg_route $cookie_route;\n\t\tserver 127.0.0.1:9001 route=a;\n\t\tserver 127.0.0.1:9002 drain;",
			[]string{"drain 127.0.0.1:9002", "route 127.0.0.1:9001 a", "sticky route query:route cookie:route"},
			[]string{`            route: ["query:route", "cookie:route"]`, "              route: a", "              drain: true"},
			[]string{`"sticky"`, `"query:route"`}},
		{"learn", "sticky learn create=$upstream_cookie_sess lookup=$cookie_sess zone=s:1m timeout=1h;\n\t\tserver 127.0.0.1:9001;\n\t\tserver 127.0.0.1:9002;",
			[]string{"sticky learn {", "create upstream_cookie:sess", "lookup cookie:sess", "timeout 1h", "max_sessions 8000", "}"},
			[]string{"            learn:", `              create: ["upstream_cookie:sess"]`, `              lookup: ["cookie:sess"]`, "              timeout: 1h", "              maxSessions: 8000"},
			[]string{`"sticky"`, `"upstream_cookie:sess"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conf := writeConf(t, map[string]string{"nginx.conf": "http {\n\tupstream app {\n\t\t" + c.upstream + "\n\t}\n\tserver { listen 8080; location / { proxy_pass http://app; } }\n}\n"})
			for _, o := range []struct {
				to   string
				want []string
				trim func(string) string
			}{{"caddyfile", c.caddyfile, func(s string) string { return strings.TrimLeft(s, "\t") }}, {"traefik", c.traefik, func(s string) string { return s }}} {
				code, out, errOut := run("convert", "--to", o.to, conf)
				if code != 0 {
					t.Fatalf("--to %s: exit %d: %s", o.to, code, errOut)
				}
				have := map[string]bool{}
				for _, l := range strings.Split(out, "\n") {
					have[o.trim(l)] = true
				}
				for _, w := range o.want {
					if !have[w] {
						t.Errorf("--to %s: no line %q in\n%s", o.to, w, out)
					}
				}
			}
			code, out, errOut := run("convert", "--to", "json", conf)
			switch {
			case caddyHasSticky && code != 0:
				t.Fatalf("--to json: exit %d: %s", code, errOut)
			case caddyHasSticky:
				for _, w := range c.json {
					if !strings.Contains(out, w) {
						t.Errorf("--to json: no %s in\n%s", w, out)
					}
				}
			case code == 0:
				t.Fatalf("Caddy's adapter takes sticky now: set caddyHasSticky to true\n%s", out)
			case !strings.Contains(errOut, `unknown option "sticky"`) && !strings.Contains(errOut, `unknown option "drain"`):
				t.Errorf("--to json: Caddy refuses something other than sticky or drain: %s", errOut)
			}
		})
	}
}
