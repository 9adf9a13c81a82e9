package sim

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

// recorder is a policy that sends every request to backend to and records
// what it is told.
type recorder struct {
	to     int
	starts int
	dones  []bool // failed, per Done
	lat    []time.Duration
}

func (r *recorder) Pick(string) int { return r.to }
func (r *recorder) Start(int)       { r.starts++ }
func (r *recorder) Done(_ int, d time.Duration, failed bool) {
	r.dones = append(r.dones, failed)
	r.lat = append(r.lat, d)
}

// recording returns a contender whose balancers are recorders, kept in *got.
func recording(got *[]*recorder, to int) Contender {
	return Contender{Name: "recorder", New: func(Env) (Policy, error) {
		r := &recorder{to: to}
		*got = append(*got, r)
		return r, nil
	}}
}

func oneServer(workers int, service Dist) []Server {
	return []Server{{Backend: core.Backend{Address: "10.0.0.1:80", Weight: 1}, Workers: workers, Service: service}}
}

// M/M/1 at utilisation 0.5 (arrivals 50/s, service mean 10 ms): the time in
// the system is exponential with rate mu - lambda = 50/s, so its mean is
// 20 ms, its median 20 ms x ln 2 = 13.86 ms and its p99 20 ms x ln 100 =
// 92.1 ms. 200,000 requests: the figures fall within 5% (the run's own
// error, with the correlation of successive waits, is about 1%).
func TestMM1(t *testing.T) {
	sc := Scenario{Servers: oneServer(1, expDist(10*ms)), Rate: 50, Requests: 200000}
	var got []*recorder
	res, err := Simulate(sc, recording(&got, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("M/M/1: mean %v p50 %v p99 %v throughput %.2f", res.Mean, res.P50, res.P99, res.Throughput)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"mean", float64(res.Mean), 20e6},
		{"p50", float64(res.P50), 20e6 * math.Ln2},
		{"p99", float64(res.P99), 20e6 * math.Log(100)},
		{"throughput", res.Throughput, 50},
	} {
		if math.Abs(c.got/c.want-1) > 0.05 {
			t.Errorf("M/M/1 %s = %.4g, want %.4g within 5%%", c.name, c.got, c.want)
		}
	}
}

// M/M/2 (two workers, arrivals 150/s, service mean 10 ms, utilisation
// 0.75): Erlang C gives the chance of waiting as 0.6429 and the mean time
// in the system as 10 ms + 0.6429 x 10 ms / (2 - 1.5) = 22.86 ms.
func TestMM2(t *testing.T) {
	sc := Scenario{Servers: oneServer(2, expDist(10*ms)), Rate: 150, Requests: 300000}
	var got []*recorder
	res, err := Simulate(sc, recording(&got, 0), 2)
	if err != nil {
		t.Fatal(err)
	}
	a := 1.5 // offered load in Erlangs
	pw := (a * a / 2 / (1 - a/2)) / (1 + a + a*a/2/(1-a/2))
	want := 10e6 + pw*10e6/(2-a)
	t.Logf("M/M/2: mean %v, Erlang C %v", res.Mean, time.Duration(want))
	if math.Abs(float64(res.Mean)/want-1) > 0.05 {
		t.Errorf("M/M/2 mean %v, want %v within 5%%", res.Mean, time.Duration(want))
	}
}

// Little's law in a closed loop: N clients are in the system until the
// last requests drain, so throughput x mean latency is N, less the drain
// at the end (under 2% in every scenario), and never more.
func TestLittlesLaw(t *testing.T) {
	for _, sc := range Scenarios() {
		if sc.Clients == 0 || len(sc.Goals) > 0 && sc.Goals[0] == GoalFailing {
			continue // the failing scenario's latencies leave out the errors
		}
		res, err := Simulate(sc, Lbpack("least_conn", core.LeastConn), 1)
		if err != nil {
			t.Fatal(err)
		}
		n := res.Throughput * res.Mean.Seconds()
		if r := n / float64(sc.Clients); r < 0.98 || r > 1+1e-9 {
			t.Errorf("%s: throughput x mean = %.3f, want %d clients less at most 2%%", sc.Name, n, sc.Clients)
		}
	}
}

