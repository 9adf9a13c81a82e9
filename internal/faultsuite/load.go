package faultsuite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Load is a steady load through a proxy: Workers clients, each sending a
// request every Interval (a slow answer delays that worker's next request,
// not the others'), every PostEvery-th of them a POST with a BodySize body
// whose checksum travels in SumHeader. Every request asks for a different
// path, so that the hash policies spread the load.
type Load struct {
	URL       string // the proxy's base URL
	Workers   int
	Interval  time.Duration
	PostEvery int
	BodySize  int
	// Header, when set, adds headers to request n (the ip_hash suites send
	// a different X-Forwarded-For per request).
	Header func(n int, h http.Header)
	// Timeout bounds each request (default 10 s): a hang shows as an error.
	Timeout time.Duration
}

// Request is what the client saw of one request.
type Request struct {
	At     time.Duration // when it was sent, since the run's epoch
	Took   time.Duration
	Post   bool
	Status int    // 0 when the transport failed
	Err    string // the transport error, if any
}

// OK reports whether the client got the backend's answer.
func (q Request) OK() bool { return q.Status == http.StatusOK }

// Client returns an HTTP client for the load, with its own connection pool.
func (l Load) Client() *http.Client {
	timeout := l.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	return &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: l.Workers + 1, DisableCompression: true},
		Timeout:   timeout,
	}
}

// Run sends the load with client until ctx ends and returns every request,
// in the order they were sent.
func (l Load) Run(ctx context.Context, client *http.Client, epoch time.Time) []Request {
	var mu sync.Mutex
	var all []Request
	var wg sync.WaitGroup
	for w := 0; w < l.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 1))
			body := make([]byte, l.BodySize)
			var mine []Request
			next := time.Now().Add(time.Duration(w) * l.Interval / time.Duration(l.Workers))
			for k := 0; ; k++ {
				if d := time.Until(next); d > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(d):
					}
				}
				if ctx.Err() != nil {
					break
				}
				next = next.Add(l.Interval)
				n := k*l.Workers + w
				post := l.PostEvery > 0 && k%l.PostEvery == l.PostEvery-1
				rng.Read(body)
				mine = append(mine, l.send(client, epoch, n, post, body))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i].At < all[j].At })
	return all
}

// send makes request n and reads its answer whole.
func (l Load) send(client *http.Client, epoch time.Time, n int, post bool, body []byte) Request {
	method, rd := http.MethodGet, io.Reader(nil)
	if post {
		method, rd = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, fmt.Sprintf("%s/k/%d", l.URL, n), rd)
	if err != nil {
		panic(err) // the URL is the suite's own
	}
	if post {
		sum := sha256.Sum256(body)
		req.Header.Set(SumHeader, hex.EncodeToString(sum[:]))
	}
	if l.Header != nil {
		l.Header(n, req.Header)
	}
	start := time.Now()
	q := Request{At: start.Sub(epoch), Post: post}
	resp, err := client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		q.Status = resp.StatusCode
	}
	if err != nil {
		q.Status, q.Err = 0, err.Error()
	}
	q.Took = time.Since(start)
	return q
}

// SpreadClients gives request n a client address of its own /24 in
// X-Forwarded-For: with the proxy (127.0.0.1) trusted, the load comes from
// many clients, as ip_hash needs to spread it.
func SpreadClients(n int, h http.Header) {
	h.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.7", n%200, (n/200)%250))
}
