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

// TestExampleSteer checks the example's steer-mode routers: the router's
// service is a loadBalancer whose sticky cookie is the one the middleware
// sets, over the middleware's servers by URL, exactly as written; a retry
// middleware comes before the steering one (after it, Traefik would retry
// behind the plugin's back, with the same cookie).
func TestExampleSteer(t *testing.T) {
	var dynamic struct {
		HTTP struct {
			Routers map[string]struct {
				Middlewares []string `yaml:"middlewares"`
				Service     string   `yaml:"service"`
			} `yaml:"routers"`
			Services map[string]struct {
				LoadBalancer struct {
					Sticky struct {
						Cookie struct {
							Name string `yaml:"name"`
						} `yaml:"cookie"`
					} `yaml:"sticky"`
					Servers []struct {
						URL string `yaml:"url"`
					} `yaml:"servers"`
				} `yaml:"loadBalancer"`
			} `yaml:"services"`
			Middlewares map[string]struct {
				Retry  *struct{} `yaml:"retry"`
				Plugin struct {
					Lbpack struct {
						Mode    string `yaml:"mode"`
						Cookie  string `yaml:"cookie"`
						Servers []struct {
							URL string `yaml:"url"`
						} `yaml:"servers"`
					} `yaml:"lbpack"`
				} `yaml:"plugin"`
			} `yaml:"middlewares"`
		} `yaml:"http"`
	}
	data, err := os.ReadFile("../examples/traefik/dynamic.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &dynamic); err != nil {
		t.Fatal(err)
	}
	steered := 0
	for name, r := range dynamic.HTTP.Routers {
		for k, m := range r.Middlewares {
			lb := dynamic.HTTP.Middlewares[m].Plugin.Lbpack
			if lb.Mode != "steer" {
				continue
			}
			steered++
			svc, ok := dynamic.HTTP.Services[r.Service]
			if !ok {
				t.Errorf("router %s: service %q is not in the example", name, r.Service)
				continue
			}
			if got := svc.LoadBalancer.Sticky.Cookie.Name; got != lb.Cookie {
				t.Errorf("router %s: service %s's sticky cookie %q, middleware %s sets %q", name, r.Service, got, m, lb.Cookie)
			}
			var want, got []string
			for _, s := range lb.Servers {
				want = append(want, s.URL)
			}
			for _, s := range svc.LoadBalancer.Servers {
				got = append(got, s.URL)
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("router %s: service servers %v, middleware %s's %v", name, got, m, want)
			}
			retried := false
			for _, before := range r.Middlewares[:k] {
				retried = retried || dynamic.HTTP.Middlewares[before].Retry != nil
			}
			if !retried {
				t.Errorf("router %s: no retry middleware before %s", name, m)
			}
		}
	}
	if steered == 0 {
		t.Fatal("no steer-mode router in the example")
	}
}
