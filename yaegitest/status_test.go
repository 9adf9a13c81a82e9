package yaegitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// statusServer answers every request with status after delay, naming
// itself, and counts the requests.
func statusServer(t *testing.T, name string, status int, delay time.Duration) (string, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		time.Sleep(delay)
		w.Header().Set("X-Backend", name)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &hits
}

// TestPluginFairAvoidsFastFailures: under the loader, fair sends a server
// that answers 500 at once at most 5% of requests, while four others
// answer 200 after 20 ms (issue 13's sixth scenario): failStatus's default
// 5xx makes each 500 a failure, which the interpreted ModifyResponse marks
// and the request takes. With maxFails 0 only fair's estimate keeps it
// away. Each 500 reaches the client, unretried.
func TestPluginFairAvoidsFastFailures(t *testing.T) {
	l := loadPlugin(t, nil)
	var urls []string
	var hits []*atomic.Int64
	for k := 0; k < 5; k++ {
		status, delay := http.StatusOK, 20*time.Millisecond
		if k == 2 {
			status, delay = http.StatusInternalServerError, 0
		}
		u, h := statusServer(t, fmt.Sprint(k), status, delay)
		urls = append(urls, u)
		hits = append(hits, h)
	}
	base, client := front(t, plugin(t, l, "strategy: fair\nmaxFails: 0\n"+serversYAML(urls)))
	const clients, each = 4, 100
	var wg sync.WaitGroup
	var served500, servedOK, other atomic.Int64
	for g := 0; g < clients; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; k++ {
				res, err := client.Get(base + "/")
				if err != nil {
					other.Add(1)
					continue
				}
				res.Body.Close()
				switch res.StatusCode {
				case http.StatusInternalServerError:
					served500.Add(1)
				case http.StatusOK:
					servedOK.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	total := int64(0)
	var seen []int64
	for _, h := range hits {
		total += h.Load()
		seen = append(seen, h.Load())
	}
	failing := hits[2].Load()
	t.Logf("the failing server got %d of %d requests (%.1f%%); servers %v", failing, total, 100*float64(failing)/float64(total), seen)
	if total != clients*each || served500.Load() != failing || other.Load() != 0 {
		t.Errorf("servers saw %d requests (want %d), clients got %d 500s (want %d) and %d other answers or errors (want 0)",
			total, clients*each, served500.Load(), failing, other.Load())
	}
	if failing*20 > total {
		t.Errorf("the server failing at once got %d of %d requests; want at most 5%%", failing, total)
	}
}
