package conformance

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/sticky"
)

// TestStickyReplayCore replays every recorded sticky case that nginx
// accepted through core and package sticky, request for request: the
// server that answered, every address tried, and every Set-Cookie header
// byte for byte. What a host adds (reading the request, writing the
// answer) is done here as the hosts do it, with package sticky.
func TestStickyReplayCore(t *testing.T) {
	fams := loadStickyFamilies(t)
	names := make([]string, 0, len(fams))
	for name := range fams {
		names = append(names, name)
	}
	sort.Strings(names)
	replayed, requests := 0, 0
	for _, name := range names {
		for _, c := range fams[name].Cases {
			if !c.ConfigTest.OK {
				continue // config.json's refusals: the converter's tests hold them
			}
			c := c
			t.Run(c.Name, func(t *testing.T) {
				if strings.Contains(c.Sticky, "$") && c.Mode == "cookie" {
					t.Logf("not replayed: %q takes an attribute from a variable, which lbpack refuses (TestStickyReplayCoreRefusesVariables)", c.Sticky)
					return
				}
				rp, err := newStickyReplay(&c)
				if err != nil {
					t.Fatal(err)
				}
				for k := range c.Requests {
					if msg := rp.request(k); msg != "" {
						t.Fatalf("%s request %d (%s %s): %s", filepath.Base(name), k, c.Requests[k].Method, c.Requests[k].Target, msg)
					}
				}
				replayed++
				requests += len(c.Requests)
			})
		}
	}
	t.Logf("replayed %d cases, %d requests", replayed, requests)
	if replayed < 50 {
		t.Errorf("replayed %d cases; the recordings hold more than 50 nginx accepted", replayed)
	}
}

// TestStickyReplayCoreRefusesVariables checks the recorded cases the core
// replay cannot run: a cookie attribute from a variable, which lbpack
// refuses at configuration time (nginx evaluates it per request).
func TestStickyReplayCoreRefusesVariables(t *testing.T) {
	fam := loadStickyFamilies(t)["cookie_attributes.json"]
	if fam == nil {
		t.Fatal("no cookie_attributes.json")
	}
	refused := 0
	for _, c := range fam.Cases {
		words := strings.Fields(c.Sticky)
		if !strings.Contains(c.Sticky, "$") {
			continue
		}
		if _, err := sticky.ParseCookie(words[2], words[3:]); err == nil {
			t.Errorf("%s: %q parsed; a variable must be refused", c.Name, c.Sticky)
		}
		refused++
	}
	if refused != 2 {
		t.Errorf("%d cases with variables; the recordings have 2", refused)
	}
}

// stickyReplay is one case's upstream as core and the hosts would run it.
type stickyReplay struct {
	c        *stickyCase
	b        *core.Balancer
	now      time.Time
	cookie   *sticky.Cookie
	route    []sticky.Source
	create   []sticky.Source
	lookup   []sticky.Source
	sessions *sticky.Sessions
	next     bool // proxy_next_upstream is not off
	held     map[int]heldRequest
}

// heldRequest is a request still in flight at its backend.
type heldRequest struct {
	i       int
	t       core.Ticket
	create  string
	session string
}

// replayBase is the replay's clock at the first request.
var replayBase = time.Date(2026, 12, 1, 23, 15, 44, 0, time.UTC)

