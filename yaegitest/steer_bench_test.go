package yaegitest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// nopSource is added to the interpreted plugin for BenchmarkSteer: a
// middleware that only calls next, the floor of any interpreted one.
const nopSource = `package traefikplugin

import "net/http"

type nop struct{ next http.Handler }

func (n *nop) ServeHTTP(w http.ResponseWriter, r *http.Request) { n.next.ServeHTTP(w, r) }

func Nop(next http.Handler) http.Handler { return &nop{next: next} }
`

// proxyLike answers as Traefik's proxy does behind a sticky service: it
// reads the request's cookie, sets a few response headers (the proxy copies
// the server's), writes the status and a short body of known length.
var proxyLike = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	r.Cookie("lb")
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	h.Set("Content-Length", "2")
	w.Header().Set("Date", "Tue, 01 Dec 2026 00:00:00 GMT")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte("ok"))
})

// BenchmarkSteer measures a steered request's CPU under the interpreter,
// its next a stand-in for Traefik's proxy, against a do-nothing
// interpreted middleware in front of the same (the floor).
func BenchmarkSteer(b *testing.B) {
	l := loadPlugin(b, map[string]string{"zz_nop.go": nopSource})
	nop := eval(b, l.i, "traefikplugin.Nop").(func(http.Handler) http.Handler)
	servers := "servers:\n  - url: http://10.0.0.1:80\n    weight: 5\n  - url: http://10.0.0.2:80\n    weight: 3\n  - url: http://10.0.0.3:80\n    weight: 2\n"
	w := &discard{h: http.Header{}}
	run := func(name string, h http.Handler) {
		b.Run(name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/some/path?id=42", nil)
			req = req.WithContext(context.Background())
			benchCPU(b, func(n int) {
				for k := 0; k < n; k++ {
					req.Header = http.Header{}
					clear(w.h)
					h.ServeHTTP(w, req)
				}
			})
		})
	}
	run("floor", nop(proxyLike))
	for _, c := range []struct{ name, doc string }{
		{"smooth_wrr", "strategy: smooth_wrr\n"},
		{"url_hash", "strategy: url_hash\n"},
		{"ip_hash", "strategy: ip_hash\n"},
		{"least_conn", "strategy: least_conn\n"},
		{"fair", "strategy: fair\n"},
		{"smooth_wrr_unread", "strategy: smooth_wrr\nreadAnswers: false\n"},
		{"url_hash_unread", "strategy: url_hash\nreadAnswers: false\n"},
		{"least_conn_unread", "strategy: least_conn\nreadAnswers: false\n"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		settings, err := settingsMap("mode: steer\ncookie: lb\n" + c.doc + servers)
		if err != nil {
			b.Fatal(err)
		}
		h, err := l.newHandlerNext(ctx, settings, fmt.Sprint("steer ", c.name), proxyLike)
		if err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		run(c.name, h)
		cancel()
	}
}