// Two workers, four clients, 10 ms each: the first two requests are served
// at once, every later one waits exactly one service time.
func TestQueueExact(t *testing.T) {
	sc := Scenario{Servers: oneServer(2, constDist(10*ms)), Clients: 4, Requests: 1000}
	var got []*recorder
	res, err := Simulate(sc, recording(&got, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 1000 || res.Elapsed != 500*10*ms || res.Throughput != 200 {
		t.Fatalf("requests %d, elapsed %v, throughput %v", res.Requests, res.Elapsed, res.Throughput)
	}
	short := 0
	for _, d := range res.Latencies {
		switch d {
		case 10 * ms:
			short++
		case 20 * ms:
		default:
			t.Fatalf("latency %v: want 10ms or 20ms", d)
		}
	}
	// The first two are served at once; so are the two sent when they end
	// (the other two clients' requests take the freed workers first, and
	// their own wait one service time).
	if short != 2 {
		t.Errorf("%d requests served without waiting, want 2", short)
	}
}

// A slowdown applies to service that starts while it holds; errors are
// answered in FailTime, told to the balancer as failures and left out of the
// latency figures; classes scale the service time.
func TestServerBehaviour(t *testing.T) {
	s := oneServer(1, constDist(10*ms))
	s[0].Slowdown = slowWindow(0, time.Second, 3)
	var got []*recorder
	res, err := Simulate(Scenario{Servers: s, Clients: 1, Duration: 2 * time.Second}, recording(&got, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	// 34 answers of 30 ms take 1.02 s (the 34th starts at 0.99 s), then 10 ms each.
	if res.Latencies[0] != 10*ms || res.Latencies[len(res.Latencies)-1] != 30*ms || res.Requests != 34+98 {
		t.Errorf("slowdown: %d requests, latencies %v..%v", res.Requests, res.Latencies[0], res.Latencies[len(res.Latencies)-1])
	}

	s = oneServer(1, constDist(10*ms))
	s[0].FailRate, s[0].FailTime = 0.25, constDist(1*ms)
	got = nil
	res, err = Simulate(Scenario{Servers: s, Clients: 1, Requests: 4000}, recording(&got, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for k, f := range got[0].dones {
		if f {
			failed++
			if got[0].lat[k] != 1*ms {
				t.Fatalf("a failed answer took %v, want 1ms", got[0].lat[k])
			}
		}
	}
	if failed != res.Errors || res.Errors+res.Requests != 4000 || math.Abs(float64(failed)/4000-0.25) > 0.03 ||
		res.Backends[0].Errors != failed || res.P99 != 10*ms {
		t.Errorf("errors: %d told, %d counted of %d, p99 %v", failed, res.Errors, res.Requests+res.Errors, res.P99)
	}

	got = nil
	res, err = Simulate(Scenario{Servers: oneServer(0, constDist(1*ms)), Clients: 1, Requests: 20000,
		Classes: []Class{{Share: 0.95, Cost: 1}, {Share: 0.05, Cost: 100}}}, recording(&got, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	big := 0
	for _, d := range res.Latencies {
		switch d {
		case 100 * ms:
			big++
		case 1 * ms:
		default:
			t.Fatalf("class latency %v", d)
		}
	}
	// 5% of 20,000 is 1,000, with a standard deviation of 31: allow 4.
	if big < 875 || big > 1125 {
		t.Errorf("%d expensive requests of 20000, want 1000 +- 125", big)
	}
}

// Independent balancers each see only their own clients' requests.
func TestBalancersSeeTheirOwn(t *testing.T) {
	var got []*recorder
	sc := Scenario{Servers: oneServer(0, constDist(10*ms)), Clients: 16, Requests: 8000, Balancers: 8}
	if _, err := Simulate(sc, recording(&got, 0), 1); err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 {
		t.Fatalf("%d balancers built, want 8", len(got))
	}
	for k, r := range got {
		if r.starts != 1000 || len(r.dones) != 1000 {
			t.Errorf("balancer %d: %d starts, %d dones; want 1000 each", k, r.starts, len(r.dones))
		}
	}
}

// One seed, one result; another seed, other samples.
func TestSimulateDeterministic(t *testing.T) {
	for _, name := range []string{"flapping", "fleet"} {
		sc, err := FindScenario(name)
		if err != nil {
			t.Fatal(err)
		}
		sc.Duration, sc.Requests = 0, 5000
		for _, c := range []Contender{Lbpack("fair", core.Fair), FinaglePeakEWMA(), Oracle()} {
			a, _ := Simulate(sc, c, 7)
			b, _ := Simulate(sc, c, 7)
			d, _ := Simulate(sc, c, 8)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s %s: seed 7 twice gave two results", name, c.Name)
			}
			if reflect.DeepEqual(a, d) {
				t.Errorf("%s %s: seeds 7 and 8 gave one result", name, c.Name)
			}
		}
	}
}

func TestScenarioErrors(t *testing.T) {
	ok := Scenario{Servers: oneServer(1, nil), Clients: 1, Requests: 1}
	cases := []struct {
		edit func(*Scenario)
		msg  string
	}{
		{func(s *Scenario) { s.Servers = nil }, "no servers"},
		{func(s *Scenario) { s.Clients = 0 }, "set clients or rate"},
		{func(s *Scenario) { s.Rate = 5 }, "set one, not both"},
		{func(s *Scenario) { s.Requests = 0 }, "set requests or duration"},
		{func(s *Scenario) { s.Servers[0].Workers = -1 }, "workers -1"},
		{func(s *Scenario) { s.Servers[0].FailRate = 2 }, "fail rate 2"},
		{func(s *Scenario) { s.Classes = []Class{{Share: 0.5, Cost: 2}} }, "sum to 0.5"},
		{func(s *Scenario) { s.Classes = []Class{{Share: 1, Cost: -1}} }, "cost not negative"},
	}
	for _, c := range cases {
		sc := ok
		sc.Servers = append([]Server(nil), ok.Servers...)
		c.edit(&sc)
		_, err := Simulate(sc, Lbpack("rr", core.RoundRobin), 1)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("error %v, want one saying %q", err, c.msg)
		}
	}
	if _, err := Simulate(ok, Lbpack("nope", "nope"), 1); err == nil || !strings.Contains(err.Error(), `strategy "nope"`) {
		t.Errorf("bad strategy: error %v", err)
	}
}