// newStickyReplay builds case c's balancer and sticky settings.
func newStickyReplay(c *stickyCase) (*stickyReplay, error) {
	rp := &stickyReplay{c: c, now: replayBase, held: map[int]heldRequest{}}
	cfg := core.Config{Now: func() time.Time { return rp.now }, Rand: func() uint64 { return 1 }}
	switch c.Method {
	case "round_robin":
		cfg.Strategy = core.SmoothWRR
	case "least_conn":
		cfg.Strategy = core.LeastConn
	case "ip_hash":
		cfg.Strategy = core.IPHash
	case "hash":
		cfg.Strategy, cfg.HashMode = core.URLHash, core.HashModulo
	case "hash_consistent":
		cfg.Strategy, cfg.HashMode = core.URLHash, core.HashKetama
	default:
		return nil, fmt.Errorf("method %q: not one of nginx's", c.Method)
	}
	for _, s := range c.Servers {
		cfg.Backends = append(cfg.Backends, core.Backend{
			Address: s.Address, Weight: s.Weight, Down: s.Down, Drain: s.Drain, Backup: s.Backup,
			Route: s.Route, MaxConns: s.MaxConns, MaxFails: 1, FailTimeout: 10 * time.Second,
		})
	}
	b, err := core.New(cfg)
	if err != nil {
		return nil, err
	}
	rp.b = b
	rp.next = !strings.Contains(c.Location, "proxy_next_upstream off")
	if stickyDropped(c.Upstream) {
		return rp, nil // nginx drops a sticky written before the method
	}
	words := strings.Fields(strings.TrimSuffix(strings.TrimSpace(c.Sticky), ";"))
	switch c.Mode {
	case "cookie":
		ck, err := sticky.ParseCookie(words[2], words[3:])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", c.Sticky, err)
		}
		rp.cookie = &ck
	case "route":
		for _, v := range words[2:] {
			s, err := nginxSource(v)
			if err != nil {
				return nil, err
			}
			rp.route = append(rp.route, s)
		}
	case "learn":
		timeout := sticky.DefaultTimeout
		for _, p := range words[2:] {
			k, v, _ := strings.Cut(p, "=")
			switch k {
			case "create", "lookup":
				s, err := nginxSource(v)
				if err != nil {
					return nil, err
				}
				if k == "create" {
					rp.create = append(rp.create, s)
				} else {
					rp.lookup = append(rp.lookup, s)
				}
			case "timeout":
				if timeout, err = time.ParseDuration(v); err != nil {
					return nil, err
				}
			}
		}
		rp.sessions = sticky.NewSessions(timeout, 0)
	default:
		return nil, fmt.Errorf("mode %q", c.Mode)
	}
	return rp, nil
}

// stickyDropped reports nginx's placement trap: a sticky directive before
// the method directive is dropped (SEMANTICS.md, section 7).
func stickyDropped(upstream string) bool {
	seen := false
	for _, line := range strings.Split(upstream, "\n") {
		word, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.TrimSuffix(word, ";") {
		case "sticky":
			seen = true
		case "hash", "ip_hash", "least_conn", "random":
			if seen {
				return true
			}
		}
	}
	return false
}

// nginxSource is the Source of an nginx variable as the recordings use them.
func nginxSource(v string) (sticky.Source, error) {
	for _, p := range []struct{ prefix, kind string }{
		{"$arg_", "query:"}, {"$cookie_", "cookie:"}, {"$http_", "header:"},
		{"$upstream_cookie_", "upstream_cookie:"}, {"$upstream_http_", "upstream_header:"},
	} {
		if name, ok := strings.CutPrefix(v, p.prefix); ok {
			if p.kind == "header:" {
				name = strings.ReplaceAll(name, "_", "-")
			}
			return sticky.ParseSource(p.kind + name)
		}
	}
	return sticky.Source{}, fmt.Errorf("variable %q: not one the recordings use", v)
}

