package traefikplugin

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"time"

	"github.com/lbpack/lbpack/core"
)

// startHealthChecks starts one checker per server; each stops when ctx ends.
func (p *Plugin) startHealthChecks(ctx context.Context) {
	client := &http.Client{
		Transport: p.tr,
		Timeout:   p.s.healthTimeout,
		// A redirect is an answer: the server is up.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for i, t := range p.s.targets {
		p.checks.Add(1)
		go p.watch(ctx, client, i, healthURL(t, p.s.healthPath))
	}
}

// healthURL is the server's base URL with the check's path appended.
func healthURL(base *url.URL, path string) string {
	u := *base
	u.Path = trimSlash(u.Path) + path
	u.RawPath = ""
	return u.String()
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// watch checks server i every interval, starting at once, until ctx ends.
func (p *Plugin) watch(ctx context.Context, client *http.Client, i int, target string) {
	defer p.checks.Done()
	tick := time.NewTicker(p.s.healthInterval)
	defer tick.Stop()
	for {
		healthy := probe(ctx, client, target)
		if ctx.Err() != nil {
			return // the middleware is gone; its verdict no longer matters
		}
		p.setHealth(i, healthy)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probe reports whether one GET of target answers 200 to 399 in time.
func probe(ctx context.Context, client *http.Client, target string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// setHealth records server i's health; a change rebuilds the balancer with
// the unhealthy servers marked down (so hash keys of the others stay put),
// keeping every server's runtime state.
func (p *Plugin) setHealth(i int, healthy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unhealth[i] == !healthy {
		return
	}
	p.unhealth[i] = !healthy
	backends := make([]core.Backend, len(p.s.balancer.Backends))
	copy(backends, p.s.balancer.Backends)
	for k := range backends {
		if p.unhealth[k] {
			backends[k].Down = true
		}
	}
	old := p.bal.Load().(*balancer)
	b, err := old.Update(backends)
	if err != nil {
		// Cannot happen: only Down changed, and New accepted the rest.
		log.Printf("lbpack middleware %q: health update: %v", p.name, err)
		return
	}
	p.bal.Store(bind(b, old.failed))
	if healthy {
		// Back from down: a server with a slow start ramps up again.
		b.Recover(i)
	}
	// Under Traefik, fmt's output is its debug log and log's its error log.
	if healthy {
		fmt.Printf("lbpack middleware %q: server %s is up\n", p.name, p.s.targets[i].Redacted())
	} else {
		log.Printf("lbpack middleware %q: server %s is down", p.name, p.s.targets[i].Redacted())
	}
}
