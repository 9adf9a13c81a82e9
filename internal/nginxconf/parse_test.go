package nginxconf

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

// dump renders directives one per line as "file:line name [args] {", so that
// a test states the whole parse.
func dump(ds []*Directive, depth int, b *strings.Builder) {
	for _, d := range ds {
		fmt.Fprintf(b, "%s%s %s %q", strings.Repeat("  ", depth), d.Pos, d.Name, d.Args)
		if d.IsBlock {
			b.WriteString(" {\n")
			dump(d.Block, depth+1, b)
			fmt.Fprintf(b, "%s}\n", strings.Repeat("  ", depth))
		} else {
			b.WriteString("\n")
		}
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{
			name: "comments, quotes and escapes",
			files: map[string]string{"nginx.conf": "# top\nhttp { # open\n  add_header X-A \"a b\\\"c\" ; add_header 'X-B' 'it\\'s';\n" +
				"  return 200 a\\;b;\n  hash ${arg_k}x$uri;\n}\n"},
			want: `nginx.conf:2 http [] {
  nginx.conf:3 add_header ["X-A" "a b\"c"]
  nginx.conf:3 add_header ["X-B" "it's"]
  nginx.conf:4 return ["200" "a\\;b"]
  nginx.conf:5 hash ["${arg_k}x$uri"]
}
`,
		},
		{
			name:  "a quoted string over two lines counts both",
			files: map[string]string{"nginx.conf": "return 200 \"a\nb\";\nlisten 80;\n"},
			want:  "nginx.conf:1 return [\"200\" \"a\\nb\"]\nnginx.conf:3 listen [\"80\"]\n",
		},
		{
			// nginx hands a map's, types', geo's and split_clients' entries
			// to the block's own handler: the first token is a value there,
			// and may be quoted (nginx's own WebSocket example maps '').
			name: "quoted first tokens: entries of map, types, geo, split_clients",
			files: map[string]string{"nginx.conf": "http {\n map $http_upgrade $connection_upgrade {\n  default upgrade;\n  '' close;\n }\n" +
				" types { \"text/html\" html; }\n geo $a { \"10.0.0.0/8\" 1; }\n split_clients $r $v { \"50%\" a; * b; }\n \"server\" { }\n}\n"},
			want: `nginx.conf:1 http [] {
  nginx.conf:2 map ["$http_upgrade" "$connection_upgrade"] {
    nginx.conf:3 default ["upgrade"]
    nginx.conf:4  ["close"]
  }
  nginx.conf:6 types [] {
    nginx.conf:6 text/html ["html"]
  }
  nginx.conf:7 geo ["$a"] {
    nginx.conf:7 10.0.0.0/8 ["1"]
  }
  nginx.conf:8 split_clients ["$r" "$v"] {
    nginx.conf:8 50% ["a"]
    nginx.conf:8 * ["b"]
  }
  nginx.conf:9 server [] {
  }
}
`,
		},
		{
			name: "includes relative to the main file's directory, globs in name order",
			files: map[string]string{
				"nginx.conf":        "http {\n include conf.d/*.conf;\n include sub/one.conf;\n}\n",
				"conf.d/b.conf":     "upstream b { server 10.0.0.2; }\n",
				"conf.d/a.conf":     "\nupstream a { server 10.0.0.1; }\n",
				"conf.d/skip.txt":   "not nginx {",
				"sub/one.conf":      "include sub/two.conf;\n",
				"sub/two.conf":      "server { listen 8080; }\n",
				"conf.d/empty.conf": "",
			},
			want: `nginx.conf:1 http [] {
  conf.d/a.conf:2 upstream ["a"] {
    conf.d/a.conf:2 server ["10.0.0.1"]
  }
  conf.d/b.conf:1 upstream ["b"] {
    conf.d/b.conf:1 server ["10.0.0.2"]
  }
  sub/two.conf:1 server [] {
    sub/two.conf:1 listen ["8080"]
  }
}
`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, body := range c.files {
				fsys[name] = &fstest.MapFile{Data: []byte(body)}
			}
			ds, err := ParseFS(fsys, "nginx.conf")
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			dump(ds, 0, &b)
			if got := b.String(); got != c.want {
				t.Errorf("parse:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"nginx.conf": "http {\n server {\n"}, `nginx.conf:3: unexpected end of file, expecting "}"`},
		{map[string]string{"nginx.conf": "http { }\n}\n"}, `nginx.conf:2: unexpected "}"`},
		{map[string]string{"nginx.conf": "http {\n listen 80\n}\n"}, `nginx.conf:3: unexpected "}": directive "listen" is not terminated by ";"`},
		{map[string]string{"nginx.conf": "listen 80"}, `nginx.conf:1: unexpected end of file: directive "listen" is not terminated by ";"`},
		{map[string]string{"nginx.conf": "\nreturn 200 \"open;\n"}, "nginx.conf:2: unterminated quoted string"},
		{map[string]string{"nginx.conf": "return 200 \"a\"b;"}, `nginx.conf:1: unexpected "b" after the quoted string "a"`},
		{map[string]string{"nginx.conf": ";"}, `nginx.conf:1: unexpected ";"`},
		{map[string]string{"nginx.conf": "http {\ninclude missing.conf;\n}"}, "nginx.conf:2: include missing.conf: no such file"},
		{map[string]string{"nginx.conf": "include a.conf;", "a.conf": "include a.conf;"}, "a.conf:1: include a.conf: nested more than 32 deep (does a file include itself?)"},
		{map[string]string{"nginx.conf": "include a.conf b.conf;"}, "nginx.conf:1: include: want one file name, have 2 arguments"},
		{map[string]string{"nginx.conf": "hash ${arg_k;"}, `nginx.conf:1: unterminated "${" in "$"`},
	}
	for _, c := range cases {
		fsys := fstest.MapFS{}
		for name, body := range c.files {
			fsys[name] = &fstest.MapFile{Data: []byte(body)}
		}
		_, err := ParseFS(fsys, "nginx.conf")
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: error %v, want %s", c.files["nginx.conf"], err, c.want)
		}
	}
}

// TestLoadQuotedEntries: nginx's WebSocket proxying example converts; its
// map, which no host carries over, is warned of, not refused.
func TestLoadQuotedEntries(t *testing.T) {
	conf := "http {\n map $http_upgrade $connection_upgrade {\n  default upgrade;\n  '' close;\n }\n" +
		" upstream u { server 10.0.0.1:80; }\n server { listen 8080; location / { proxy_pass http://u;\n" +
		"  proxy_set_header Upgrade $http_upgrade;\n  proxy_set_header Connection $connection_upgrade; } }\n}\n"
	cfg, err := load(t, conf)
	if err != nil {
		t.Fatal(err)
	}
	out, ws := cfg.Caddyfile()
	want := "nginx.conf:2: map: not converted\n" +
		"nginx.conf:8: proxy_set_header: Upgrade: not needed: Caddy and Traefik pass a WebSocket upgrade's Upgrade and Connection headers on themselves\n" +
		"nginx.conf:9: proxy_set_header: Connection: not needed: Caddy and Traefik pass a WebSocket upgrade's Upgrade and Connection headers on themselves\n"
	if got := warningsText(ws); got != want {
		t.Errorf("warnings:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(string(out), "header_up Upgrade") || strings.Contains(string(out), "header_up Connection") {
		t.Errorf("the upgrade headers are written:\n%s", out)
	}
}
