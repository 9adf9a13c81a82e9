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

// Hold holds n[i] requests to server i in flight, never ended, and feeds
// each server one latency sample of (i+1) ms, where the balancer counts
// requests (under the others there is nothing to hold).
func Hold(h http.Handler, n []int) {
	p := h.(*Plugin)
	if t, _ := core.TraitsOf(p.s.balancer.Strategy, p.s.balancer.HashMode); !t.Counts {
		return
	}
	b := p.bal.Load().(*balancer).Balancer
	for i := range n {
		only := core.Filter{Allow: onlyServer(i)}
		j, t := core.Pick(b, "", only)
		core.Done(b, j, t, time.Duration(i+1)*time.Millisecond, false)
		for k := 0; k < n[i]; k++ {
			core.Pick(b, "", only)
		}
	}
}

// onlyServer allows server i alone.
func onlyServer(i int) func(int) bool { return func(j int) bool { return j == i } }

// StartDoneLoop begins and ends n requests to server 1 with a latency of
// 2 ms, as a tracked request does around its proxying (Done with a ticket
// of its own).
func StartDoneLoop(h http.Handler) func(n int) {
	b := h.(*Plugin).bal.Load().(*balancer).Balancer
	return func(n int) {
		for k := 0; k < n; k++ {
			core.Done(b, 1, 1, 2*time.Millisecond, false)
		}
	}
}

// PickLoop picks n times as ServeHTTP does for a non-table strategy, each
// request ended at once.
func PickLoop(h http.Handler) func(n int) {
	b := h.(*Plugin).bal.Load().(*balancer).Balancer
	return func(n int) {
		for k := 0; k < n; k++ {
			i, c, t := core.Take(b, "")
			if c != nil {
				c.Add(-1)
			}
			if t != 0 {
				core.Done(b, i, t, core.NotSent, false)
			}
		}
	}
}
`

// BenchmarkPluginBusy measures the interpreted plugin's request (proxying
// stubbed) and its pick alone over three servers of weights 5, 3 and 2 with
// requests in flight, as under sustained load: no tie among the least
// loaded, two tied, all three tied by weight; and the request under the
// strategies that count nothing and are not table schedules (weighted_random,
// url_hash by the request's URI, ip_hash by its client address).
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
		keyed     bool // the request only: PickLoop's picks have no key
	}{
		{"smooth_wrr", "strategy: smooth_wrr\n", []int{6, 3, 1}, false},
		{"least_conn/none_tie", "strategy: least_conn\n", []int{6, 3, 1}, false},
		{"least_conn/two_tie", "strategy: least_conn\n", []int{5, 3, 3}, false},
		{"least_conn/all_tie", "strategy: least_conn\n", []int{5, 3, 2}, false},
		{"least_conn_two_choices", "strategy: least_conn\ntwoChoices: true\n", []int{6, 3, 1}, false},
		{"fair", "strategy: fair\n", []int{6, 3, 1}, false},
		{"weighted_random", "strategy: weighted_random\n", nil, false},
		{"url_hash", "strategy: url_hash\n", nil, true},
		{"ip_hash", "strategy: ip_hash\n", nil, true},
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
		if !c.keyed {
			b.Run(c.name+"/pick", func(b *testing.B) { benchCPU(b, pickLoop(h)) })
			b.Run(c.name+"/start_done", func(b *testing.B) { benchCPU(b, startDone(h)) })
		}
		cancel()
	}
}
