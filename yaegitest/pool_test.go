package yaegitest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestPluginConcurrentResponses: responses proxied at once, each copied
// through a buffer of the plugin's pool, arrive intact. Under go test
// -race it also fails on a pool whose Put is a select with a default:
// yaegi v0.16.1 shares a select's cases among the goroutines running it,
// so two Puts could both return one buffer, later lent to two responses.
func TestPluginConcurrentResponses(t *testing.T) {
	l := loadPlugin(t, nil)
	body := strings.Repeat("0123456789abcdef", 6400) // 100 KiB: several buffers' worth
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	t.Cleanup(srv.Close)
	base, client := front(t, plugin(t, l, serversYAML([]string{srv.URL})))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 30; k++ {
				resp, err := client.Get(base + "/")
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != body {
					t.Errorf("a body of %d bytes, not the %d sent", len(b), len(body))
					return
				}
			}
		}()
	}
	wg.Wait()
}
