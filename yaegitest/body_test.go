package yaegitest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPluginReplayBounded: a body the first server read whole before it
// failed is sent again, intact, to the next server when it is within
// maxRetryBody; past it the copy is gone and the request is not retried.
func TestPluginReplayBounded(t *testing.T) {
	l := loadPlugin(t, nil)
	reset, resetHits := newResetter(t)
	good := newBackend(t, "good")
	doc := "strategy: round_robin\nmaxFails: 0\nmaxRetryBody: 1000\n" + serversYAML([]string{reset.URL, good.srv.URL})
	base, client := front(t, plugin(t, l, doc))
	for _, c := range []struct {
		size   int
		status int
		good   int64
	}{{1000, 200, 1}, {1001, 502, 0}} {
		body := strings.Repeat("x", c.size)
		r := do(t, client, "PUT", base+"/", body)
		if r.status != c.status || c.status == 200 && r.body != body || good.hits.Swap(0) != c.good || resetHits.Swap(0) != 1 {
			t.Errorf("PUT of %d bytes: status %d, %d bytes back; want %d, the body, from the second server only after the first", c.size, r.status, len(r.body), c.status)
		}
	}
}

// TestPluginSlowUploadsMemory: many slow uploads at once hold no copy of
// their bodies beyond what a retry may need, which for a POST is none (it
// moves to another server only when its connection was never made; a PUT
// keeps up to maxRetryBody, see TestPluginReplayBounded). Forty POSTs of
// 1 MiB (within the default maxRetryBody), each sent in 64 KiB parts over
// about half a second, to a server that reads them as they come: the live
// heap grows by a few MiB, where reading the bodies first held all 40.
func TestPluginSlowUploadsMemory(t *testing.T) {
	l := loadPlugin(t, nil)
	var got atomic.Int64
	sink := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Add(n)
	})
	// Two servers, so that retries are on.
	a, b := httptest.NewServer(sink), httptest.NewServer(sink)
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	base, _ := front(t, plugin(t, l, serversYAML([]string{a.URL, b.URL})))
	const uploads, parts, part = 40, 16, 64 << 10
	chunk := make([]byte, part)
	baseline := liveHeap()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if h := int64(liveHeap()) - int64(baseline); h > peak.Load() {
				peak.Store(h)
			}
		}
	}()
	tr := &http.Transport{MaxConnsPerHost: 0}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	errs := make(chan error, uploads)
	for k := 0; k < uploads; k++ {
		wg.Add(1)
		go func(method string) {
			defer wg.Done()
			pr, pw := io.Pipe()
			go func() {
				for p := 0; p < parts; p++ {
					if _, err := pw.Write(chunk); err != nil {
						return
					}
					time.Sleep(30 * time.Millisecond)
				}
				pw.Close()
			}()
			req, _ := http.NewRequest(method, base+"/upload", pr)
			req.ContentLength = parts * part
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- fmt.Errorf("%s: status %d", method, resp.StatusCode)
			}
		}("POST")
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if want := int64(uploads * parts * part); got.Load() != want {
		t.Errorf("the server read %d bytes, want %d", got.Load(), want)
	}
	// The connections' buffers: the bodies alone would be 40 MiB.
	if limit := int64(20 << 20); peak.Load() > limit {
		t.Errorf("live heap grew by %.1f MiB during the uploads, want at most %d MiB", float64(peak.Load())/(1<<20), limit>>20)
	}
	t.Logf("live heap grew by at most %.1f MiB", float64(peak.Load())/(1<<20))
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestPluginExpectContinue: a client's Expect: 100-continue reaches the
// server: a server that refuses the upload answers before the client has
// sent any of it, and one that takes it has its one 100 Continue passed on
// (the plugin no longer reads the body first, which made Traefik answer
// 100 Continue itself, and the client then got two).
func TestPluginExpectContinue(t *testing.T) {
	l := loadPlugin(t, nil)
	var read atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reject" {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		read.Add(n)
		fmt.Fprint(w, n)
	}))
	t.Cleanup(srv.Close)
	base, _ := front(t, plugin(t, l, serversYAML([]string{srv.URL, deadURL(t)})))
	const size = 100000
	for _, c := range []struct {
		path     string
		statuses []string // the status lines the client reads
		read     int64
	}{
		{"/reject", []string{"HTTP/1.1 413 Request Entity Too Large"}, 0},
		{"/upload", []string{"HTTP/1.1 100 Continue", "HTTP/1.1 200 OK"}, size},
	} {
		read.Store(0)
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: lbpack.test\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", c.path, size)
		br := bufio.NewReader(conn)
		var statuses []string
		for {
			line, err := readStatus(br)
			if err != nil {
				t.Fatalf("%s: %v after %q", c.path, err, statuses)
			}
			statuses = append(statuses, line)
			if line != "HTTP/1.1 100 Continue" {
				break
			}
			conn.Write(make([]byte, size)) // the body, once the server asked for it
		}
		conn.Close()
		if strings.Join(statuses, "|") != strings.Join(c.statuses, "|") || read.Load() != c.read {
			t.Errorf("%s: the client read %q and the server %d bytes; want %q and %d", c.path, statuses, read.Load(), c.statuses, c.read)
		}
	}
}

// readStatus reads one response's status line and skips its headers (and
// body, if it has a Content-Length).
func readStatus(br *bufio.Reader) (string, error) {
	status, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	length := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		if line == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			fmt.Sscan(strings.TrimSpace(v), &length)
		}
	}
	if _, err := io.CopyN(io.Discard, br, int64(length)); err != nil {
		return "", err
	}
	return strings.TrimSpace(status), nil
}
