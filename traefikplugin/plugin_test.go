package traefikplugin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProxiesReuseCopyBuffers checks that the reverse proxies borrow their
// copy buffers from the plugin's pool and give them back, so that a proxied
// response does not allocate a fresh 32 KiB buffer each time.
func TestProxiesReuseCopyBuffers(t *testing.T) {
	body := strings.Repeat("x", 100*1024)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	defer backend.Close()
	p := newPlugin(t, withServers(CreateConfig(), backend.URL))
	for i := 0; i < 3; i++ {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest("GET", "http://lbpack.test/", nil))
		if rec.Code != http.StatusOK || rec.Body.Len() != len(body) {
			t.Fatalf("request %d: status %d, %d bytes; want 200, %d bytes", i, rec.Code, rec.Body.Len(), len(body))
		}
		// Sequential requests borrow one buffer and return it.
		if n := len(p.buffers.free); n != 1 {
			t.Fatalf("after request %d: %d buffers in the pool, want 1", i, n)
		}
	}
}

// TestBufferPoolBounded checks that the pool keeps at most its capacity and
// hands out full-size buffers.
func TestBufferPoolBounded(t *testing.T) {
	bp := &bufferPool{free: make(chan []byte, 2)}
	for i := 0; i < 5; i++ {
		bp.Put(make([]byte, 32*1024))
	}
	if n := len(bp.free); n != 2 {
		t.Fatalf("pool holds %d buffers, want its capacity 2", n)
	}
	for i := 0; i < 3; i++ {
		if b := bp.Get(); len(b) != 32*1024 {
			t.Fatalf("Get %d: %d bytes, want 32768", i, len(b))
		}
	}
}

// TestConcurrentFailuresSettle sends GETs from many goroutines while one of
// two servers refuses connections: every request is retried on the live
// server, and every transport error the proxies report is taken by its own
// request, so nothing is left pending once all have ended.
func TestConcurrentFailuresSettle(t *testing.T) {
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "live")
	}))
	defer live.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // its port now refuses connections

	p := newPlugin(t, withServers(CreateConfig(), deadURL, live.URL))
	const goroutines, each = 8, 50
	codes := make(chan int, goroutines*each)
	done := make(chan struct{})
	for g := 0; g < goroutines; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < each; i++ {
				rec := httptest.NewRecorder()
				p.ServeHTTP(rec, httptest.NewRequest("GET", "http://lbpack.test/", nil))
				codes <- rec.Code
			}
		}()
	}
	for g := 0; g < goroutines; g++ {
		<-done
	}
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("a request answered %d; want 200 from the live server after a retry", c)
		}
	}
	if n := p.pending.Load(); n != 0 {
		t.Errorf("%d transport errors still pending after every request ended", n)
	}
	left := 0
	p.errs.Range(func(k, v any) bool { left++; return true })
	if left != 0 {
		t.Errorf("%d errors left in the plugin's map", left)
	}
}

// newPlugin builds the middleware from cfg, or fails the test; its context
// ends with the test.
func newPlugin(t *testing.T, cfg *Config) *Plugin {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, err := New(ctx, nil, cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	return h.(*Plugin)
}
