package core_test

import (
	"fmt"
	"time"

	"github.com/lbpack/lbpack/core"
)

// Weights 5, 3 and 2 give nginx's smooth sequence, which never sends two
// requests in a row to a backend that holds half the weight or less.
func ExampleNew() {
	b, err := core.New(core.Config{
		Strategy: core.SmoothWRR,
		Backends: []core.Backend{
			{Address: "10.0.0.1:80", Weight: 5},
			{Address: "10.0.0.2:80", Weight: 3},
			{Address: "10.0.0.3:80", Weight: 2},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 10; i++ {
		p, _ := core.Pick(b, "", core.Filter{}) // smooth_wrr counts nothing: no Done on success
		fmt.Print(string(rune('a'+p)), " ")
	}
	fmt.Println()
	// Output: a b c a a b a c b a
}

// Bad input is reported at construction, naming the field and the value.
func ExampleNew_error() {
	_, err := core.New(core.Config{
		Strategy: core.SmoothWRR,
		Backends: []core.Backend{{Address: "10.0.0.1:80", Weight: 0}},
	})
	fmt.Println(err)
	// Output: lbpack: backends[0].weight 0: must be from 1 to 1000000
}

// Pick begins a request; its ticket says whether the request's end must
// reach Done even when it succeeds (it must whenever Pick counts the
// request in flight, or times it).
func ExamplePick() {
	b, _ := core.New(core.Config{
		Strategy: core.GCDWRR,
		Backends: []core.Backend{
			{Address: "10.0.0.1:80", Weight: 6},
			{Address: "10.0.0.2:80", Weight: 3},
			{Address: "10.0.0.3:80", Weight: 1},
		},
	})
	for i := 0; i < 10; i++ {
		p, t := core.Pick(b, "", core.Filter{})
		fmt.Print(b.Backend(p).Address[7:8], " ")
		if t != 0 {
			core.Done(b, p, t, core.SincePick, false)
		}
	}
	fmt.Println()
	// Output: 1 1 1 1 2 1 2 1 2 3
}

// The caller's view of availability: here backend b is refused (say, a failed
// health check), and nginx's rule shares its turns out among a and c.
func ExampleFilter() {
	b, _ := core.New(core.Config{
		Strategy: core.SmoothWRR,
		Backends: []core.Backend{
			{Address: "10.0.0.1:80", Weight: 5},
			{Address: "10.0.0.2:80", Weight: 3},
			{Address: "10.0.0.3:80", Weight: 2},
		},
	})
	notB := core.Filter{Allow: func(i int) bool { return i != 1 }, Version: 1}
	counts := make([]int, 3)
	for i := 0; i < 70; i++ {
		p, _ := core.Pick(b, "", notB)
		counts[p]++
	}
	fmt.Println(counts)
	none := core.Filter{Allow: func(int) bool { return false }}
	p, _ := core.Pick(b, "", none)
	fmt.Println(p)
	// Output:
	// [50 0 20]
	// -1
}

// A trace is the step table of nginx's algorithm: current weights before the
// pick, the choice, current weights after it.
func ExampleTrace() {
	steps, _ := core.Trace(core.Config{
		Strategy: core.SmoothWRR,
		Backends: []core.Backend{
			{Address: "a:80", Weight: 5},
			{Address: "b:80", Weight: 3},
			{Address: "c:80", Weight: 2},
		},
	}, 4)
	for i, s := range steps {
		fmt.Println(i+1, s.Before, string(rune('a'+s.Chosen)), s.After)
	}
	// Output:
	// 1 [0 0 0] a [-5 3 2]
	// 2 [-5 3 2] b [0 -4 4]
	// 3 [0 -4 4] c [5 -1 -4]
	// 4 [5 -1 -4] a [0 2 -2]
}

// Update keeps the strategy and options and the state of addresses that stay.
func ExampleBalancer_Update() {
	b, _ := core.New(core.Config{
		Strategy: core.LeastConn,
		Backends: []core.Backend{{Address: "10.0.0.1:80", Weight: 1}, {Address: "10.0.0.2:80", Weight: 1}},
	})
	i, t := core.Pick(b, "", core.Filter{Allow: func(i int) bool { return i == 1 }})
	nb, _ := b.Update([]core.Backend{{Address: "10.0.0.2:80", Weight: 1}, {Address: "10.0.0.3:80", Weight: 1}})
	fmt.Println(nb.Index("10.0.0.2:80"), nb.InFlight(0), nb.Strategy())
	core.Done(b, i, t, core.SincePick, false) // the request ends on the old balancer, and on the new one's count
	fmt.Println(nb.InFlight(0))
	// Output:
	// 0 1 least_conn
	// 0
}

// A caller that ends its requests with a deferred call, as the Traefik
// plugin does under its interpreter: Take hands back the backend's count of
// requests in flight, whose Add(-1), deferred, ends the request even if the
// proxying panics; Done, with the ticket, gives fair its latency (and any
// strategy a failure, or a success after failures). Under least_conn the
// next pick goes to the other backend while the first request is in flight.
func ExampleTake() {
	b, err := core.New(core.Config{
		Strategy: core.LeastConn,
		Backends: []core.Backend{{Address: "10.0.0.1:80", Weight: 1}, {Address: "10.0.0.2:80", Weight: 1}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	serve := func(then func()) {
		i, n, t := core.Take(b, "")
		if n != nil {
			defer n.Add(-1)
		} else {
			defer core.Done(b, i, t, core.SincePick, false)
		}
		fmt.Println("to", i, "in flight", b.InFlight(i))
		if then != nil {
			then()
		}
		if n != nil && t != 0 {
			core.Done(b, i, t, core.SincePick, false) // not here: least_conn, no failures
		}
	}
	serve(func() { serve(nil) })
	fmt.Println("after", b.InFlight(0), b.InFlight(1))
	// Output:
	// to 0 in flight 1
	// to 1 in flight 1
	// after 0 0
}

// Done times an answer from its pick with SincePick: fair's estimate of the
// backend.
func ExampleDone() {
	b, err := core.New(core.Config{
		Strategy: core.Fair,
		Backends: []core.Backend{{Address: "10.0.0.1:80", Weight: 1}, {Address: "10.0.0.2:80", Weight: 1}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for k := 0; k < 2; k++ {
		i, t := core.Pick(b, "", core.Filter{})
		if i < 0 {
			fmt.Println("no backend")
			return
		}
		time.Sleep(time.Millisecond) // the request
		core.Done(b, i, t, core.SincePick, false)
	}
	fmt.Println(b.Requests(0)+b.Requests(1), "requests, in flight", b.InFlight(0)+b.InFlight(1))
	fmt.Println("estimates at least 1ms:", b.Latency(0) >= time.Millisecond || b.Latency(1) >= time.Millisecond)
	// Output:
	// 2 requests, in flight 0
	// estimates at least 1ms: true
}
