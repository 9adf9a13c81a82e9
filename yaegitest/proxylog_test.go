package yaegitest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPluginFailureLog: a request that gets no answer from a server is
// logged at ERROR once per server and cause, however many requests fail
// so: here a refused connection and a server too slow for
// responseTimeout, three requests each.
func TestPluginFailureLog(t *testing.T) {
	l := loadPlugin(t, nil)
	slow := slowServer(t, 2*time.Second)
	dead := deadURL(t)
	for _, c := range []struct{ server, settings, want string }{
		{dead, "", "connection refused"},
		{slow.URL, "responseTimeout: 50ms\n", "timeout awaiting response headers"},
	} {
		before := len(l.stderr.lines())
		base, client := front(t, pluginNamed(t, l, c.settings+"maxFails: 0\n"+serversYAML([]string{c.server}), c.want))
		for k := 0; k < 3; k++ {
			if r := do(t, client, "GET", base+"/", ""); r.status != 502 && r.status != 504 {
				t.Errorf("%s: status %d", c.want, r.status)
			}
		}
		lines := l.stderr.lines()[before:]
		prefix := fmt.Sprintf("lbpack middleware %q: server %s: no answer: ", c.want, c.server)
		if len(lines) != 1 || !strings.HasPrefix(lines[0], prefix) || !strings.Contains(lines[0], c.want) {
			t.Errorf("error log %q, want one line %q...%s", lines, prefix, c.want)
		}
	}
}

// TestPluginFlushInterval: a response of known length that a server writes
// in parts reaches the client part by part, flushed every flushInterval
// (100ms by default, as Traefik's), not whole at its end.
func TestPluginFlushInterval(t *testing.T) {
	l := loadPlugin(t, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "11")
		io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		time.Sleep(time.Second)
		io.WriteString(w, " last")
		io.WriteString(w, "!")
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		settings string
		early    bool
	}{{"", true}, {"flushInterval: 20ms\n", true}, {"flushInterval: -1ms\n", true}, {"flushInterval: 1m\n", false}} {
		base, client := front(t, pluginNamed(t, l, c.settings+serversYAML([]string{srv.URL}), "flush "+c.settings))
		start := time.Now()
		resp, err := client.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		_, err = io.ReadFull(resp.Body, buf)
		took := time.Since(start)
		rest, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(buf)+string(rest) != "first last!" {
			t.Fatalf("%q: read %q %q, %v", c.settings, buf, rest, err)
		}
		if early := took < 700*time.Millisecond; early != c.early {
			t.Errorf("%q: the first part came after %v, want it before the last part: %v", c.settings, took, c.early)
		}
	}
}
