package nginxconf

import (
	"strings"
	"testing"
)

// TestNginxTime: times as nginx 1.22 reads them (each case checked with
// nginx -t: fail_timeout= for seconds, proxy_connect_timeout for
// milliseconds).
func TestNginxTime(t *testing.T) {
	cases := []struct {
		v     string
		isSec bool
		want  int64
		ok    bool
	}{
		{"0", true, 0, true},
		{"10", true, 10, true},
		{"1m30s", true, 90, true},
		{"1s500", true, 501, true},
		{"1y2M", true, 365*86400 + 60*86400, true},
		{"300y", true, 300 * 365 * 86400, true},
		{"292471208677y", true, 292471208677 * 365 * 86400, true},
		{"292471208678y", true, 0, false},
		{"99999999999999999999", true, 0, false},
		{"500ms", true, 0, false},
		{"1s1m", true, 0, false},
		{"1M1y", true, 0, false},
		{"s", true, 0, false},
		{"", true, 0, false},
		{"ten", true, 0, false},
		{"1m 30s", true, 90, true},
		{"5 3", true, 8, true},
		{"5 3s", true, 0, false},
		{"5 3 1", true, 0, false},
		{"500ms", false, 500, true},
		{"2w", false, 14 * 86400 * 1000, true},
		{"1s500", false, 501000, true},
		{"106751991167d", false, 106751991167 * 86400 * 1000, true},
		{"1y", false, 0, false},
		{"1M", false, 0, false},
	}
	for _, c := range cases {
		got, ok := nginxTime(c.v, c.isSec)
		if got != c.want || ok != c.ok {
			t.Errorf("nginxTime(%q, %v) = %d, %v; want %d, %v", c.v, c.isSec, got, ok, c.want, c.ok)
		}
	}
}

// TestValuesBothHostsTake: nginx values lbpack cannot hold as written are
// mapped, with a warning naming the file, line and value, or refused;
// nothing printed is a value Caddy or the Traefik plugin refuses.
func TestValuesBothHostsTake(t *testing.T) {
	cases := []struct {
		name, server   string
		caddy, traefik []string // lines of the output
		warning        string
	}{
		{"fail_timeout=0: nginx's rest of a second, as 1s", "server 10.0.0.1:80 fail_timeout=0;",
			[]string{"\t\t\t\tfail_timeout 1s\n"}, []string{"          failTimeout: 1s\n"},
			"nginx.conf:3: server: fail_timeout=0: nginx keeps a failed server out until its clock's next second; lbpack takes a positive time: written as 1s"},
		{"fail_timeout beyond lbpack's range", "server 10.0.0.1:80 fail_timeout=300y;",
			[]string{"\t\t\t\tfail_timeout 2562047h\n"}, []string{"          failTimeout: 2562047h\n"},
			"nginx.conf:3: server: fail_timeout=300y: longer than lbpack holds: written as 2562047h (about 292 years)"},
		{"slow_start beyond lbpack's range", "server 10.0.0.1:80 slow_start=400y;",
			[]string{"\t\t\t\tslow_start 10.0.0.1:80 2562047h\n"}, []string{"          slowStart: 2562047h\n"},
			"nginx.conf:3: server: slow_start=400y: longer than lbpack holds: written as 2562047h (about 292 years)"},
		{"fail_timeout=0 without max_fails: no warning", "server 10.0.0.1:80 fail_timeout=0 max_fails=0;",
			nil, []string{"          maxFails: 0\n          failTimeout: 1s\n"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, site("upstream u {\n "+c.server+"\n}"))
			if err != nil {
				t.Fatal(err)
			}
			caddy, cw := cfg.Caddyfile()
			traefik, tw := cfg.Traefik()
			for _, l := range c.caddy {
				if !strings.Contains(string(caddy), l) {
					t.Errorf("Caddyfile lacks %q:\n%s", l, caddy)
				}
			}
			for _, l := range c.traefik {
				if !strings.Contains(string(traefik), l) {
					t.Errorf("Traefik lacks %q:\n%s", l, traefik)
				}
			}
			for _, ws := range [][]Warning{cw, tw} {
				got := warningsText(ws)
				if c.warning != "" && !strings.Contains(got, c.warning+"\n") || c.warning == "" && strings.Contains(got, "fail_timeout") {
					t.Errorf("warnings:\n%s\nwant %q", got, c.warning)
				}
			}
		})
	}

	for _, c := range []struct{ server, want string }{
		{"server 10.0.0.1:80 weight=1000001;", "nginx.conf:3: server 10.0.0.1:80: weight=1000001: lbpack takes weights up to 1000000 (nginx has no bound): scale this upstream's weights down"},
		{"server 10.0.0.1:80 fail_timeout=500ms;", "nginx.conf:3: fail_timeout=500ms: want a time in seconds such as 10s or 1m30s"},
		{"server 10.0.0.1:80 fail_timeout=292471208678y;", "nginx.conf:3: fail_timeout=292471208678y: want a time in seconds"},
	} {
		if _, err := load(t, site("upstream u {\n "+c.server+"\n}")); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %s", c.server, err, c.want)
		}
	}
}
