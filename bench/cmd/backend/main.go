// Command backend serves n tiny HTTP backends on consecutive loopback ports
// for bench/e2e.sh. Backend i answers every request with its name ("b001",
// ...) and counts it; the control address answers GET /counts with the
// counts since the last call, one "name count" line each, and resets them.
//
//	backend -n 100 -port 19001 -control 127.0.0.1:19000
//
// For the slow-backend and fast-failing scenarios, every backend can take
// -delay to answer, backend -slow (1-based) -slow-delay instead, backend
// -fail answers 500 at once, and -workers bounds the requests each backend
// serves at a time (the others wait their turn, as at a server with that
// many workers):
//
//	backend -n 5 -port 19001 -control 127.0.0.1:19000 -delay 5ms -slow 5 -slow-delay 50ms -workers 8
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 3, "number of backends")
	host := flag.String("host", "127.0.0.1", "loopback address of the backends")
	port := flag.Int("port", 19001, "port of the first backend; the others follow")
	control := flag.String("control", "127.0.0.1:19000", "address of the counts endpoint")
	delay := flag.Duration("delay", 0, "how long every backend takes to answer")
	slow := flag.Int("slow", 0, "the backend (1-based) that takes -slow-delay instead; 0: none")
	slowDelay := flag.Duration("slow-delay", 50*time.Millisecond, "how long the -slow backend takes to answer")
	fail := flag.Int("fail", 0, "the backend (1-based) that answers 500 at once; 0: none")
	workers := flag.Int("workers", 0, "requests each backend serves at a time, the others waiting; 0: no bound")
	flag.Parse()
	if *n < 1 || *port < 1 || *port+*n > 65536 {
		log.Fatalf("backend: -n %d -port %d: ports out of range", *n, *port)
	}
	if *slow < 0 || *slow > *n || *fail < 0 || *fail > *n {
		log.Fatalf("backend: -slow %d -fail %d: want a backend from 1 to %d, or 0", *slow, *fail, *n)
	}
	if *delay < 0 || *slowDelay < 0 || *workers < 0 {
		log.Fatalf("backend: -delay %v -slow-delay %v -workers %d: must not be negative", *delay, *slowDelay, *workers)
	}
	counts := make([]atomic.Int64, *n)
	var servers []*http.Server
	for i := 0; i < *n; i++ {
		addr := net.JoinHostPort(*host, strconv.Itoa(*port+i))
		b := behaviour{delay: *delay, workers: *workers}
		if i+1 == *slow {
			b.delay = *slowDelay
		}
		b.fail = i+1 == *fail
		srv := &http.Server{Addr: addr, Handler: answer(fmt.Sprintf("b%03d", i+1), &counts[i], b), ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		ln, err := listen(addr)
		if err != nil {
			log.Fatalf("backend: %v", err)
		}
		go srv.Serve(ln)
	}
	ctl := &http.Server{Addr: *control, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for i := range counts {
			fmt.Fprintf(w, "b%03d %d\n", i+1, counts[i].Swap(0))
		}
	})}
	servers = append(servers, ctl)
	ln, err := listen(*control)
	if err != nil {
		log.Fatalf("backend: %v", err)
	}
	go ctl.Serve(ln)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range servers {
		s.Shutdown(ctx)
	}
}

// behaviour is how one backend answers.
type behaviour struct {
	delay   time.Duration // before answering
	fail    bool          // answer 500 at once
	workers int           // requests served at a time; 0: no bound
}

// answer is one backend's handler: its name, and a count.
func answer(name string, count *atomic.Int64, b behaviour) http.Handler {
	body := []byte(name + "\n")
	var slots chan struct{}
	if b.workers > 0 {
		slots = make(chan struct{}, b.workers)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		if b.fail {
			http.Error(w, name+" fails", http.StatusInternalServerError)
			return
		}
		if slots != nil {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-r.Context().Done():
				return
			}
		}
		if b.delay > 0 {
			time.Sleep(b.delay)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
}

// listen listens on addr, trying for up to 5 s: loopback ports above 32768
// are also handed out to outgoing connections, one of which may hold the
// port for a moment.
func listen(addr string) (net.Listener, error) {
	var err error
	for try := 0; try < 50; try++ {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}
