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
		p, _ := b.Pick("")
		fmt.Print(string(rune('a'+p)), " ")
	}
	fmt.Println()
	// Output: a b c a a b a c b a
}

// PickNext answers as Pick does, with one result: the backend's index, or
// -1 when none is available. An interpreted caller (the Traefik plugin)
// calls it for the table strategies. Here the first backend is down.
func ExamplePickNext() {
	b, err := core.New(core.Config{
		Strategy: core.RoundRobin,
		Backends: []core.Backend{{Address: "10.0.0.1:80", Weight: 1, Down: true}, {Address: "10.0.0.2:80", Weight: 1}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(core.PickNext(b, ""), core.PickNext(b, ""))
	// Output: 1 1
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

func ExampleBalancer_Pick() {
	b, _ := core.New(core.Config{
		Strategy: core.GCDWRR,
		Backends: []core.Backend{
			{Address: "10.0.0.1:80", Weight: 6},
			{Address: "10.0.0.2:80", Weight: 3},
			{Address: "10.0.0.3:80", Weight: 1},
		},
	})
	for i := 0; i < 10; i++ {
		p, _ := b.Pick("")
		fmt.Print(b.Backend(p).Address[7:8], " ")
	}
	fmt.Println()
	// Output: 1 1 1 1 2 1 2 1 2 3
}

// The caller's view of availability: here backend b is refused (say, a failed
// health check), and nginx's rule shares its turns out among a and c.
func ExampleBalancer_PickFunc() {
	b, _ := core.New(core.Config{
		Strategy: core.SmoothWRR,
		Backends: []core.Backend{
			{Address: "10.0.0.1:80", Weight: 5},
			{Address: "10.0.0.2:80", Weight: 3},
			{Address: "10.0.0.3:80", Weight: 2},
		},
	})
	notB := func(i int) bool { return i != 1 }
	counts := make([]int, 3)
	for i := 0; i < 70; i++ {
		p, _ := b.PickFunc("", notB)
		counts[p]++
	}
	fmt.Println(counts)
	none := func(int) bool { return false }
	_, err := b.PickFunc("", none)
	fmt.Println(err)
	// Output:
	// [50 0 20]
	// lbpack: no backend available
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
		Strategy: core.RoundRobin,
		Backends: []core.Backend{{Address: "10.0.0.1:80", Weight: 1}, {Address: "10.0.0.2:80", Weight: 1}},
	})
	b.Start(1)
	nb, _ := b.Update([]core.Backend{{Address: "10.0.0.2:80", Weight: 1}, {Address: "10.0.0.3:80", Weight: 1}})
	fmt.Println(nb.Index("10.0.0.2:80"), nb.InFlight(0), nb.Strategy())
	// Output: 0 1 round_robin
}

// A caller that ends its requests itself, as the Traefik plugin does:
// Begin counts the request in flight and returns the count, whose Add(-1),
// deferred (with the total's, where the strategy keeps one), ends it even
// if the proxying panics; Report, before that end,
// gives fair its latency (and any strategy a failure, or a success after
// failures). Under least_conn the next pick goes to the other backend while
// the first request is in flight.
func ExampleBegin() {
	b, err := core.New(core.Config{
		Strategy: core.LeastConn,
		Backends: []core.Backend{{Address: "10.0.0.1:80", Weight: 1}, {Address: "10.0.0.2:80", Weight: 1}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	serve := func(then func()) {
		i := core.PickIndex(b, "")
		n := core.Begin(b, i)
		if total := core.InFlightTotal(b); total != nil { // least_conn counts over all backends too
			defer total.Add(-1)
		}
		defer n.Add(-1) // runs first
		fmt.Println("to", i, "in flight", b.InFlight(i))
		if then != nil {
			then()
		}
		core.Report(b, i, 0, false) // here a no-op: least_conn, a success, no failures
	}
	serve(func() { serve(nil) })
	fmt.Println("after", b.InFlight(0), b.InFlight(1))
	// Output:
	// to 0 in flight 1
	// to 1 in flight 1
	// after 0 0
}

// Take is PickIndex and Begin in one call. Under fair it also gives the
// pick's clock reading, from which ReportSince times the answer.
func ExampleTake() {
	b, err := core.New(core.Config{
		Strategy: core.Fair,
		Backends: []core.Backend{{Address: "10.0.0.1:80", Weight: 1}, {Address: "10.0.0.2:80", Weight: 1}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for k := 0; k < 2; k++ {
		i, n, at := core.Take(b, "")
		if i < 0 {
			fmt.Println("no backend")
			return
		}
		time.Sleep(time.Millisecond) // the request
		core.ReportSince(b, i, at, false)
		n.Add(-1)
	}
	fmt.Println(b.Requests(0)+b.Requests(1), "requests, in flight", b.InFlight(0)+b.InFlight(1))
	fmt.Println("estimates at least 1ms:", b.Latency(0) >= time.Millisecond || b.Latency(1) >= time.Millisecond)
	// Output:
	// 2 requests, in flight 0
	// estimates at least 1ms: true
}
