package faultsuite

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"
)

// The timeline of every case: the load runs for End (or the case's own
// End), the third backend is killed at KillAt and restarted at RestartAt.
const (
	KillAt    = 1 * time.Second
	RestartAt = 2500 * time.Millisecond
	End       = 4 * time.Second
)

// DefaultLoad is the load of every case: 8 clients, each sending a request
// every 25 ms (320 requests/s, far below any host's capacity here), every
// fourth a POST of 4 KiB.
var DefaultLoad = Load{Workers: 8, Interval: 25 * time.Millisecond, PostEvery: 4, BodySize: 4096}

// Case is one host and configuration.
type Case struct {
	Host    string
	Name    string
	Targets Targets
	// End, when set, is the case's own end of the load: later, for a
	// slow start's ramp or a host that takes longer to try the backend
	// again.
	End time.Duration
	// Header adds headers to request n (see Load.Header).
	Header func(n int, h http.Header)
	// InProcess: the proxy runs in the test's process, so its goroutines
	// are counted.
	InProcess bool
}

// Proxy starts the host in front of the backends' addresses and returns
// its base URL, a count of its tries of the dead backend (nil if it cannot
// be seen) and a function that stops it.
type Proxy func(backends []string, dead int) (url string, tries func() int64, stop func(), err error)

// Ports are the case's loopback ports: the three backends on base, base+1
// and base+2; the proxy may use base+3 to base+9.
func Ports(base int) []int {
	p := make([]int, 10)
	for k := range p {
		p[k] = base + k
	}
	return p
}

// RunCase runs c: three backends on base's ports, the proxy started by
// start, the fault scenario, then every backend down; it reports each
// missed target as a test error and returns the row.
func RunCase(t *testing.T, base int, c Case, start Proxy) Row {
	t.Helper()
	epoch := time.Now()
	var backends []*Backend
	var addrs []string
	defer func() {
		for _, b := range backends {
			b.Kill()
		}
	}()
	for k := 0; k < 3; k++ {
		b, err := NewBackend(string(rune('a'+k)), fmt.Sprintf("127.0.0.1:%d", base+k), epoch)
		if err != nil {
			t.Fatalf("backend: %v", err)
		}
		backends = append(backends, b)
		addrs = append(addrs, b.Addr)
	}
	const dead = 2
	url, tries, stop, err := start(addrs, dead)
	if err != nil {
		t.Fatalf("%s %s: %v", c.Host, c.Name, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	before := runtime.NumGoroutine()
	load := DefaultLoad
	load.URL, load.Header = url, c.Header
	end := End
	if c.End > 0 {
		end = c.End
	}
	// The scenario's clock starts now: the backends' epoch moves with it.
	now := time.Now()
	offset := now.Sub(epoch)
	sc := Scenario{Backends: backends, Dead: dead, Load: load, Epoch: epoch,
		KillAt: offset + KillAt, RestartAt: offset + RestartAt, End: offset + end, Tries: tries}
	res := sc.Run()
	shift(&res, offset)
	for _, b := range backends {
		b.Kill()
	}
	down := AllDown(load, epoch, 12)
	row := Row{Host: c.Host, Case: c.Name, Load: load, Result: res, Down: down, Goroutines: -1, Span: end}
	if c.InProcess {
		// The backends' own goroutines are gone too; what the load or the
		// faults started must be.
		row.Goroutines = Goroutines(before) - before
		if row.Goroutines < 0 {
			row.Goroutines = 0
		}
	}
	stop()
	stopped = true
	if row.Sockets, err = Sockets(Ports(base)); err != nil {
		t.Errorf("counting connections: %v", err)
	}
	for _, p := range row.Problems(c.Targets) {
		t.Errorf("%s, %s: %s", c.Host, c.Name, p)
	}
	t.Logf("%s", row.Markdown())
	return row
}

// shift makes the result's times relative to the scenario's start.
func shift(r *Result, offset time.Duration) {
	for k := range r.Requests {
		r.Requests[k].At -= offset
	}
}

// WriteDocs writes rows to docs/reliability.md, found from the test's
// directory up, when LBPACK_WRITE_DOCS=1.
func WriteDocs(t *testing.T, rows []Row) {
	t.Helper()
	if os.Getenv("LBPACK_WRITE_DOCS") != "1" || len(rows) == 0 {
		return
	}
	path := "docs/reliability.md"
	for k := 0; k < 3; k++ {
		if _, err := os.Stat(path); err == nil {
			break
		}
		path = "../" + path
	}
	if err := WriteRows(path, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d rows to %s", len(rows), path)
}
