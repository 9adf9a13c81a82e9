// Command backends serves the example's upstreams: one HTTP server per
// port given, each answering with its own address (and 200 on /health), so
// that the balancing is visible with curl. Run one process per port to be
// able to stop one server:
//
//	backend=$(mktemp -d)/backend
//	go build -o "$backend" ./examples/traefik/backends
//	for port in 9001 9002 9003; do "$backend" $port & done
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: backends PORT...")
		os.Exit(2)
	}
	errs := make(chan error)
	for _, port := range os.Args[1:] {
		go serve("127.0.0.1:"+port, errs)
	}
	log.Fatal(<-errs)
}

// serve runs one server on addr until it fails.
func serve(addr string, errs chan<- error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s\n", addr, r.URL.RequestURI())
	})
	log.Printf("serving on %s", addr)
	errs <- http.ListenAndServe(addr, mux)
}
