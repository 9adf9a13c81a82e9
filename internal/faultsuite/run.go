package faultsuite

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// Scenario is one fault run: the load goes through the proxy, backend Dead
// is killed at KillAt and restarted at RestartAt, and the load stops at End.
type Scenario struct {
	Backends  []*Backend
	Dead      int
	Load      Load
	Epoch     time.Time // the backends' epoch
	KillAt    time.Duration
	RestartAt time.Duration
	End       time.Duration
	// Tries, when set, returns how many times so far the proxy tried the
	// dead backend (its picks), which the backend itself cannot see while
	// it is down. The run samples it every 10 ms.
	Tries func() int64
	// Window is the width of the windows in which the restarted backend's
	// share is measured (default 500 ms).
	Window time.Duration
}

// Result is what a Scenario measured.
type Result struct {
	Requests    []Request
	Sent        int
	GETErrors   int
	POSTErrors  int
	POSTsCut    int // POSTs in flight to any backend when Dead was killed
	LostPOSTs   int // POST errors among requests not in flight at the kill
	Bodies      int64
	BadBodies   int64
	TriesDead   int64         // tries of the dead backend while it was down; -1 if not observed
	LastTry     time.Duration // from the kill to the last try of the dead backend; -1 if none
	LateTries   int64         // tries in the last half of the down time
	BackAfter   time.Duration // from the restart to its first answer; -1 if none
	Ramp        []float64     // the restarted backend's share per Window from its first answer
	P99, Max    time.Duration // latency of the requests sent while it was down
	FirstErrors []string
}

// CutGrace is how long after the kill a POST may still fail because of it:
// the proxy learns that its idle connections to the backend were cut only
// when it reads from them, and a POST it has sent on one is not retried (a
// request already sent may have been processed; nginx does not retry it
// either). A POST in flight at the kill, or sent within CutGrace after it,
// may fail; any other POST error is a request lost. Under the race
// detector, where a proxy may take far longer to see a cut connection, the
// grace is the whole down time.
const CutGrace = 500 * time.Millisecond

// BackWait is how long past its end the load goes on while the restarted
// backend has had no request, so that a slow host still shows whether it
// ever comes back.
const BackWait = 3 * time.Second

// Run runs the scenario and returns what it measured.
func (s Scenario) Run() Result {
	if s.Window == 0 {
		s.Window = 500 * time.Millisecond
	}
	client := s.Load.Client()
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var samples []sample
	if s.Tries != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples = poll(ctx, s.Epoch, s.Tries)
		}()
	}
	var reqs []Request
	wg.Add(1)
	go func() {
		defer wg.Done()
		reqs = s.Load.Run(ctx, client, s.Epoch)
	}()
	sleepUntil(s.Epoch.Add(s.KillAt))
	s.Backends[s.Dead].Kill()
	sleepUntil(s.Epoch.Add(s.RestartAt))
	restartErr := s.Backends[s.Dead].Restart()
	sleepUntil(s.Epoch.Add(s.End))
	for k := 0; k < int(BackWait/(50*time.Millisecond)) && !s.Backends[s.Dead].servedSince(s.RestartAt); k++ {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	r := Result{Requests: reqs, Sent: len(reqs), TriesDead: -1, LastTry: -1, BackAfter: -1}
	if restartErr != nil {
		r.FirstErrors = append(r.FirstErrors, "restart: "+restartErr.Error())
	}
	var down []time.Duration
	grace := CutGrace
	if raceEnabled {
		grace = s.RestartAt - s.KillAt
	}
	cut := func(q Request) bool { return q.At < s.KillAt+grace && q.At+q.Took > s.KillAt }
	for _, q := range reqs {
		if q.Post && cut(q) {
			r.POSTsCut++
		}
		if q.At >= s.KillAt && q.At < s.RestartAt {
			down = append(down, q.Took)
		}
		if q.OK() {
			continue
		}
		if q.Post {
			r.POSTErrors++
			if !cut(q) {
				r.LostPOSTs++
			}
		} else {
			r.GETErrors++
		}
		if len(r.FirstErrors) < 3 {
			r.FirstErrors = append(r.FirstErrors, describe(q))
		}
	}
	r.P99, r.Max = Quantile(down, 0.99), Quantile(down, 1)
	for _, b := range s.Backends {
		r.Bodies += b.Bodies()
		r.BadBodies += b.BadBodies()
	}
	if s.Tries != nil {
		r.TriesDead, r.LastTry, r.LateTries = triesWhileDown(samples, s.KillAt, s.RestartAt)
	}
	r.BackAfter, r.Ramp = s.recovery()
	return r
}

