package core_test

import (
	"fmt"
	"time"

	"github.com/lbpack/lbpack/core"
)

// least_conn picks the backend with the fewest requests in flight per unit
// of weight; ties are shared out by nginx's smooth weighted round robin.
func Example_leastConn() {
	b, err := core.New(core.Config{
		Strategy: core.LeastConn,
		Backends: []core.Backend{
			{Address: "10.0.0.1:80", Weight: 2},
			{Address: "10.0.0.2:80", Weight: 1},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var open []core.Ticket // the requests to 10.0.0.1, still in flight
	for k := 0; k < 4; k++ {
		i, t := core.Pick(b, "", core.Filter{}) // the request stays open
		if i == 0 {
			open = append(open, t)
		}
		fmt.Println(b.Backend(i).Address, b.InFlight(0), b.InFlight(1))
	}
	for _, t := range open {
		core.Done(b, 0, t, 20*time.Millisecond, false)
	}
	i, _ := core.Pick(b, "", core.Filter{})
	fmt.Println(b.Backend(i).Address)
	// Output:
	// 10.0.0.1:80 1 0
	// 10.0.0.2:80 1 1
	// 10.0.0.1:80 2 1
	// 10.0.0.2:80 2 2
	// 10.0.0.1:80
}
