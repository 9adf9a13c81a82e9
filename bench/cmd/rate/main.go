// Command rate sends HTTP GETs at a fixed rate, whatever the answers' speed
// (an open loop: a slow answer does not hold the next request back), and
// reports the latencies, for bench/e2e.sh's scenarios. Request k is due at
// start + k/rate and its latency counts from then, so that a delay in
// sending counts too. Every request asks for a path of its own (/k/N), so
// that hash policies spread the load.
//
//	rate -url http://127.0.0.1:8080 -rate 400 -duration 5s
//
// It prints one line: requests sent, answered 2xx, answered otherwise,
// failed (no answer), not sent (more than -max-inflight in flight), then the
// p50, p99 and mean latency in milliseconds of the requests that got an
// answer.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"time"

	"github.com/lbpack/lbpack/internal/faultsuite"
)

func main() {
	url := flag.String("url", "", "base URL to load")
	rate := flag.Float64("rate", 100, "requests per second")
	duration := flag.Duration("duration", 5*time.Second, "how long to send")
	maxInFlight := flag.Int("max-inflight", 1000, "requests in flight at most; one due beyond it is not sent")
	timeout := flag.Duration("timeout", 10*time.Second, "bound of one request")
	flag.Parse()
	if *url == "" || *rate <= 0 || *duration <= 0 || *maxInFlight < 1 {
		log.Fatalf("rate: -url %q -rate %v -duration %v -max-inflight %d: want a URL and positive figures", *url, *rate, *duration, *maxInFlight)
	}
	client := &http.Client{
		Timeout:   *timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: *maxInFlight, DisableCompression: true},
	}
	r := run(client, *url, *rate, *duration, *maxInFlight)
	fmt.Println(r)
}

// result is what a run saw.
type result struct {
	sent, ok, other, failed, skipped int
	latencies                        []time.Duration // of the answered requests
}

func (r result) String() string {
	var sum time.Duration
	for _, d := range r.latencies {
		sum += d
	}
	mean := time.Duration(0)
	if len(r.latencies) > 0 {
		mean = sum / time.Duration(len(r.latencies))
	}
	return fmt.Sprintf("%d %d %d %d %d %.2f %.2f %.2f", r.sent, r.ok, r.other, r.failed, r.skipped,
		msOf(faultsuite.Quantile(r.latencies, 0.50)), msOf(faultsuite.Quantile(r.latencies, 0.99)), msOf(mean))
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// run sends the requests on schedule and waits for the last answer.
func run(client *http.Client, url string, rate float64, duration time.Duration, maxInFlight int) result {
	var mu sync.Mutex
	var r result
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxInFlight)
	start := time.Now()
	n := int(rate * duration.Seconds())
	for k := 0; k < n; k++ {
		due := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		select {
		case slots <- struct{}{}:
		default:
			r.skipped++
			continue
		}
		r.sent++
		wg.Add(1)
		go func(k int, due time.Time) {
			defer wg.Done()
			defer func() { <-slots }()
			status, err := get(client, fmt.Sprintf("%s/k/%d", url, (k*7919)%100003))
			took := time.Since(due)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				r.failed++
				return
			case status >= 200 && status < 300:
				r.ok++
			default:
				r.other++
			}
			r.latencies = append(r.latencies, took)
		}(k, due)
	}
	wg.Wait()
	return r
}

// get fetches url and reads the answer whole.
func get(client *http.Client, url string) (int, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}
