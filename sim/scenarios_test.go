package sim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

// The presets the issue lists, by name, each with 5 backends or more
// (weights has the three), and each bounded: no run sends more than
// its Requests or goes on much past its Duration.
func TestScenarioPresets(t *testing.T) {
	want := "slow flapping capacity mixed-cost recovery failing open-loop fleet weights weights-serial"
	if got := strings.Join(ScenarioNames(), " "); got != want {
		t.Fatalf("scenarios %q, want %q", got, want)
	}
	for _, sc := range Scenarios() {
		if len(sc.Servers) < 5 && !strings.HasPrefix(sc.Name, "weights") {
			t.Errorf("%s: %d backends, want 5 or more", sc.Name, len(sc.Servers))
		}
		if sc.Title == "" || sc.Note == "" {
			t.Errorf("%s: no title or note", sc.Name)
		}
		res, err := Compare(sc, Contenders(), 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			sent := r.Requests + r.Errors + r.Rejected
			if sc.Requests > 0 && sent > sc.Requests {
				t.Errorf("%s %s: %d requests sent, more than %d", sc.Name, r.Policy, sent, sc.Requests)
			}
			// Past Duration, the requests in flight drain: seconds at most.
			if sc.Duration > 0 && r.Elapsed > sc.Duration+5*time.Second {
				t.Errorf("%s %s: ran %v, past %v", sc.Name, r.Policy, r.Elapsed, sc.Duration)
			}
			if r.Requests == 0 || r.P50 > r.P99 || r.Throughput <= 0 {
				t.Errorf("%s %s: %d answers, p50 %v p99 %v, %.0f/s", sc.Name, r.Policy, r.Requests, r.P50, r.P99, r.Throughput)
			}
		}
		if checks := Targets(sc, res); len(checks) != 3+len(sc.Goals) {
			t.Errorf("%s: %d target checks, want %d", sc.Name, len(checks), 3+len(sc.Goals))
		}
	}
	if _, err := FindScenario("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "mixed-cost") {
		t.Errorf("unknown scenario: error %v", err)
	}
}

