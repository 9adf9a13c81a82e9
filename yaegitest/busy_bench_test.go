package yaegitest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// busySource is added to the interpreted plugin for BenchmarkPluginBusy: it
// holds requests in flight and gives servers a latency estimate, as
// sustained load leaves them.
const busySource = `package traefikplugin

import (
	"net/http"
	"time"

	"github.com/lbpack/lbpack/core"
)

// Hold starts n[i] requests to server i that never end, and feeds each
// server one latency sample of (i+1) ms.
func Hold(h http.Handler, n []int) {
	b := h.(*Plugin).bal.Load().(*balancer).Balancer
	for i := range n {
		core.Start(b, i)
		core.Done(b, i, time.Duration(i+1)*time.Millisecond, false)
		for k := 0; k < n[i]; k++ {
			core.Start(b, i)
		}
	}
}

// StartDoneLoop starts and ends n requests to server 1 with a latency of
// 2 ms, as a tracked request does around its proxying.
func StartDoneLoop(h http.Handler) func(n int) {
	b := h.(*Plugin).bal.Load().(*balancer).Balancer
	return func(n int) {
		for k := 0; k < n; k++ {
			core.Start(b, 1)
			core.Done(b, 1, 2*time.Millisecond, false)
		}
	}
}

// PickLoop picks n times as ServeHTTP does for a non-table strategy.
func PickLoop(h http.Handler) func(n int) {
	b := h.(*Plugin).bal.Load().(*balancer).Balancer
	return func(n int) {
		for k := 0; k < n; k++ {
			core.PickIndex(b, "")
		}
	}
}
`

// BenchmarkPluginBusy measures the interpreted plugin's request (proxying
// stubbed) and its pick alone over three servers of weights 5, 3 and 2 with
// requests in flight, as under sustained load: no tie among the least
// loaded, two tied, all three tied by weight.
func BenchmarkPluginBusy(b *testing.B) {
	l := loadPlugin(b, map[string]string{"zz_stub.go": stubSource, "zz_busy.go": busySource})
	stubProxies := eval(b, l.i, "traefikplugin.StubProxies").(func(http.Handler, http.Handler))
	hold := eval(b, l.i, "traefikplugin.Hold").(func(http.Handler, []int))
	pickLoop := eval(b, l.i, "traefikplugin.PickLoop").(func(http.Handler) func(int))
	startDone := eval(b, l.i, "traefikplugin.StartDoneLoop").(func(http.Handler) func(int))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	servers := "servers:\n  - url: http://10.0.0.1:80\n    weight: 5\n  - url: http://10.0.0.2:80\n    weight: 3\n  - url: http://10.0.0.3:80\n    weight: 2\n"
	req := httptest.NewRequest("GET", "/some/path?id=42", nil)
	w := &discard{h: http.Header{}}
	for _, c := range []struct {
		name, doc string
		held      []int
	}{
		{"smooth_wrr", "strategy: smooth_wrr\n", []int{6, 3, 1}},
		{"least_conn/none_tie", "strategy: least_conn\n", []int{6, 3, 1}},
		{"least_conn/two_tie", "strategy: least_conn\n", []int{5, 3, 3}},
		{"least_conn/all_tie", "strategy: least_conn\n", []int{5, 3, 2}},
		{"least_conn_two_choices", "strategy: least_conn\ntwoChoices: true\n", []int{6, 3, 1}},
		{"fair", "strategy: fair\n", []int{6, 3, 1}},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		h, err := l.newHandler(ctx, c.doc+servers, fmt.Sprint("busy ", c.name))
		if err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		stubProxies(h, ok)
		hold(h, c.held)
		b.Run(c.name+"/request", func(b *testing.B) {
			benchCPU(b, func(n int) {
				for k := 0; k < n; k++ {
					h.ServeHTTP(w, req)
				}
			})
		})
		b.Run(c.name+"/pick", func(b *testing.B) { benchCPU(b, pickLoop(h)) })
		b.Run(c.name+"/start_done", func(b *testing.B) { benchCPU(b, startDone(h)) })
		cancel()
	}
}
