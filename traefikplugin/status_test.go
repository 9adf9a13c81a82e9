package traefikplugin

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

func TestParseFailStatus(t *testing.T) {
	for _, c := range []struct {
		strategy string
		list     []string
		maxFails int
		fail     []int // statuses that count as failures
		pass     []int // statuses that do not
	}{
		{core.Fair, nil, 1, []int{500, 503, 599}, []int{200, 404, 429, 499, 600}},
		{core.Fair, []string{"502", "503"}, 0, []int{502, 503}, []int{500, 504}},
		{core.Fair, []string{"5xx", "429"}, 1, []int{429, 500, 599}, []int{428, 430, 404}},
		{core.Fair, []string{"500-504", " 4XX"}, 1, []int{400, 499, 500, 504}, []int{505, 399}},
		{core.LeastConn, []string{"5xx"}, 1, []int{500, 502}, []int{302, 404}},
		{core.SmoothWRR, []string{"503"}, 3, []int{503}, []int{500, 504}},
		{core.SmoothWRR, nil, 1, nil, []int{500, 503}},
		{core.LeastConn, nil, 1, nil, []int{500}},
	} {
		traits, _ := core.TraitsOf(c.strategy, "")
		table, err := parseFailStatus(c.list, traits, c.maxFails, false)
		if err != nil {
			t.Errorf("%s %q: %v", c.strategy, c.list, err)
			continue
		}
		if c.fail == nil && table != nil {
			t.Errorf("%s %q: a table, want none (no status fails)", c.strategy, c.list)
		}
		for _, code := range c.fail {
			if code >= len(table) || !table[code] {
				t.Errorf("%s %q: %d does not fail, want it to", c.strategy, c.list, code)
			}
		}
		for _, code := range c.pass {
			if code < len(table) && table[code] {
				t.Errorf("%s %q: %d fails, want it not to", c.strategy, c.list, code)
			}
		}
	}
}

func TestFailStatusErrors(t *testing.T) {
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.FailStatus = []string{"5xx", "600"} }, `failStatus[1] "600": want a status from 100 to 599, a class from 1xx to 5xx, or a range such as 500-504`},
		{func(c *Config) { c.FailStatus = []string{"6xx"} }, `failStatus[0] "6xx": want a status`},
		{func(c *Config) { c.FailStatus = []string{"http_500"} }, `failStatus[0] "http_500": want a status`},
		{func(c *Config) { c.FailStatus = []string{"504-500"} }, `failStatus[0] "504-500": want a status`},
		{func(c *Config) { c.FailStatus = []string{"5000"} }, `failStatus[0] "5000": want a status`},
		{func(c *Config) { c.FailStatus = []string{""} }, `failStatus[0] "": want a status`},
		{func(c *Config) { c.FailStatus = []string{"5xx", "503"} }, `failStatus[1] "503": overlaps failStatus[0] "5xx"`},
		{func(c *Config) { c.FailStatus = []string{"500-504", "502-599"} }, `failStatus[1] "502-599": overlaps failStatus[0] "500-504"`},
		{func(c *Config) { c.FailStatus = []string{"5xx"}; c.MaxFails = 0 }, `failStatus "5xx": has no effect with maxFails 0`},
		{func(c *Config) { c.Unknown = map[string]interface{}{"failStatuses": "5xx"} }, "failStatuses: unknown key (did you mean failStatus?)"},
	} {
		cfg := withServers(CreateConfig(), "http://10.0.0.1", "http://10.0.0.2")
		c.edit(cfg)
		_, err := New(t.Context(), nil, cfg, "lb")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), `lbpack middleware "lb": `) {
			t.Errorf("error %v, want one naming the middleware and containing %q", err, c.want)
		}
	}
}

