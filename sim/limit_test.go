package sim

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

func twoServers(service Dist) []Server {
	return []Server{
		{Backend: core.Backend{Address: "10.0.0.1:80", Weight: 1}, Service: service},
		{Backend: core.Backend{Address: "10.0.0.2:80", Weight: 1}, Service: service},
	}
}

// The timeline keeps a row only for the windows in which requests were
// sent: a long quiet spell costs no rows of counts.
func TestTimelineSparse(t *testing.T) {
	sc := Scenario{Servers: twoServers(constDist(2500 * time.Millisecond)), Clients: 1, Requests: 3}
	res, err := Simulate(sc, Lbpack("smooth_wrr", core.SmoothWRR), 1)
	if err != nil {
		t.Fatal(err)
	}
	// Sent at 0s, 2.5s and 5s: windows 0, 2 and 5 of 1s.
	want := [][]int{{1, 0}, nil, {0, 1}, nil, nil, {1, 0}}
	if !reflect.DeepEqual(res.Timeline, want) {
		t.Errorf("timeline %v, want %v", res.Timeline, want)
	}
}

// A service time, an arrival gap or a run past the scenario's Limit stops
// the run with ErrLimit, saying what passed it; a cost class's huge
// multiple no longer overflows the clock.
func TestLimit(t *testing.T) {
	if got, want := (Scenario{Window: time.Millisecond}).Limit(), time.Duration(1<<20)*time.Millisecond; got != want {
		t.Errorf("limit %v, want %v", got, want)
	}
	cases := []struct {
		name string
		sc   Scenario
		want string
	}{
		{"a cost class of 1e300", Scenario{Servers: twoServers(constDist(10 * time.Millisecond)), Clients: 2, Requests: 100,
			Classes: []Class{{Share: 0.5, Cost: 1}, {Share: 0.5, Cost: 1e300}}},
			"sim: scenario: server 0 (10.0.0.1:80): a service time at 0s would take 1e+298s: past the simulation's limit (291h16m16s, 1048576 windows of 1s)"},
		{"a run past the limit", Scenario{Name: "long", Servers: twoServers(constDist(time.Second)), Clients: 1, Requests: 2000, Window: time.Millisecond},
			"sim: long: server 0 (10.0.0.1:80): a service time at 17m28s would take 1s: past the simulation's limit (17m28.576s, 1048576 windows of 1ms)"},
		{"an arrival gap", Scenario{Servers: twoServers(constDist(time.Millisecond)), Rate: 1e-12, Requests: 2},
			"sim: scenario: the next arrival at 0s would take"},
	}
	for _, c := range cases {
		_, err := Simulate(c.sc, Lbpack("smooth_wrr", core.SmoothWRR), 1)
		if !errors.Is(err, ErrLimit) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrLimit: %s", c.name, err, c.want)
		}
	}
}
