package yaegitest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestPluginStreamsUnknownLength: a request body without Content-Length
// reaches the server while the client is still sending it (it used to be
// held back until it ended or reached maxRetryBody), and goes to one
// server when it gets an answer.
func TestPluginStreamsUnknownLength(t *testing.T) {
	l := loadPlugin(t, nil)
	first := make(chan string, 1)
	var hits atomic.Int64
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			first <- "error: " + err.Error()
			return
		}
		first <- string(buf)
		rest, _ := io.ReadAll(r.Body)
		w.Write(append(buf, rest...))
	})
	// Two servers, so that retries are on and bodies of known length kept.
	srv, srv2 := httptest.NewServer(echo), httptest.NewServer(echo)
	t.Cleanup(srv.Close)
	t.Cleanup(srv2.Close)
	for _, strategy := range []string{"round_robin", "least_conn"} {
		hits.Store(0)
		base, client := front(t, pluginNamed(t, l, "strategy: "+strategy+"\n"+serversYAML([]string{srv.URL, srv2.URL}), strategy))
		pr, pw := io.Pipe()
		req, err := http.NewRequest("POST", base+"/upload", pr)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan string, 1)
		go func() {
			resp, err := client.Do(req)
			if err != nil {
				done <- "error: " + err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- string(b)
		}()
		pw.Write([]byte("hello"))
		select {
		case got := <-first:
			if got != "hello" {
				t.Fatalf("%s: the server read %q", strategy, got)
			}
		case <-time.After(5 * time.Second):
			pw.Close()
			t.Fatalf("%s: the server got nothing of an open body in 5s", strategy)
		}
		pw.Write([]byte(", world"))
		pw.Close()
		select {
		case got := <-done:
			if got != "hello, world" || hits.Load() != 1 {
				t.Errorf("%s: answer %q after %d tries, want the body echoed by one", strategy, got, hits.Load())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no answer", strategy)
		}
	}
	// Retried: a streamed body whose server refuses the connection goes to
	// another server, whole (none of it was read before the dial failed).
	good := newBackend(t, "good")
	base, client := front(t, pluginNamed(t, l, "strategy: round_robin\nmaxFails: 0\n"+serversYAML([]string{deadURL(t), good.srv.URL}), "refused"))
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte("data")); pw.Close() }()
	resp, err := client.Post(base+"/", "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "data" || good.hits.Load() != 1 {
		t.Errorf("streamed body to a refusing server: status %d %q, the other server hit %d times; want 200 \"data\" and 1", resp.StatusCode, body, good.hits.Load())
	}
}