// statusBackend answers every request with status after delay, and counts
// the requests.
func statusBackend(t *testing.T, status int, delay time.Duration, hits *int64, mu *sync.Mutex) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*hits++
		mu.Unlock()
		time.Sleep(delay)
		w.WriteHeader(status)
		fmt.Fprintf(w, "status %d", status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestFairAvoidsFastFailures is issue 13's sixth scenario through the
// plugin: of five servers, one answers 500 at once and four answer 200
// after 20 ms. fair must send the failing one at most 5% of requests,
// both with maxFails (the default 1: its first 500 takes it out for
// failTimeout) and without (fair's estimate alone). Before failStatus an
// answer was a success whatever its status, and the failing server,
// the fastest, got most requests. Each 500 still reaches the client,
// unretried.
func TestFairAvoidsFastFailures(t *testing.T) {
	for _, maxFails := range []int{1, 0} {
		t.Run(fmt.Sprintf("maxFails=%d", maxFails), func(t *testing.T) {
			var mu sync.Mutex
			hits := make([]int64, 5)
			var urls []string
			for k := range hits {
				status, delay := http.StatusOK, 20*time.Millisecond
				if k == 2 {
					status, delay = http.StatusInternalServerError, 0
				}
				urls = append(urls, statusBackend(t, status, delay, &hits[k], &mu))
			}
			cfg := withServers(CreateConfig(), urls...)
			cfg.Strategy = core.Fair
			cfg.MaxFails = maxFails
			p := newPlugin(t, cfg)
			front := httptest.NewServer(p)
			defer front.Close()
			const clients, each = 4, 120
			codes := make(chan int, clients*each)
			var wg sync.WaitGroup
			for g := 0; g < clients; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; k < each; k++ {
						res, err := front.Client().Get(front.URL + "/")
						if err != nil {
							codes <- -1
							continue
						}
						io.Copy(io.Discard, res.Body)
						res.Body.Close()
						codes <- res.StatusCode
					}
				}()
			}
			wg.Wait()
			close(codes)
			count := map[int]int{}
			for c := range codes {
				count[c]++
			}
			mu.Lock()
			failing, total := hits[2], int64(0)
			for _, h := range hits {
				total += h
			}
			mu.Unlock()
			t.Logf("maxFails %d: the failing server got %d of %d requests (%.1f%%); servers %v; answers %v",
				maxFails, failing, total, 100*float64(failing)/float64(total), hits, count)
			if total != clients*each {
				t.Errorf("servers saw %d requests, want %d: an answered request is never retried", total, clients*each)
			}
			if count[http.StatusInternalServerError] != int(failing) || count[http.StatusOK] != clients*each-int(failing) {
				t.Errorf("answers %v: want the failing server's %d 500s passed on and the rest 200", count, failing)
			}
			if failing*20 > total {
				t.Errorf("the server failing in 1 ms got %d of %d requests; want at most 5%%", failing, total)
			}
			if n := p.pending.Load(); n != 0 {
				t.Errorf("%d marks left pending after every request ended", n)
			}
		})
	}
}

// A failing status counts toward maxFails when failStatus names it, on
// smooth_wrr's untracked path and least_conn's counted one, and does not
// by default, as nginx without proxy_next_upstream http_500. The 500 goes
// to the client, unretried.
func TestFailStatusCountsTowardMaxFails(t *testing.T) {
	for _, strategy := range []string{core.SmoothWRR, core.LeastConn} {
		for _, c := range []struct {
			list  []string
			fails int64
		}{{nil, 0}, {[]string{"500"}, 1}, {[]string{"502-504"}, 0}} {
			var mu sync.Mutex
			var hits [2]int64
			bad := statusBackend(t, http.StatusInternalServerError, 0, &hits[0], &mu)
			good := statusBackend(t, http.StatusOK, 0, &hits[1], &mu)
			cfg := withServers(CreateConfig(), bad, good)
			cfg.Strategy = strategy
			cfg.FailStatus = c.list
			cfg.MaxFails = 3
			p := newPlugin(t, cfg)
			forget(t.Name())
			front := httptest.NewServer(p)
			res, err := front.Client().Get(front.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			front.Close()
			name := fmt.Sprintf("%s, failStatus %q", strategy, c.list)
			if res.StatusCode != http.StatusInternalServerError || string(body) != "status 500" {
				t.Errorf("%s: answer %d %q, want the server's 500", name, res.StatusCode, body)
			}
			b := p.bal.Load().(*balancer)
			if got := b.Fails(0); got != c.fails {
				t.Errorf("%s: %d failures after a 500, want %d", name, got, c.fails)
			}
			if hits != [2]int64{1, 0} {
				t.Errorf("%s: servers saw %v, want one request, unretried", name, hits)
			}
			if n := b.InFlight(0); n != 0 {
				t.Errorf("%s: %d requests in flight after the answer", name, n)
			}
		}
	}
}

// A 500 whose body breaks off midway ends the proxy with a panic before
// the request can take its mark: the mark goes when the request ends, so
// that nothing is left pending (every later request would pay a look-up).
func TestFailStatusMarkDroppedOnAbort(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	}))
	defer broken.Close()
	cfg := withServers(CreateConfig(), broken.URL)
	cfg.Strategy = core.Fair
	p := newPlugin(t, cfg)
	front := httptest.NewServer(p)
	defer front.Close()
	for k := 0; k < 3; k++ {
		if res, err := front.Client().Get(front.URL + "/"); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.pending.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := p.pending.Load(); n != 0 {
		t.Errorf("%d marks pending after the broken answers ended", n)
	}
	if n := p.bal.Load().(*balancer).InFlight(0); n != 0 {
		t.Errorf("%d requests in flight after all ended", n)
	}
}
