// Command backend serves n tiny HTTP backends on consecutive loopback ports
// for bench/e2e.sh. Backend i answers every request with its name ("b001",
// ...) and counts it; the control address answers GET /counts with the
// counts since the last call, one "name count" line each, and resets them.
//
//	backend -n 100 -port 19001 -control 127.0.0.1:19000
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
	port := flag.Int("port", 19001, "port of the first backend; the others follow")
	control := flag.String("control", "127.0.0.1:19000", "address of the counts endpoint")
	flag.Parse()
	if *n < 1 || *port < 1 || *port+*n > 65536 {
		log.Fatalf("backend: -n %d -port %d: ports out of range", *n, *port)
	}
	counts := make([]atomic.Int64, *n)
	var servers []*http.Server
	for i := 0; i < *n; i++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*port+i))
		srv := &http.Server{Addr: addr, Handler: answer(fmt.Sprintf("b%03d", i+1), &counts[i]), ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		ln, err := net.Listen("tcp", addr)
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
	ln, err := net.Listen("tcp", *control)
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

// answer is one backend's handler: its name, and a count.
func answer(name string, count *atomic.Int64) http.Handler {
	body := []byte(name + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		count.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
}
