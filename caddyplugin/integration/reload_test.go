package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// gated is a loopback upstream that answers with its name; while held, its
// requests wait until it is released. It records the most requests it had
// at once.
type gated struct {
	name    string
	srv     *httptest.Server
	arrived chan struct{} // a token per request, when it arrives
	mu      sync.Mutex
	wait    chan struct{} // nil: answer at once; else wait for it to close
	now     int
	peak    int
}

func newGated(t *testing.T, name string) *gated {
	g := &gated{name: name, arrived: make(chan struct{}, 1024)}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.now++
		if g.now > g.peak {
			g.peak = g.now
		}
		wait := g.wait
		g.mu.Unlock()
		select {
		case g.arrived <- struct{}{}:
		default:
		}
		if wait != nil {
			select {
			case <-wait:
			case <-time.After(30 * time.Second): // bound a test gone wrong
			}
		}
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
		io.WriteString(w, name)
	}))
	t.Cleanup(g.srv.Close)
	t.Cleanup(g.release) // first: Close waits for the handlers
	return g
}

func (g *gated) addr() string { return strings.TrimPrefix(g.srv.URL, "http://") }

// hold makes the requests that arrive from now on wait for release.
func (g *gated) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.wait = make(chan struct{})
}

// release lets the waiting requests go and answers the next ones at once.
func (g *gated) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.wait != nil {
		close(g.wait)
		g.wait = nil
	}
}

func (g *gated) peakLoad() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// awaitArrival waits for a request to arrive at g.
func (g *gated) awaitArrival(t *testing.T) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(10 * time.Second):
		t.Fatalf("no request arrived at %s", g.name)
	}
}

// result is a request's outcome.
type result struct {
	code int
	body string
	err  error
}

