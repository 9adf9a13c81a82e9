package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

func TestParseDist(t *testing.T) {
	good := []struct{ in, str string }{
		{"10ms", "10ms"},
		{"0s", "0s"},
		{"exp:10ms", "exp:10ms"},
		{"uniform:5ms-15ms", "uniform:5ms-15ms"},
		{"slow:100ms@30%", "slow:100ms@30%"},
		{"slow:1s@0.5%:exp:20ms", "slow:1s@0.5%:exp:20ms"},
		{"slow:1s@100%:uniform:1ms-2ms", "slow:1s@100%:uniform:1ms-2ms"},
	}
	for _, c := range good {
		d, err := ParseDist(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if d.String() != c.str {
			t.Errorf("%q: String() = %q, want %q", c.in, d.String(), c.str)
		}
	}
	bad := []struct{ in, msg string }{
		{"", "duration"},
		{"10", "duration"},
		{"-5ms", "negative"},
		{"exp:0s", "positive"},
		{"exp:fast", "duration"},
		{"gauss:10ms", "unknown distribution"},
		{"uniform:10ms", "uniform:D1-D2"},
		{"uniform:20ms-10ms", "bounds"},
		{"slow:100ms", "slow:D@P%"},
		{"slow:100ms@30", "percentage"},
		{"slow:100ms@130%", "0% to 100%"},
		{"slow:100ms@x%", "0% to 100%"},
		{"slow:1s@5%:slow:2s@5%", "cannot itself be slow"},
	}
	for _, c := range bad {
		_, err := ParseDist(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.in)) {
			t.Errorf("%q: error %v, want one naming the input and saying %q", c.in, err, c.msg)
		}
	}
}