// request replays request k and returns what differs from nginx's answer.
func (rp *stickyReplay) request(k int) string {
	ex := &rp.c.Requests[k]
	rp.now = rp.now.Add(time.Duration(ex.PauseBeforeMS) * time.Millisecond)
	for _, j := range ex.ReleaseBefore {
		h := rp.held[j]
		delete(rp.held, j)
		core.Done(rp.b, h.i, h.t, 0, false)
		rp.learn(h.create, h.session, h.i)
	}
	r := httptest.NewRequest(ex.Method, ex.Target, nil)
	for _, line := range ex.Headers {
		name, value, _ := strings.Cut(line, ": ")
		r.Header.Add(name, value)
	}
	key := ""
	switch rp.c.Method {
	case "ip_hash":
		key = r.Header.Get("X-Real-IP")
	case "hash", "hash_consistent":
		key = sticky.QueryArg(r.URL.RawQuery, "k")
	}
	id, session := "", ""
	switch {
	case rp.cookie != nil:
		id = sticky.RequestCookie(r.Header, rp.cookie.Name)
	case rp.route != nil:
		id = sticky.First(rp.route, r, nil)
	case rp.sessions != nil:
		session = sticky.First(rp.lookup, r, nil)
		id = rp.sessions.Lookup(session, rp.now)
	}
	var tried []int
	allow := func(i int) bool {
		for _, j := range tried {
			if i == j {
				return false
			}
		}
		return true
	}
	answered := -1
	for {
		i, tk := core.Pick(rp.b, key, core.Filter{Sticky: id, Allow: allow})
		if i < 0 {
			break
		}
		tried = append(tried, i)
		if !rp.c.Servers[i].Listening {
			core.Done(rp.b, i, tk, 0, true)
			if rp.next {
				continue
			}
			break
		}
		answered = i
		create := ""
		if ex.Sends.Creates != "" {
			create = ex.Sends.Creates
		}
		if ex.Held {
			rp.held[k] = heldRequest{i: i, t: tk, create: create, session: session}
		} else {
			core.Done(rp.b, i, tk, 0, false)
			rp.learn(create, session, i)
		}
		break
	}
	return rp.compare(ex, tried, answered)
}

// learn is sticky learn at the end of a request that server i answered,
// having created session create and named session (either may be "").
func (rp *stickyReplay) learn(create, session string, i int) {
	if rp.sessions == nil {
		return
	}
	if create != "" {
		h := http.Header{}
		h.Add("Set-Cookie", "sess="+create+"; path=/")
		create = sticky.First(rp.create, httptest.NewRequest("GET", "/", nil), h)
	}
	rp.sessions.Learn(create, session, rp.b.ID(i), rp.now)
}

// compare checks the replay's answer against nginx's.
func (rp *stickyReplay) compare(ex *stickyExchange, tried []int, answered int) string {
	want := ex.Answer
	if answered != want.Server {
		return fmt.Sprintf("answered by server %d, nginx's by %d (%s)", answered, want.Server, want.Backend)
	}
	addrs := make([]string, len(tried))
	for k, i := range tried {
		addrs[k] = rp.c.Servers[i].Address
	}
	got0 := strings.Join(addrs, ", ")
	if len(tried) == 0 {
		got0 = rp.c.Name // nginx's $upstream_addr when no server was live
	}
	if got := got0; got != want.UpstreamAddr {
		return fmt.Sprintf("tried %q, nginx %q", got, want.UpstreamAddr)
	}
	date, err := http.ParseTime(want.Date)
	if err != nil {
		return fmt.Sprintf("answer's date %q: %v", want.Date, err)
	}
	var got []string
	if rp.cookie != nil && len(tried) > 0 {
		got = append(got, rp.cookie.Header(rp.b.ID(tried[len(tried)-1]), date))
	}
	if ex.Sends.Creates != "" && answered >= 0 {
		got = append(got, "sess="+ex.Sends.Creates+"; path=/")
	}
	if sameCookies(got, want.SetCookie) {
		return ""
	}
	if len(got) > 0 && rp.cookie != nil {
		// nginx reads its clock for expires at the pick: a second before
		// the Date across a second boundary.
		got[0] = rp.cookie.Header(rp.b.ID(tried[len(tried)-1]), date.Add(-time.Second))
		if sameCookies(got, want.SetCookie) {
			return ""
		}
	}
	return fmt.Sprintf("Set-Cookie %q, nginx's %q", got, want.SetCookie)
}

func sameCookies(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
