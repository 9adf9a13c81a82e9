package traefikplugin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

// TestHealthRestoreStartsSlowStart checks that a server the active health
// check brings back ramps up again from 10% of its weight, as one added to
// a running balancer does, while a server never marked down keeps its full
// weight.
func TestHealthRestoreStartsSlowStart(t *testing.T) {
	cfg := withServers(CreateConfig(), "http://127.0.0.1:1", "http://127.0.0.1:2")
	cfg.Servers[0].Weight = intp(20)
	cfg.Servers[1].Weight = intp(20)
	cfg.SlowStart = "1h"
	p := newPlugin(t, cfg)
	bal := func() *core.Balancer { return p.bal.Load().(*balancer).Balancer }
	if w := bal().EffectiveWeight(0); w != 20 {
		t.Fatalf("at start: effective weight %d, want 20 (no slow start at construction)", w)
	}
	p.setHealth(0, false, "status 503")
	if w := bal().EffectiveWeight(0); w != 0 {
		t.Fatalf("unhealthy: effective weight %d, want 0 (down)", w)
	}
	p.setHealth(0, true, "status 200")
	if w := bal().EffectiveWeight(0); w < 1 || w > 3 {
		t.Fatalf("restored: effective weight %d, want about 10%% of 20", w)
	}
	if w := bal().EffectiveWeight(1); w != 20 {
		t.Fatalf("the other server: effective weight %d, want 20", w)
	}
}

// TestUntrackedRecovery checks the request path that tells the balancer
// only of failures and of the successes after them: a server that drops a
// connection is counted as failed and skipped, and once fail_timeout has
// passed, a successful request clears its failures, so it is picked again.
func TestUntrackedRecovery(t *testing.T) {
	var drops atomic.Int32
	drops.Store(1)
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if drops.Add(-1) >= 0 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close() // a transport error for the proxy
			}
			return
		}
		io.WriteString(w, "flaky")
	}))
	defer flaky.Close()
	steady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "steady")
	}))
	defer steady.Close()
	cfg := withServers(CreateConfig(), flaky.URL, steady.URL)
	cfg.Strategy = core.RoundRobin
	cfg.FailTimeout = "200ms"
	p := newPlugin(t, cfg)
	if p.track || !p.failures {
		t.Fatalf("track %v failures %v: want the untracked path with failure accounting", p.track, p.failures)
	}
	get := func() string {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 200 {
			t.Fatalf("status %d", rec.Code)
		}
		return rec.Body.String()
	}
	bal := p.bal.Load().(*balancer).Balancer
	if p.bal.Load().(*balancer).failed {
		t.Fatal("failed set before any failure")
	}
	if got := get(); got != "steady" {
		t.Fatalf("first request: %q, want the retry on steady", got)
	}
	if f := bal.Fails(0); f != 1 {
		t.Fatalf("flaky has %d failures, want 1", f)
	}
	// The failure is recorded, so successes look at the failure count again
	// (which is how the probe below clears it).
	if b := p.bal.Load().(*balancer); !b.failed || b.Balancer != bal {
		t.Fatalf("after a failure: failed %v, same balancer %v; want true, true", b.failed, b.Balancer == bal)
	}
	for k := 0; k < 4; k++ {
		if got := get(); got != "steady" {
			t.Fatalf("request %d within fail_timeout: %q, want steady only", k, got)
		}
	}
	time.Sleep(250 * time.Millisecond)
	seen := ""
	for k := 0; k < 4; k++ {
		seen += get() + " "
	}
	if !strings.Contains(seen, "flaky") {
		t.Fatalf("after fail_timeout: %q, want flaky probed", seen)
	}
	if f := bal.Fails(0); f != 0 {
		t.Fatalf("after a successful probe flaky has %d failures, want 0", f)
	}
	if n := bal.InFlight(0) + bal.InFlight(1); n != 0 {
		t.Fatalf("%d requests left in flight", n)
	}
}