// recovery finds the restarted backend's first answer, and its share of
// the answers in each Window from that first answer to the end (a window
// cut short by the end is left out).
func (s Scenario) recovery() (time.Duration, []float64) {
	back := time.Duration(-1)
	for _, t := range s.Backends[s.Dead].Served() {
		if t >= s.RestartAt && (back < 0 || t-s.RestartAt < back) {
			back = t - s.RestartAt
		}
	}
	if back < 0 {
		return back, nil
	}
	from := s.RestartAt + back
	n := int((s.End - from) / s.Window)
	if n < 0 {
		n = 0 // back only after the end: no window to show
	}
	mine, all := make([]int, n), make([]int, n)
	for k, b := range s.Backends {
		for _, t := range b.Served() {
			w := int((t - from) / s.Window)
			if t < from || w >= n {
				continue
			}
			all[w]++
			if k == s.Dead {
				mine[w]++
			}
		}
	}
	ramp := make([]float64, 0, n)
	for w := 0; w < n; w++ {
		if all[w] > 0 {
			ramp = append(ramp, float64(mine[w])/float64(all[w]))
		}
	}
	return back, ramp
}

type sample struct {
	at    time.Duration
	count int64
}

// poll samples count every 10 ms until ctx ends.
func poll(ctx context.Context, epoch time.Time, count func() int64) []sample {
	var out []sample
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		out = append(out, sample{time.Since(epoch), count()})
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// triesWhileDown reads the samples: the tries from kill to restart, the
// time of the last one after the kill, and those in the last half.
func triesWhileDown(ss []sample, kill, restart time.Duration) (int64, time.Duration, int64) {
	at := func(t time.Duration) int64 {
		var c int64
		for _, s := range ss {
			if s.at > t {
				break
			}
			c = s.count
		}
		return c
	}
	last := time.Duration(-1)
	for k := 1; k < len(ss); k++ {
		if ss[k].at > kill && ss[k].at <= restart && ss[k].count > ss[k-1].count {
			last = ss[k].at - kill
		}
	}
	half := kill + (restart-kill)/2
	return at(restart) - at(kill), last, at(restart) - at(half)
}

func describe(q Request) string {
	m := "GET"
	if q.Post {
		m = "POST"
	}
	if q.Err != "" {
		return fmt.Sprintf("%s at %v: %s", m, q.At.Round(time.Millisecond), q.Err)
	}
	return fmt.Sprintf("%s at %v: status %d", m, q.At.Round(time.Millisecond), q.Status)
}

// Quantile returns the q-quantile (nearest rank) of ds, 0 for none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(q*float64(len(s))+0.5) - 1
	if k < 0 {
		k = 0
	}
	if k >= len(s) {
		k = len(s) - 1
	}
	return s[k]
}

func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// Down is what the client saw with every backend down.
type Down struct {
	Requests int
	Statuses map[int]int // 0: transport error
	Max      time.Duration
}

// AllDown sends n requests (every third a POST) one after the other to a
// proxy whose backends are all down.
func AllDown(l Load, epoch time.Time, n int) Down {
	client := l.Client()
	defer client.CloseIdleConnections()
	d := Down{Requests: n, Statuses: map[int]int{}}
	body := []byte("all backends are down")
	for k := 0; k < n; k++ {
		q := l.send(client, epoch, 1000000+k, k%3 == 2, body)
		d.Statuses[q.Status]++
		if q.Took > d.Max {
			d.Max = q.Took
		}
	}
	return d
}

// Prompt reports whether every answer was a 502 or 503 within limit.
func (d Down) Prompt(limit time.Duration) bool {
	return d.Statuses[http.StatusBadGateway]+d.Statuses[http.StatusServiceUnavailable] == d.Requests && d.Max < limit
}

func (d Down) String() string {
	codes := make([]int, 0, len(d.Statuses))
	for c := range d.Statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		name := fmt.Sprint(c)
		if c == 0 {
			name = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%d×%s", d.Statuses[c], name))
	}
	return fmt.Sprintf("%s, max %s", strings.Join(parts, " "), ms(d.Max))
}

// Goroutines waits up to 3 s for the process's goroutines to fall to limit
// and returns the last count.
func Goroutines(limit int) int {
	n := runtime.NumGoroutine()
	for k := 0; k < 60 && n > limit; k++ {
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}
