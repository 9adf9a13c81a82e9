// Package faultsuite is the harness of lbpack's fault suite: loopback
// backends that can be killed and restarted on their address and that verify
// every request body by its checksum, a steady paced load of GETs and POSTs,
// the run of one fault scenario with what it measures, and the table in
// docs/reliability.md. The suites that drive a host with it are faults/
// (Caddy and nginx) and yaegitest (the Traefik plugin under yaegi).
package faultsuite

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SumHeader carries the hex SHA-256 of a request's body; a backend answers
// 422 to a body that does not match it.
const SumHeader = "X-Body-Sum"

// Backend is a loopback HTTP server on a fixed address. Kill stops it as a
// crashed process stops (listener closed, every connection cut, requests in
// flight lost); Restart brings it back on the same address.
type Backend struct {
	Name string
	Addr string // host:port

	mu     sync.Mutex
	srv    *http.Server
	served []time.Duration // when each request was answered, since epoch
	epoch  time.Time

	badBodies atomic.Int64
	bodies    atomic.Int64
}

// NewBackend starts a backend named name on addr (a loopback host:port);
// times it records count from epoch.
func NewBackend(name, addr string, epoch time.Time) (*Backend, error) {
	b := &Backend{Name: name, Addr: addr, epoch: epoch}
	return b, b.Restart()
}

// ServeHTTP answers /health with 200 and every other request with its name,
// after reading the body whole and checking it against SumHeader.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		return
	}
	if want := r.Header.Get(SumHeader); want != "" || r.ContentLength > 0 {
		b.mu.Lock()
		srv := b.srv
		b.mu.Unlock()
		h := sha256.New()
		_, err := io.Copy(h, r.Body)
		if err != nil && b.killedSince(srv) {
			return // the kill cut the body: a request lost, not a damaged one
		}
		b.bodies.Add(1)
		if err != nil || hex.EncodeToString(h.Sum(nil)) != want {
			b.badBodies.Add(1)
			http.Error(w, "body checksum mismatch", http.StatusUnprocessableEntity)
			return
		}
	}
	w.Header().Set("X-Backend", b.Name)
	io.WriteString(w, b.Name)
	b.mu.Lock()
	b.served = append(b.served, time.Since(b.epoch))
	b.mu.Unlock()
}

// Kill stops the backend at once: its listener closes (new connections are
// refused) and every open connection is cut.
func (b *Backend) Kill() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	b.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// killedSince reports whether the backend was killed since it ran as srv.
func (b *Backend) killedSince(srv *http.Server) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.srv != srv
}

// Restart starts the backend again on its address.
func (b *Backend) Restart() error {
	ln, err := Listen(b.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	b.mu.Lock()
	b.srv = srv
	b.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ln.Close()
		}
	}()
	return nil
}

// Served returns when each request the backend answered was answered.
func (b *Backend) Served() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.served...)
}

// servedSince reports whether the backend answered a request at t or later.
func (b *Backend) servedSince(t time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.served) > 0 && b.served[len(b.served)-1] >= t
}

// BadBodies is how many request bodies did not match their checksum, of
// Bodies received.
func (b *Backend) BadBodies() int64 { return b.badBodies.Load() }

// Bodies is how many request bodies the backend read.
func (b *Backend) Bodies() int64 { return b.bodies.Load() }

// Listen listens on addr, trying for up to 2 s: the suite's fixed ports lie
// in the range the system also hands out to outgoing connections, and one
// of those may hold the port for a moment.
func Listen(addr string) (net.Listener, error) {
	var ln net.Listener
	var err error
	for try := 0; try < 40; try++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, err
}

// Retry calls start until it succeeds or fails other than with "address
// already in use" (see Listen), for up to 2 s.
func Retry(start func() error) error {
	var err error
	for try := 0; try < 40; try++ {
		if err = start(); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