// What the scenarios are for, measured: in mixed-cost the Traefik model
// leaves a backend below half its share (the starvation reported of
// leasttime); in failing, the latency-blind least-connections peers and
// the least-time ones, which take fast errors for fast answers, send the
// fast-failing backend most requests, and the oracle none; in slow,
// round robin's p99 is the slow backend's.
func TestScenarioFindings(t *testing.T) {
	run := func(name string, c Contender) Result {
		sc, err := FindScenario(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Simulate(sc, c, 1)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	low := 1.0
	for _, b := range run("mixed-cost", TraefikLeastTime()).Backends {
		if b.Share < low {
			low = b.Share
		}
	}
	if low >= 0.1 {
		t.Errorf("mixed-cost: Traefik model's lowest share %.3f, want below half of 0.2", low)
	}
	for _, c := range []Contender{CaddyLeastConn(), HAProxyLeastConn(), NginxLeastConn(), NginxLeastTime(false), NginxLeastTime(true), TraefikLeastTime()} {
		if s := run("failing", c).Backends[4].Share; s < 0.5 {
			t.Errorf("failing: %s sent e %.3f, want over half", c.Name, s)
		}
	}
	if s := run("failing", Oracle()).Backends[4].Share; s != 0 {
		t.Errorf("failing: the oracle sent e %.3f", s)
	}
	if p := run("slow", Lbpack("rr", core.RoundRobin)).P99; p < 200*ms {
		t.Errorf("slow: round robin's p99 %v, want the slow backend's (over 200ms)", p)
	}
}

func TestTargets(t *testing.T) {
	sc := Scenario{Servers: servers(2, 1, nil), Goals: []Goal{GoalShareFloor, GoalFailing, GoalWeights, GoalRecovery},
		Focus: 1, Change: 2 * time.Second}
	fair := Result{Policy: FairName, Kind: KindLbpack, Requests: 100, P99: 105 * ms, Mean: 10 * ms, Throughput: 98,
		Backends: []BackendResult{{Share: 0.96}, {Share: 0.04}}, Window: time.Second,
		Timeline: [][]int{{5, 5}, {10, 0}, {10, 0}, {9, 1}, {5, 5}}}
	peers := []Result{
		{Policy: "A", Kind: KindPeer, Requests: 100, P99: 100 * ms, Mean: 9 * ms, Throughput: 100},
		{Policy: "B", Kind: KindPeer, Requests: 100, P99: 120 * ms, Mean: 11 * ms, Throughput: 90},
		{Policy: "oracle", Kind: KindOracle, Requests: 100, P99: 1 * ms, Mean: 1 * ms, Throughput: 1000},
		// Half its answers errors: not a peer to match while others qualify.
		{Policy: "C", Kind: KindPeer, Requests: 100, Errors: 100, P99: 1 * ms, Mean: 1 * ms, Throughput: 1000},
	}
	got := Targets(sc, append([]Result{fair}, peers...))
	want := []string{
		"true p99 <= 1.05 x best peer: 105.0 ms vs 100.0 ms (A)",
		"false mean <= 1.05 x best peer: 10.0 ms vs 9.0 ms (A)",
		"true throughput >= 0.98 x best peer: 98/s vs 100/s (A)",
		"false every backend >= 0.5 x its share: lowest b: 4.0% of 50.0%",
		"true b (failing) <= 5% of requests: 4.00%",
		"false shares within 5% of the weights: worst b: 4.0% for 50.0%",
		"true b back to 90% of its share within 20s: 2s after recovering",
	}
	if len(got) != len(want) {
		t.Fatalf("%d checks, want %d: %+v", len(got), len(want), got)
	}
	for k, c := range got {
		if s := fmt.Sprintf("%v %s: %s", c.OK, c.Target, c.Got); s != want[k] {
			t.Errorf("check %d: %q, want %q", k, s, want[k])
		}
	}
	if Targets(sc, peers) != nil {
		t.Error("no fair row: want no checks")
	}
	// When every peer has errors, every peer counts.
	got = Targets(Scenario{Servers: sc.Servers}, []Result{fair, peers[3]})
	if len(got) != 3 || got[0].Got != "105.0 ms vs 1.0 ms (C)" || got[0].OK {
		t.Errorf("only erring peers: %+v", got)
	}
	// Recovery: the first window from the change in which the share is reached.
	if d, ok := Recovery(fair, 1, 2*time.Second, 0.1); !ok || d != time.Second {
		t.Errorf("recovery to 10%%: %v %v, want 1s", d, ok)
	}
	if _, ok := Recovery(fair, 1, 2*time.Second, 0.6); ok {
		t.Error("recovery to 60%: never reached, want not ok")
	}
}

// The chart is well-formed SVG with one line per result in each panel and
// a legend entry each.
func TestWriteCDF(t *testing.T) {
	sc, _ := FindScenario("slow")
	sc.Requests = 2000
	res, err := Compare(sc, []Contender{Lbpack(FairName, core.Fair), CaddyLeastConn(), Oracle()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteCDF(&buf, "a <title> & more", res); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	count := map[string]int{}
	var texts []string
	var end error
	for end == nil {
		var tok xml.Token
		tok, end = d.Token()
		switch x := tok.(type) {
		case xml.StartElement:
			count[x.Name.Local]++
		case xml.CharData:
			texts = append(texts, string(x))
		}
	}
	if end != io.EOF || count["svg"] != 1 {
		t.Fatalf("not one well-formed svg document: %v, %v", end, count)
	}
	if count["polyline"] != 2*len(res) {
		t.Errorf("%d polylines, want %d", count["polyline"], 2*len(res))
	}
	all := strings.Join(texts, "\n")
	for _, r := range res {
		if !strings.Contains(all, r.Policy+": p99 ") {
			t.Errorf("legend lacks %s", r.Policy)
		}
	}
	if !strings.Contains(all, "a <title> & more") {
		t.Error("title not escaped and kept")
	}
}