// fetch makes one GET with client and reports it on the channel returned.
func fetch(client *http.Client, url string) <-chan result {
	out := make(chan result, 1)
	go func() {
		res, err := client.Get(url)
		if err != nil {
			out <- result{err: err}
			return
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		out <- result{code: res.StatusCode, body: string(body), err: err}
	}()
	return out
}

// upstreamState is one upstream of /lbpack/state.
type upstreamState struct {
	Address  string
	Picks    int64
	InFlight int64 `json:"in_flight"`
}

// upstreamsOf returns the upstreams of the policy id in /lbpack/state, by
// address ("" names the only policy).
func upstreamsOf(t *testing.T, tc *caddytest.Tester, id string) map[string]upstreamState {
	t.Helper()
	_, body := get(t, tc, "http://"+adminAddr+"/lbpack/state")
	var state struct {
		Policies []struct {
			ID        string
			Upstreams []upstreamState
		}
	}
	if err := json.Unmarshal([]byte(body), &state); err != nil {
		t.Fatalf("state %s: %v", body, err)
	}
	for _, p := range state.Policies {
		if p.ID == id || id == "" && len(state.Policies) == 1 {
			out := map[string]upstreamState{}
			for _, u := range p.Upstreams {
				out[u.Address] = u
			}
			return out
		}
	}
	t.Fatalf("state %s: no policy %q", body, id)
	return nil
}

// awaitIdle waits until no upstream of policy id has a request in flight
// (a try ends when Caddy's handler returns, just after the client has its
// answer) and returns the upstreams.
func awaitIdle(t *testing.T, tc *caddytest.Tester, id string) map[string]upstreamState {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ups := upstreamsOf(t, tc, id)
		busy := false
		for _, u := range ups {
			busy = busy || u.InFlight != 0
		}
		if !busy {
			return ups
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests still in flight: %+v", ups)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A forced reload of the same config goes on with the same balancer:
// nginx's smooth sequence for 5 3 2 continues where it was.
func TestReloadContinuesSchedule(t *testing.T) {
	a, b, c := newBackend(t, "a", 0), newBackend(t, "b", 0), newBackend(t, "c", 0)
	tc := caddytest.NewTester(t)
	port := freePort(t)
	cfg := caddyfile(port, fmt.Sprintf("%s %s %s {\n\t\tlb_policy smooth_wrr 5 3 2\n\t}", a.addr(), b.addr(), c.addr()))
	load(tc, cfg)
	if got := sequence(t, tc, port, 4); got != "a b c a" {
		t.Fatalf("first four: %s, want a b c a", got)
	}
	reload(t, tc, cfg)
	if got, want := sequence(t, tc, port, 6), "a b a c b a"; got != want {
		t.Errorf("six after a reload of the same config: %s, want %s (the sequence going on)", got, want)
	}
}

// max_conns 1 with a request in flight keeps refusing a second one across a
// reload of the same config, and /lbpack/state shows the request in
// flight; when it ends, on the replaced config, the count is 0 again.
func TestReloadKeepsMaxConns(t *testing.T) {
	a := newGated(t, "a")
	tc := caddytest.NewTester(t)
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	cfg := caddyfile(port, fmt.Sprintf("%s {\n\t\tlb_policy smooth_wrr {\n\t\t\tmax_conns %s 1\n\t\t}\n\t}", a.addr(), a.addr()))
	load(tc, cfg)
	a.hold()
	first := fetch(&http.Client{Timeout: 20 * time.Second}, url)
	a.awaitArrival(t)
	if code, _ := get(t, tc, url); code != http.StatusServiceUnavailable {
		t.Fatalf("second request while the first is in flight: %d, want 503", code)
	}
	reload(t, tc, cfg)
	if code, body := get(t, tc, url); code != http.StatusServiceUnavailable {
		t.Errorf("second request after a reload, the first still in flight: %d %q, want 503", code, body)
	}
	if n := upstreamsOf(t, tc, "")[a.addr()].InFlight; n != 1 {
		t.Errorf("/lbpack/state after the reload: in_flight %d, want 1", n)
	}
	a.release()
	if r := <-first; r.err != nil || r.code != http.StatusOK {
		t.Fatalf("the held request: %d %v", r.code, r.err)
	}
	awaitIdle(t, tc, "")
	if code, body := get(t, tc, url); code != http.StatusOK || body != "a" {
		t.Errorf("after the held request ended: %d %q, want 200 a", code, body)
	}
	if p := a.peakLoad(); p != 1 {
		t.Errorf("upstream a had %d requests at once, want 1 (max_conns)", p)
	}
}

// A storm of forced reloads while requests flow: no request gets an error
// status, the upstream held at its max_conns never gets a second request,
// and at the end nothing is in flight and the picks add up to the requests
// answered. (A reload can close a connection the old server has accepted
// but not read from: the client sees EOF, and tries again, as get does.)
func TestReloadStorm(t *testing.T) {
	a := newGated(t, "a")
	b, c := newBackend(t, "b", time.Millisecond), newBackend(t, "c", time.Millisecond)
	tc := caddytest.NewTester(t)
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	cfg := caddyfile(port, fmt.Sprintf("%s %s %s {\n\t\tlb_policy weighted_least_conn {\n\t\t\tmax_conns %s 1\n\t\t}\n\t}", a.addr(), b.addr(), c.addr(), a.addr()))
	load(tc, cfg)
	a.hold()
	held := fetch(&http.Client{Timeout: 30 * time.Second}, url)
	a.awaitArrival(t) // least_conn's first pick over idle upstreams is the first

	const workers, reloads = 3, 20
	var ok, failed, dropped atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A fresh connection for every request: a reload closes the
			// old server's idle ones, which a client may be reusing.
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := <-fetch(client, url)
				for try := 1; r.err != nil && try < 5; try++ {
					dropped.Add(1)
					r = <-fetch(client, url)
				}
				if r.err == nil && r.code == http.StatusOK && r.body != "a" {
					ok.Add(1)
					continue
				}
				failed.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %q %v", r.code, r.body, r.err))
			}
		}()
	}
	for i := 0; i < reloads; i++ {
		reload(t, tc, cfg)
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if n := upstreamsOf(t, tc, "")[a.addr()].InFlight; n != 1 {
		t.Errorf("after %d reloads: a in flight %d, want 1 (the held request)", reloads, n)
	}
	a.release()
	if r := <-held; r.err != nil || r.code != http.StatusOK {
		t.Fatalf("the held request: %d %v", r.code, r.err)
	}
	t.Logf("%d reloads, %d requests answered, %d failed, %d connections dropped and tried again", reloads, ok.Load(), failed.Load(), dropped.Load())
	if failed.Load() != 0 {
		t.Errorf("%d requests failed during the reloads; first: %v", failed.Load(), firstErr.Load())
	}
	if ok.Load() < reloads {
		t.Errorf("only %d requests during %d reloads", ok.Load(), reloads)
	}
	if p := a.peakLoad(); p != 1 {
		t.Errorf("upstream a, max_conns 1, had %d requests at once", p)
	}
	ups := awaitIdle(t, tc, "")
	var picks int64
	for _, u := range ups {
		picks += u.Picks
	}
	if picks != ok.Load()+1 {
		t.Errorf("picks %d over %+v, want %d (every request answered, and the held one)", picks, ups, ok.Load()+1)
	}
}

// namedSite is a config whose one reverse proxy has the upstreams ups and
// the policy named name written as policy.
func namedSite(port int, ups []string, name, policy string) string {
	return caddyfile(port, fmt.Sprintf("%s {\n\t\tlb_policy %s {\n\t\t\tname %s\n\t\t}\n\t}", strings.Join(ups, " "), policy, name))
}

// Another strategy under the same name starts afresh: gcd_wrr's sequence
// from its start, then smooth_wrr's from its start. The picks go on
// counting.
func TestReloadNewStrategyStartsAfresh(t *testing.T) {
	a, b, c := newBackend(t, "a", 0), newBackend(t, "b", 0), newBackend(t, "c", 0)
	ups := []string{a.addr(), b.addr(), c.addr()}
	tc := caddytest.NewTester(t)
	port := freePort(t)
	const name = "afresh"
	for i, step := range []struct{ policy, want string }{
		{"smooth_wrr 5 3 2", "a b c a"},
		{"gcd_wrr 5 3 2", "a a a b a b"},
		{"smooth_wrr 5 3 2", "a b c a a"},
	} {
		load(tc, namedSite(port, ups, name, step.policy))
		if got := sequence(t, tc, port, len(strings.Fields(step.want))); got != step.want {
			t.Errorf("load %d, %s: %s, want %s", i+1, step.policy, got, step.want)
		}
	}
	got := upstreamsOf(t, tc, name)
	if got[a.addr()].Picks != 9 || got[b.addr()].Picks != 4 || got[c.addr()].Picks != 2 {
		t.Errorf("picks a %d b %d c %d, want 9 4 2 over the three loads", got[a.addr()].Picks, got[b.addr()].Picks, got[c.addr()].Picks)
	}
}

// With the same name and strategy, a reload that removes an upstream and
// adds another updates the balancer: the upstream that remains keeps its
// request in flight (still at its max_conns) and its picks, the new one
// starts from nothing, the removed one is gone; the request in flight,
// served by the replaced config, ends on the new config's count.
func TestReloadUpstreamsChangedKeepsState(t *testing.T) {
	a := newGated(t, "a")
	b, c, d := newBackend(t, "b", 0), newBackend(t, "c", 0), newBackend(t, "d", 0)
	tc := caddytest.NewTester(t)
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	const name = "changing"
	site := func(ups ...string) string {
		return caddyfile(port, fmt.Sprintf("%s {\n\t\tlb_policy smooth_wrr {\n\t\t\tname %s\n\t\t\tweight %s 5\n\t\t\tmax_conns %s 1\n\t\t}\n\t}",
			strings.Join(ups, " "), name, a.addr(), a.addr()))
	}
	load(tc, site(a.addr(), b.addr(), c.addr()))
	if got := sequence(t, tc, port, 3); got != "a a b" {
		t.Fatalf("first three over a:5 b c: %s, want a a b", got)
	}
	a.hold()
	held := fetch(&http.Client{Timeout: 20 * time.Second}, url) // a's turn
	a.awaitArrival(t)

	load(tc, site(a.addr(), b.addr(), d.addr()))
	got := upstreamsOf(t, tc, name)
	if len(got) != 3 || got[a.addr()].InFlight != 1 || got[a.addr()].Picks != 3 || got[b.addr()].Picks != 1 || got[d.addr()].Picks != 0 {
		t.Errorf("after the reload: %+v; want a (3 picks, 1 in flight), b (1 pick), d (none), no c", got)
	}
	// a is at its max_conns: the others share the requests.
	if seq := sequence(t, tc, port, 4); strings.Contains(seq, "a") || strings.Contains(seq, "c") {
		t.Errorf("while a is full: %s, want b and d only", seq)
	}
	a.release()
	if r := <-held; r.err != nil || r.code != http.StatusOK || r.body != "a" {
		t.Fatalf("the held request: %d %q %v", r.code, r.body, r.err)
	}
	if got := awaitIdle(t, tc, name); got[a.addr()].InFlight != 0 {
		t.Errorf("a in flight %d after its request ended", got[a.addr()].InFlight)
	}
	if code, body := get(t, tc, url); code != http.StatusOK || body != "a" {
		t.Errorf("a free again, weight 5: %d %q, want a", code, body)
	}
}
