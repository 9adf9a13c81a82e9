package yaegitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestExampleTrustedIPs checks the example's documented trustedIPs setup:
// every range a middleware trusts is trusted by the entry point of each of
// its routers (Traefik deletes X-Forwarded-For from other peers before any
// middleware runs), and the middleware then hashes the forwarded client,
// not the proxy.
func TestExampleTrustedIPs(t *testing.T) {
	var static struct {
		EntryPoints map[string]struct {
			ForwardedHeaders struct {
				TrustedIPs []string `yaml:"trustedIPs"`
			} `yaml:"forwardedHeaders"`
		} `yaml:"entryPoints"`
	}
	var dynamic struct {
		HTTP struct {
			Routers map[string]struct {
				EntryPoints []string `yaml:"entryPoints"`
				Middlewares []string `yaml:"middlewares"`
			} `yaml:"routers"`
			Middlewares map[string]struct {
				Plugin struct {
					Lbpack struct {
						TrustedIPs []string `yaml:"trustedIPs"`
					} `yaml:"lbpack"`
				} `yaml:"plugin"`
			} `yaml:"middlewares"`
		} `yaml:"http"`
	}
	for name, v := range map[string]any{"traefik.yml": &static, "dynamic.yml": &dynamic} {
		data, err := os.ReadFile("../examples/traefik/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	covered := func(ep, r string) bool {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			t.Fatalf("middleware range %q: %v", r, err)
		}
		for _, e := range static.EntryPoints[ep].ForwardedHeaders.TrustedIPs {
			if q, err := netip.ParsePrefix(e); err == nil && q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
				return true
			}
		}
		return false
	}
	checked := 0
	for rname, router := range dynamic.HTTP.Routers {
		for _, m := range router.Middlewares {
			for _, r := range dynamic.HTTP.Middlewares[m].Plugin.Lbpack.TrustedIPs {
				for _, ep := range router.EntryPoints {
					if !covered(ep, r) {
						t.Errorf("router %s: middleware %s trusts %s, entry point %s does not", rname, m, r, ep)
					}
					checked++
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no middleware of the example sets trustedIPs")
	}

	// The by-client middleware, behind a trusted proxy on loopback, hashes
	// the address the proxy forwards: two clients of one proxy spread.
	l := loadPlugin(t, nil)
	data, _ := os.ReadFile("../examples/traefik/dynamic.yml")
	dyn, err := settingsMap(string(data))
	if err != nil {
		t.Fatal(err)
	}
	settings := dyn["http"].(map[string]any)["middlewares"].(map[string]any)["by-client"].(map[string]any)["plugin"].(map[string]any)["lbpack"].(map[string]any)
	var urls []string
	for _, n := range []string{"a", "b", "c"} {
		urls = append(urls, newBackend(t, n).srv.URL)
	}
	servers := settings["servers"].([]any)
	for k := range servers {
		servers[k].(map[string]any)["url"] = urls[k]
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := l.newHandlerMap(ctx, settings, "by-client@file")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for k := 0; k < 9; k++ { // nine clients
		req := httptest.NewRequest("GET", "/client/", nil)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("X-Forwarded-For", "203.0."+strings.Repeat("1", 1+k%3)+"."+string(rune('1'+k%9)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		seen[rec.Header().Get("X-Backend")] = true
	}
	if len(seen) < 2 {
		t.Errorf("nine clients behind one trusted proxy all went to %v: hashed as the proxy", seen)
	}
}
