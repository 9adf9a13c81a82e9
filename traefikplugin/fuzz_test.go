package traefikplugin

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/lbpack/lbpack/core"
)

// FuzzConfig feeds New settings as a user may write them, and the client
// address reading an X-Forwarded-For a client may send. An accepted
// failStatus fails only statuses from 100 to 599, and fair always has one. New must never
// panic; it accepts a configuration whole or refuses it with one error under
// the middleware's prefix that starts with a key of the plugin's own
// (no core prefix, no snake_case field names); the client IP is the peer
// or an address. Run beyond the seeds with
// go test -run '^$' -fuzz FuzzConfig -fuzztime 30s ./traefikplugin/
func FuzzConfig(f *testing.F) {
	f.Add("smooth_wrr", "", "", "http://10.0.0.1:8080", "http://10.0.0.2", 5, "10s", "", "", "10.0.0.0/8", 0.0, "", "203.0.113.9:4711, 10.0.0.7", "")
	f.Add("url_hash", "header:X-Tenant", "bounded", "https://[::1]/api", "http://b.example:81", 1, "1m", "30s", "", "::ffff:10.0.0.0/104", 1.25, "", "198.51.100.1", "5xx,429")
	f.Add("ip_hash", "clientip", "", "http://10.0.0.1", "http://10.0.0.1:80", 0, "0s", "", "", "10.0.0.0/33", 0.0, "retrys", "junk, 10.0.0.1", "500-504")
	f.Add("fair", "", "", "http://h:1", "ftp://h:2", -3, "", "x", "5s", "", 0.0, "wieght", "[2001:db8::1]:80", "5xx,503")
	f.Add("least_conn", "uri", "ketama", "http://h:1/p?q", "http://u@h:2", 1<<40, "-1s", "1h", "0s", "::ffff:0:0/64", 0.5, "max_fails", "", "6xx")
	f.Fuzz(func(t *testing.T, strategy, hashKey, hashMode, url0, url1 string, weight int,
		failTimeout, slowStart, decay, trusted string, loadFactor float64, unknown, xff, failStatus string) {
		if weight > 1000 && weight <= core.MaxWeight {
			// Accepted weights stay small: what a large one costs to
			// build is core's (its benchmarks), not the parser's.
			weight %= 1000
		}
		cfg := CreateConfig()
		cfg.Strategy, cfg.HashKey, cfg.HashMode, cfg.LoadFactor = strategy, hashKey, hashMode, loadFactor
		cfg.FailTimeout, cfg.SlowStart, cfg.DecayTime = failTimeout, slowStart, decay
		cfg.Servers = []Server{{URL: url0, Weight: &weight}, {URL: url1}}
		if trusted != "" {
			cfg.TrustedIPs = strings.Split(trusted, ",")
		}
		if failStatus != "" {
			cfg.FailStatus = strings.Split(failStatus, ",")
		}
		if unknown != "" {
			cfg.Servers[1].Unknown = map[string]interface{}{unknown: "1"}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no goroutine outlives the call
		_, err := New(ctx, nil, cfg, "fuzz")
		if err != nil {
			msg, ok := strings.CutPrefix(err.Error(), `lbpack middleware "fuzz": `)
			if !ok || strings.HasPrefix(msg, "lbpack") {
				t.Fatalf("error %q: want one prefix", err)
			}
			field, _, _ := strings.Cut(msg, " ")
			if !strings.Contains(msg, "unknown key") && strings.Contains(field, "_") {
				t.Fatalf("error %q names a field in core's words", err)
			}
			return
		}
		s, err := parse(cfg)
		if err != nil {
			t.Fatalf("New accepted what parse refuses: %v", err)
		}
		if (s.failStatus == nil) != (failStatus == "" && s.balancer.Strategy != core.Fair) {
			t.Fatalf("failStatus %q under %s: table %v", failStatus, s.balancer.Strategy, s.failStatus != nil)
		}
		for c := 0; c < len(s.failStatus); c++ {
			if s.failStatus[c] && (c < 100 || c > 599) {
				t.Fatalf("failStatus %q: %d fails", failStatus, c)
			}
		}
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "10.0.0.7:4000"
		req.Header.Set("X-Forwarded-For", xff)
		if ip := clientIP(s, req); ip != "10.0.0.7" {
			if _, err := netip.ParseAddr(ip); err != nil {
				t.Fatalf("client IP %q from X-Forwarded-For %q: not an address", ip, xff)
			}
		}
	})
}
