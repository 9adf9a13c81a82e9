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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := New(ctx, nil, withServers(CreateConfig(), backend.URL), "test")
	if err != nil {
		t.Fatal(err)
	}
	p := h.(*Plugin)
	for i := 0; i < 3; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://lbpack.test/", nil))
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
