package yaegitest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbpack/lbpack/internal/faultsuite"
)

// countSource is added to the interpreted plugin for the fault suite: it
// counts the tries of one server, which that server cannot see while it is
// down (every try goes through the server's proxy).
const countSource = `package traefikplugin

import "net/http"

func CountTries(h http.Handler, i int, count func()) {
	p := h.(*Plugin)
	next := p.proxies[i]
	p.proxies[i] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count()
		next.ServeHTTP(w, r)
	})
}
`

// faultPort is the first of the Traefik suite's loopback ports (it takes
// free ones among 33400 to 33449) unless LBPACK_FAULT_PORT_TRAEFIK moves it.
func faultPort(t *testing.T) int { return faultsuite.BasePort(t, "LBPACK_FAULT_PORT_TRAEFIK", 33400) }

// TestPluginFaults is the Traefik half of the fault suite (faults/ in the
// main module has Caddy and nginx): the plugin, loaded as Traefik loads it,
// with each strategy, retries and passive health (maxFails), and with
// active health checks and slow start. With LBPACK_WRITE_DOCS=1 it writes
// its rows to docs/reliability.md.
func TestPluginFaults(t *testing.T) {
	base := faultPort(t)
	l := loadPlugin(t, map[string]string{"zz_count.go": countSource})
	count := eval(t, l.i, "traefikplugin.CountTries").(func(http.Handler, int, func()))
	const (
		retries  = "retries: 2"
		passive  = "retries: 2\nmaxFails: 1\nfailTimeout: 1s"
		active   = "retries: 2\nmaxFails: 0\nhealthCheck:\n  path: /health\n  interval: 200ms\n  timeout: 500ms"
		slowTail = faultsuite.RestartAt + 3*time.Second
	)
	cases := []struct {
		strategy, settings, name string
		targets                  faultsuite.Targets
		end                      time.Duration
	}{
		{"smooth_wrr", retries + "\nmaxFails: 0", "retries 2, maxFails 0", faultsuite.Targets{BackAgain: true}, 0},
		{"smooth_wrr", passive, "retries 2, maxFails 1, failTimeout 1s", faultsuite.Targets{BackAgain: true}, 0},
		{"gcd_wrr", passive, "retries 2, maxFails 1, failTimeout 1s", faultsuite.Targets{BackAgain: true}, 0},
		{"least_conn", passive, "retries 2, maxFails 1, failTimeout 1s", faultsuite.Targets{BackAgain: true}, 0},
		{"ip_hash", passive, "retries 2, maxFails 1, failTimeout 1s", faultsuite.Targets{BackAgain: true}, 0},
		{"url_hash", passive, "retries 2, maxFails 1, failTimeout 1s", faultsuite.Targets{BackAgain: true}, 0},
		{"fair", passive, "retries 2, maxFails 1, failTimeout 1s", faultsuite.Targets{BackAgain: true}, 0},
		{"smooth_wrr", active, "retries 2, healthCheck every 200ms", faultsuite.Targets{BackAgain: true, OutSoon: true}, 0},
		{"smooth_wrr", active + "\nslowStart: 2s", "retries 2, healthCheck every 200ms, slowStart 2s", faultsuite.Targets{BackAgain: true, OutSoon: true, Ramp: true}, slowTail},
		{"least_conn", active + "\nslowStart: 2s", "retries 2, healthCheck every 200ms, slowStart 2s", faultsuite.Targets{BackAgain: true, OutSoon: true, Ramp: true}, slowTail},
	}
	var rows []faultsuite.Row
	for k, c := range cases {
		fc := faultsuite.Case{Host: "Traefik plugin", Name: "`" + c.strategy + "`, " + c.name, Targets: c.targets,
			Header: faultsuite.SpreadClients, InProcess: true, End: c.end}
		doc := "strategy: " + c.strategy + "\n" + c.settings + "\ntrustedIPs:\n  - 127.0.0.1\n"
		t.Run(c.strategy+"/"+c.name, func(t *testing.T) {
			// A middleware name of its own: the plugin keeps a name's state
			// across New calls (Traefik's reloads), and each case starts
			// from nothing, not from the previous case's dead servers.
			name := fmt.Sprintf("lb%d", k)
			rows = append(rows, faultsuite.RunCase(t, base, fc, pluginProxy(t, l, count, doc, name)))
		})
	}
	faultsuite.WriteDocs(t, rows, len(cases))
}

// pluginProxy serves the interpreted middleware called name, built from the
// settings doc and the backends, on the first port.
func pluginProxy(t *testing.T, l *loader, count func(http.Handler, int, func()), doc, name string) faultsuite.Proxy {
	return func(backends []string, dead int, ports []int) (faultsuite.Running, error) {
		var urls []string
		for _, b := range backends {
			urls = append(urls, "http://"+b)
		}
		ctx, cancel := context.WithCancel(context.Background())
		h, err := l.newHandler(ctx, doc+serversYAML(urls), name)
		if err != nil {
			cancel()
			return faultsuite.Running{}, fmt.Errorf("New: %v\nconfig:\n%s", err, doc)
		}
		var tries atomic.Int64
		count(h, dead, func() { tries.Add(1) })
		ln, err := faultsuite.Listen(fmt.Sprintf("127.0.0.1:%d", ports[0]))
		if err != nil {
			cancel()
			return faultsuite.Running{}, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		stop := func() {
			srv.Close()
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("serving the plugin: %v", err)
			}
			cancel()
		}
		return faultsuite.Running{URL: "http://" + ln.Addr().String(), Tries: tries.Load, Stop: stop}, nil
	}
}