func TestDistSamples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	mean := func(d Dist) (float64, time.Duration, time.Duration) {
		var sum float64
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for k := 0; k < n; k++ {
			x := d.Sample(r)
			sum += float64(x)
			if x < lo {
				lo = x
			}
			if x > hi {
				hi = x
			}
		}
		return sum / n, lo, hi
	}
	must := func(s string) Dist {
		d, err := ParseDist(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if m, lo, hi := mean(must("7ms")); lo != 7*time.Millisecond || hi != lo || m != 7e6 {
		t.Errorf("constant: mean %v, range %v-%v", m, lo, hi)
	}
	// Exponential: mean within 1% (the standard error is 0.22%).
	if m, lo, _ := mean(must("exp:10ms")); math.Abs(m-1e7) > 1e5 || lo < 0 {
		t.Errorf("exp:10ms mean %v", time.Duration(m))
	}
	if m, lo, hi := mean(must("uniform:5ms-15ms")); math.Abs(m-1e7) > 1e5 || lo < 5e6 || hi > 15e6 {
		t.Errorf("uniform: mean %v range %v-%v", time.Duration(m), lo, hi)
	}
	// slow:100ms@30% over a 10ms base: mean 0.3*100 + 0.7*10 = 37ms.
	d := withBase(must("slow:100ms@30%"), constDist(10*time.Millisecond))
	slow := 0
	for k := 0; k < n; k++ {
		switch d.Sample(r) {
		case 100 * time.Millisecond:
			slow++
		case 10 * time.Millisecond:
		default:
			t.Fatal("slow: a value that is neither slow nor base")
		}
	}
	if f := float64(slow) / n; math.Abs(f-0.3) > 0.005 {
		t.Errorf("slow fraction %.4f, want 0.3 +- 0.005", f)
	}
}

// equal returns n backends of weight 1.
func equal(n int) []core.Backend {
	bs := make([]core.Backend, n)
	for i := range bs {
		bs[i] = core.Backend{Address: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: 1}
	}
	return bs
}

func TestRunClosedLoopExact(t *testing.T) {
	res, err := Run(Options{
		Config:   core.Config{Strategy: core.LeastConn, Backends: equal(4)},
		Requests: 1000, Concurrency: 1,
		Latency: map[string]Dist{"10.0.0.2:80": constDist(20 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// One client: least_conn sees nothing in flight and shares out by
	// round robin: 250 requests each, 3 x 10ms + 20ms per round of four.
	if res.Requests != 1000 || res.Rejected != 0 || res.Elapsed != 250*50*time.Millisecond {
		t.Fatalf("requests %d rejected %d elapsed %v", res.Requests, res.Rejected, res.Elapsed)
	}
	for _, b := range res.Backends {
		if b.Requests != 250 || b.Share != 0.25 {
			t.Fatalf("backend %s: %d requests, share %v", b.Address, b.Requests, b.Share)
		}
	}
	if res.P50 != 10*time.Millisecond || res.P90 != 20*time.Millisecond || res.P99 != 20*time.Millisecond ||
		res.Mean != 12500*time.Microsecond || res.Max != 20*time.Millisecond {
		t.Fatalf("percentiles %+v", res)
	}
}

func TestRunOpenLoop(t *testing.T) {
	res, err := Run(Options{
		Config:   core.Config{Strategy: core.LeastConn, Backends: equal(5)},
		Requests: 20000, Rate: 1000, Seed: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	// 20000 Poisson arrivals at 1000/s span 20s, with a standard deviation
	// of 20s/sqrt(20000) = 0.14s: allow 3 sigma.
	if d := res.Elapsed.Seconds() - 20; math.Abs(d) > 0.45 {
		t.Fatalf("elapsed %v", res.Elapsed)
	}
	if res.P99 != defaultLatency || res.Requests != 20000 {
		t.Fatalf("p99 %v, requests %d", res.P99, res.Requests)
	}
	for _, b := range res.Backends {
		if math.Abs(b.Share-0.2) > 0.01 {
			t.Fatalf("share %v", b.Share)
		}
	}
}

func TestRunRejects(t *testing.T) {
	bs := equal(2)
	for i := range bs {
		bs[i].MaxConns = 1
	}
	res, err := Run(Options{Config: core.Config{Strategy: core.LeastConn, Backends: bs}, Requests: 500, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Four clients, two slots: the third and fourth find none at first and
	// retry as answers come in.
	if res.Rejected == 0 || res.Requests+res.Rejected != 500 {
		t.Fatalf("requests %d rejected %d", res.Requests, res.Rejected)
	}
}

func TestRunDeterministic(t *testing.T) {
	opt := Options{
		Config:   core.Config{Strategy: core.Fair, Backends: equal(5)},
		Latency:  map[string]Dist{"10.0.0.1:80": expDist(30 * time.Millisecond)},
		Default:  expDist(10 * time.Millisecond),
		Requests: 5000, Concurrency: 8, Seed: 42,
	}
	a, err := Run(opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(opt)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different results:\n%+v\n%+v", a, b)
	}
	opt.Seed = 43
	c, _ := Run(opt)
	if reflect.DeepEqual(a, c) {
		t.Fatal("another seed gave the same result")
	}
}

func TestRunErrors(t *testing.T) {
	cfg := core.Config{Strategy: core.LeastConn, Backends: equal(2)}
	cases := []struct {
		opt Options
		msg string
	}{
		{Options{Config: cfg}, "requests 0"},
		{Options{Config: cfg, Requests: 10, Concurrency: -1}, "concurrency -1"},
		{Options{Config: cfg, Requests: 10, Rate: -1}, "rate -1"},
		{Options{Config: cfg, Requests: 10, Rate: math.NaN()}, "rate NaN"},
		{Options{Config: cfg, Requests: 10, Rate: 5, Concurrency: 2}, "set one"},
		{Options{Config: cfg, Requests: 10, Latency: map[string]Dist{"10.9.9.9:80": constDist(1)}}, `"10.9.9.9:80": no such backend`},
		{Options{Config: core.Config{Strategy: "nope", Backends: equal(1)}, Requests: 10}, `strategy "nope"`},
	}
	for _, c := range cases {
		if _, err := Run(c.opt); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: error %v, want %q", c.opt, err, c.msg)
		}
	}
}

func TestRunHashedKeys(t *testing.T) {
	for _, s := range []string{core.IPHash, core.URLHash} {
		res, err := Run(Options{Config: core.Config{Strategy: s, Backends: equal(4)}, Requests: 4000, Concurrency: 4, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range res.Backends {
			if b.Share < 0.1 { // random keys spread over all four
				t.Fatalf("%s: share %v for %s", s, b.Share, b.Address)
			}
		}
	}
}

// slowScenario is the issue's target: five equal backends, one 10x slower
// (exponential latencies, means 10ms and 100ms), 20 clients, 20000 requests.
func slowScenario(t *testing.T, strategy string) Result {
	t.Helper()
	res, err := Run(Options{
		Config:      core.Config{Strategy: strategy, Backends: equal(5)},
		Default:     expDist(10 * time.Millisecond),
		Latency:     map[string]Dist{"10.0.0.5:80": expDist(100 * time.Millisecond)},
		Concurrency: 20, Requests: 20000, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%-12s p50 %-12v p90 %-12v p99 %-12v slow share %.4f", strategy, res.P50, res.P90, res.P99, res.Backends[4].Share)
	return res
}

func TestSlowBackendTargets(t *testing.T) {
	rr, lc, fair := slowScenario(t, core.RoundRobin), slowScenario(t, core.LeastConn), slowScenario(t, core.Fair)
	if fair.P99*2 > rr.P99 {
		t.Errorf("fair p99 %v > 0.5 x round robin's %v", fair.P99, rr.P99)
	}
	if fair.P99 > lc.P99 {
		t.Errorf("fair p99 %v > least_conn's %v", fair.P99, lc.P99)
	}
	if fair.Backends[4].Requests == 0 {
		t.Error("fair starves the slow backend: no request")
	}
	if s := rr.Backends[4].Share; s != 0.2 {
		t.Errorf("round robin's slow share %v, want exactly 0.2", s)
	}
}

func ExampleRun() {
	slow, _ := ParseDist("slow:100ms@10%") // the rest take Default: 10ms
	res, err := Run(Options{
		Config:      core.Config{Strategy: core.LeastConn, Backends: equal(2)},
		Latency:     map[string]Dist{"10.0.0.2:80": slow},
		Concurrency: 1, Requests: 1000, Seed: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("p50", res.P50, "p99", res.P99)
	for _, b := range res.Backends {
		fmt.Println(b.Address, b.Requests)
	}
	// Output:
	// p50 10ms p99 100ms
	// 10.0.0.1:80 500
	// 10.0.0.2:80 500
}
