package yaegitest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/lbpack/lbpack/traefikplugin"
	"github.com/mitchellh/mapstructure"
)

// stubSource is added to the interpreted plugin for benchmarks: it swaps
// every server's proxy for a handler, leaving the plugin's own work.
const stubSource = `package traefikplugin

import (
	"net/http"

	"github.com/lbpack/lbpack/core"
)

func StubProxies(h http.Handler, stub http.Handler) {
	p := h.(*Plugin)
	for k := range p.proxies {
		p.proxies[k] = stub
	}
}

// Parts returns loops over the balancer calls a request makes: the pick
// (through core.Take, as ServeHTTP calls it for smooth_wrr), and core.Done
// after the proxying.
func Parts(h http.Handler) (pick func(n int), startDone func(n int)) {
	b := h.(*Plugin).bal.Load().(*balancer).Balancer
	pick = func(n int) {
		for k := 0; k < n; k++ {
			core.Take(b, "")
		}
	}
	startDone = func(n int) {
		for k := 0; k < n; k++ {
			core.Done(b, 3, 1, 0, false)
		}
	}
	return pick, startDone
}
`

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkPluginServeHTTP measures the interpreted plugin's work per
// request at 10 servers with proxying stubbed out: key, pick, Done,
// the attempt bookkeeping. For smooth_wrr it also measures the balancer's
// share alone: the pick, and Start with Done.
func BenchmarkPluginServeHTTP(b *testing.B) {
	l := loadPlugin(b, map[string]string{"zz_stub.go": stubSource})
	stubProxies := eval(b, l.i, "traefikplugin.StubProxies").(func(http.Handler, http.Handler))
	parts := eval(b, l.i, "traefikplugin.Parts").(func(http.Handler) (func(int), func(int)))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	var sb strings.Builder
	sb.WriteString("servers:\n")
	for k := 1; k <= 10; k++ {
		fmt.Fprintf(&sb, "  - url: http://10.0.0.%d:80\n    weight: %d\n", k, k%4+1)
	}
	servers := sb.String()
	req := httptest.NewRequest("GET", "/some/path?id=42", nil)
	req.RemoteAddr = "192.0.2.10:5555"
	req.Header.Set("X-User", "user-1234")
	w := &discard{h: http.Header{}}
	for _, c := range []struct{ name, doc string }{
		{"smooth_wrr", "strategy: smooth_wrr\n"},
		{"round_robin", "strategy: round_robin\n"},
		{"round_robin_maxfails_0", "strategy: round_robin\nmaxFails: 0\n"},
		{"least_conn", "strategy: least_conn\n"},
		{"fair", "strategy: fair\n"},
		{"url_hash_bounded", "strategy: url_hash\nhashMode: bounded\n"},
		{"ip_hash", "strategy: ip_hash\n"},
		{"url_hash_uri_maglev", "strategy: url_hash\nhashMode: maglev\n"},
		{"url_hash_header_ketama", "strategy: url_hash\nhashKey: header:X-User\n"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		h, err := l.newHandler(ctx, c.doc+servers, "bench")
		if err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		stubProxies(h, ok)
		b.Run(c.name, func(b *testing.B) {
			benchCPU(b, func(n int) {
				for k := 0; k < n; k++ {
					h.ServeHTTP(w, req)
				}
			})
		})
		if c.name == "smooth_wrr" {
			pick, startDone := parts(h)
			b.Run(c.name+"/pick_only", func(b *testing.B) { benchCPU(b, pick) })
			b.Run(c.name+"/start_done_only", func(b *testing.B) { benchCPU(b, startDone) })
		}
		cancel()
	}
}

// BenchmarkPluginProxy measures whole requests proxied to a loopback
// server: the standard library's reverse proxy alone (what Traefik's own
// service does), the plugin compiled, and the plugin interpreted. The ratio
// of native to interpreted time is the share of native throughput the
// interpreted plugin reaches on one core.
func BenchmarkPluginProxy(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	target, _ := url.Parse(srv.URL)
	native := httputil.NewSingleHostReverseProxy(target)
	native.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	doc := "strategy: smooth_wrr\nservers:\n  - url: " + srv.URL + "\n    weight: 5\n  - url: " + srv.URL + "/b\n"
	// Two servers at one address would be a duplicate; a second listener
	// gives the balancer a real choice.
	srv2 := httptest.NewServer(srv.Config.Handler)
	defer srv2.Close()
	doc = strings.Replace(doc, srv.URL+"/b", srv2.URL, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	settings, err := settingsMap(doc)
	if err != nil {
		b.Fatal(err)
	}
	cfg := traefikplugin.CreateConfig()
	dec, _ := mapstructure.NewDecoder(&mapstructure.DecoderConfig{WeaklyTypedInput: true, Result: cfg})
	if err := dec.Decode(settings); err != nil {
		b.Fatal(err)
	}
	compiled, err := traefikplugin.New(ctx, nil, cfg, "bench")
	if err != nil {
		b.Fatal(err)
	}
	interpreted, err := loadPlugin(b, nil).newHandler(ctx, doc, "bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"native_reverse_proxy", native}, {"plugin_compiled", compiled}, {"plugin_interpreted", interpreted}} {
		b.Run(c.name, func(b *testing.B) {
			benchCPU(b, func(n int) {
				for k := 0; k < n; k++ {
					rec := httptest.NewRecorder()
					c.h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
					if rec.Code != 200 {
						b.Fatalf("status %d", rec.Code)
					}
				}
			})
		})
	}
}

// BenchmarkPluginLiveHeap reports the heap the interpreted plugin keeps
// live once loaded, with one middleware built: the interpreter's program
// (core's and the plugin's source as yaegi holds it) and the middleware's
// state. Traefik's garbage collector marks all of it on every cycle, so it
// sets the plugin's share of Traefik's GC cost per request.
func BenchmarkPluginLiveHeap(b *testing.B) {
	live := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var total uint64
	for k := 0; k < b.N; k++ {
		before := live()
		l := loadPlugin(b, nil)
		ctx, cancel := context.WithCancel(context.Background())
		h, err := l.newHandler(ctx, "strategy: smooth_wrr\nservers:\n  - url: http://127.0.0.1:1\n  - url: http://127.0.0.1:2\n", "heap")
		if err != nil {
			b.Fatal(err)
		}
		if after := live(); after > before {
			total += after - before
		}
		runtime.KeepAlive(l)
		runtime.KeepAlive(h)
		cancel()
	}
	b.ReportMetric(float64(total)/float64(b.N)/1e6, "live-MB")
}

// poolsSource is added to the interpreted plugin for BenchmarkPluginBufferPool:
// the plugin's buffer pool next to the other ways of writing one, and one
// that does nothing, whose cost is the two calls through yaegi's wrappers
// that the compiled reverse proxy makes.
const poolsSource = `package traefikplugin

import (
	"net/http"
	"net/http/httputil"
	"sync"
)

type syncPool struct{ p sync.Pool }

func (bp *syncPool) Get() []byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32*1024)
}

func (bp *syncPool) Put(b []byte) { bp.p.Put(&b) }

type mutexPool struct {
	mu   sync.Mutex
	free [][]byte
}

func (bp *mutexPool) Get() []byte {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if n := len(bp.free); n > 0 {
		b := bp.free[n-1]
		bp.free = bp.free[:n-1]
		return b
	}
	return make([]byte, 32*1024)
}

func (bp *mutexPool) Put(b []byte) {
	bp.mu.Lock()
	if len(bp.free) < 64 {
		bp.free = append(bp.free, b)
	}
	bp.mu.Unlock()
}

type noPool struct{ b []byte }

func (bp *noPool) Get() []byte   { return bp.b }
func (bp *noPool) Put(b []byte) {}

// Pools returns h's buffer pool, then the sync.Pool, mutex and do-nothing ones.
func Pools(h http.Handler) []httputil.BufferPool {
	return []httputil.BufferPool{h.(*Plugin).buffers, &syncPool{}, &mutexPool{}, &noPool{b: make([]byte, 32*1024)}}
}
`

// BenchmarkPluginBufferPool measures a Get and a Put as the compiled reverse
// proxy makes them on each response, on the plugin's interpreted buffer
// pool (a channel) and, in the same run, on a sync.Pool, on a slice under a
// mutex, and on a pool that does nothing.
func BenchmarkPluginBufferPool(b *testing.B) {
	l := loadPlugin(b, map[string]string{"zz_pools.go": poolsSource})
	pools := eval(b, l.i, "traefikplugin.Pools").(func(http.Handler) []httputil.BufferPool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := l.newHandler(ctx, "strategy: smooth_wrr\nservers:\n  - url: http://127.0.0.1:1\n", "pool")
	if err != nil {
		b.Fatal(err)
	}
	for k, bp := range pools(h) {
		b.Run([]string{"channel", "sync.Pool", "mutex", "nothing"}[k], func(b *testing.B) {
			benchCPU(b, func(n int) {
				for i := 0; i < n; i++ {
					bp.Put(bp.Get())
				}
			})
		})
	}
}
