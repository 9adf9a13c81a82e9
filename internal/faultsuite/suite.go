package faultsuite

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
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
// every 25 ms (320 requests/s, far below any host's capacity here; every
// 50 ms under the race detector), every fourth a POST of 4 KiB.
var DefaultLoad = Load{Workers: 8, Interval: interval(), PostEvery: 4, BodySize: 4096}

func interval() time.Duration {
	if raceEnabled {
		return 50 * time.Millisecond
	}
	return 25 * time.Millisecond
}

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

// Proxy starts the host in front of the backends' addresses, listening on
// the ports it is given: the first for the clients, the second for what
// the host needs besides (Caddy's admin endpoint).
type Proxy func(backends []string, dead int, ports []int) (Running, error)

// Running is a started proxy.
type Running struct {
	URL string
	// Pids are the proxy's processes, when it runs outside the test's
	// process: their connections are counted with the test's own.
	Pids func() []int
	// Tries counts the proxy's tries of the dead backend; nil if they
	// cannot be seen.
	Tries func() int64
	Stop  func()
	// Log, when set, returns the host's error log, shown when the case
	// misses a target.
	Log func() string
}

// PortSpan is how many ports from its base a suite may use: each case takes
// five that are free (see FreePorts).
const PortSpan = 50

// BasePort returns the first of a suite's ports: def, or the port in the
// environment variable env.
func BasePort(t *testing.T, env string, def int) int {
	s := os.Getenv(env)
	if s == "" {
		return def
	}
	p, err := strconv.Atoi(s)
	if err != nil || p <= 0 || p > 65535-PortSpan {
		t.Fatalf("%s=%q: want a port number", env, s)
	}
	return p
}

// FreePorts returns n loopback ports from first to last that can be
// listened on now. The suite's ports lie in the range the system hands out
// to outgoing connections (32768 and up), so one of them may be taken by
// some program's connection for a while; a proxy's own ports need not be
// fixed, unlike the backends'.
func FreePorts(first, last, n int) ([]int, error) {
	var ports []int
	for p := first; p <= last && len(ports) < n; p++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			ln.Close()
			ports = append(ports, p)
		}
	}
	if len(ports) < n {
		return nil, fmt.Errorf("only %d of the ports %d to %d are free, want %d", len(ports), first, last, n)
	}
	return ports, nil
}

// RunCase runs c: three backends, the proxy started by start, the fault
// scenario, then every backend down; it reports each missed target as a
// test error and returns the row. The case's ports are free ones from base
// to base+PortSpan-1: three for the backends, two for the proxy.
func RunCase(t *testing.T, base int, c Case, start Proxy) Row {
	t.Helper()
	epoch := time.Now()
	before := runtime.NumGoroutine()
	var backends []*Backend
	var addrs []string
	defer func() {
		for _, b := range backends {
			b.Kill()
		}
	}()
	ports, err := FreePorts(base, base+PortSpan-1, 5)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 3; k++ {
		b, err := NewBackend(string(rune('a'+k)), fmt.Sprintf("127.0.0.1:%d", ports[k]), epoch)
		if err != nil {
			t.Fatalf("backend: %v", err)
		}
		backends = append(backends, b)
		addrs = append(addrs, b.Addr)
	}
	const dead = 2
	run, err := start(addrs, dead, ports[3:])
	if err != nil {
		t.Fatalf("%s %s: %v", c.Host, c.Name, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			run.Stop()
		}
	}()
	load := DefaultLoad
	load.URL, load.Header = run.URL, c.Header
	end := End
	if c.End > 0 {
		end = c.End
	}
	// The scenario's clock starts now: the backends' epoch moves with it.
	now := time.Now()
	offset := now.Sub(epoch)
	sc := Scenario{Backends: backends, Dead: dead, Load: load, Epoch: epoch,
		KillAt: offset + KillAt, RestartAt: offset + RestartAt, End: offset + end, Tries: run.Tries}
	res := sc.Run()
	shift(&res, offset)
	for _, b := range backends {
		b.Kill()
	}
	down := AllDown(load, epoch, 12)
	row := Row{Host: c.Host, Case: c.Name, Result: res, Down: down, Goroutines: -1}
	// With the backends down and the clients gone, the proxy must hold no
	// connection to either (its second port is the suite's: Caddy's admin
	// endpoint, which the suite polls).
	pids := []int{os.Getpid()}
	if run.Pids != nil {
		pids = append(pids, run.Pids()...)
	}
	if row.Sockets, err = Sockets(ports[:4], pids); err != nil {
		t.Errorf("counting connections: %v", err)
	}
	run.Stop()
	stopped = true
	if c.InProcess {
		// With the proxy stopped and the backends down, every goroutine
		// the case started must have ended.
		row.Goroutines = Goroutines(before) - before
		if row.Goroutines < 0 {
			row.Goroutines = 0
		}
	}
	problems := row.Problems(c.Targets)
	for _, p := range problems {
		t.Errorf("%s, %s: %s", c.Host, c.Name, p)
	}
	if row.Goroutines > 0 {
		var sb strings.Builder
		pprof.Lookup("goroutine").WriteTo(&sb, 1)
		t.Logf("the goroutines after the case:\n%s", sb.String())
	}
	if len(problems) > 0 && run.Log != nil {
		t.Logf("%s's error log:\n%s", c.Host, tail(run.Log(), 20))
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
// directory up, when LBPACK_WRITE_DOCS=1; a run of some cases only (a -run
// filter: fewer rows than want) writes nothing, since the host's rows are
// replaced together.
func WriteDocs(t *testing.T, rows []Row, want int) {
	t.Helper()
	if os.Getenv("LBPACK_WRITE_DOCS") != "1" {
		return
	}
	if len(rows) != want {
		t.Errorf("LBPACK_WRITE_DOCS: %d of %d cases ran; docs/reliability.md is written from a run of all", len(rows), want)
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

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
