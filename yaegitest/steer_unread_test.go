package yaegitest

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// unreadProbeSource is added to the interpreted plugin: it reads a
// steerer's requests in flight, with readAnswers false or true.
const unreadProbeSource = `package traefikplugin

import "net/http"

func SteerInFlight(h http.Handler, i int) int64 {
	if bs, ok := h.(*blindSteerer); ok {
		return bs.st.p.bal.Load().(*balancer).InFlight(i)
	}
	return h.(*steerer).p.bal.Load().(*balancer).InFlight(i)
}
`

// TestSteerUnread: with readAnswers false the service answers through the
// writer Traefik gave the plugin (it can flush: no interpreter's wrapper
// between them), the cookies follow nginx's sequence for 5, 3, 2, and an
// override by the service (its server down there) shows in the answer's
// Set-Cookie, which reaches the client, and takes the picked server out of
// the plugin's rotation (maxFails 1).
func TestSteerUnread(t *testing.T) {
	l := loadPlugin(t, nil)
	svc := newStickyService("lb", sha256Cookie, steerURLs...)
	var wrapped atomic.Int32
	svc.answer = func(w http.ResponseWriter, r *http.Request, url string) {
		if _, ok := w.(http.Flusher); !ok {
			wrapped.Add(1)
		}
		io.WriteString(w, "ok")
	}
	base, client := front(t, steerPlugin(t, l, steerDoc("readAnswers: false\n", steerURLs, "5", "3", "2"), svc))
	for k := 0; k < 10; k++ {
		if r := do(t, client, "GET", base+"/", ""); r.status != 200 || r.header.Get("Set-Cookie") != "" {
			t.Fatalf("request %d: status %d, Set-Cookie %q", k, r.status, r.header.Get("Set-Cookie"))
		}
	}
	got, used := svc.record()
	want := strings.Fields("a b c a a b a c b a")
	if g, u := names(got, sha256Cookie), names(used, same); !slices.Equal(g, want) || !slices.Equal(u, want) {
		t.Errorf("cookies %v, servers used %v; want %v", g, u, want)
	}
	if n := wrapped.Load(); n != 0 {
		t.Errorf("%d answers went through a writer without Flush", n)
	}

	svc.setDown(steerURLs[1], true) // b
	svc.turn = 2                    // the service's own pick: c
	overridden := 0
	for k := 0; k < 10; k++ {
		r := do(t, client, "GET", base+"/", "")
		if sc := r.header.Get("Set-Cookie"); sc != "" {
			overridden++
			if !strings.HasPrefix(sc, "lb="+sha256Cookie(steerURLs[2])) {
				t.Errorf("request %d: Set-Cookie %q, want the service's choice, c", k, sc)
			}
		}
	}
	got, used = svc.record()
	if g := names(got, sha256Cookie); overridden != 1 || slices.Index(g, "b") < 0 || slices.Index(g[slices.Index(g, "b")+1:], "b") >= 0 {
		t.Errorf("cookies %v with %d overrides: want b picked once, then out", g, overridden)
	}
	if slices.Contains(names(used, same), "b") {
		t.Errorf("servers used %v: b is down in the service", names(used, same))
	}
}

// TestSteerCounted: a strategy that counts requests in flight counts a
// steered request until the service has sent its answer, whether the
// plugin reads the answers or not, and a hashed key keeps its server.
func TestSteerCounted(t *testing.T) {
	for _, read := range []string{"false", "true"} {
		t.Run("readAnswers_"+read, func(t *testing.T) { testSteerCounted(t, "readAnswers: "+read+"\n") })
	}
}

func testSteerCounted(t *testing.T, mode string) {
	l := loadPlugin(t, map[string]string{"zz_unread.go": unreadProbeSource})
	inFlight := eval(t, l.i, "traefikplugin.SteerInFlight").(func(http.Handler, int) int64)
	svc := newStickyService("lb", sha256Cookie, steerURLs...)
	release := make(chan struct{})
	svc.answer = func(w http.ResponseWriter, r *http.Request, url string) {
		if r.URL.Path == "/hold" {
			<-release
		}
		io.WriteString(w, "ok")
	}
	h := steerPlugin(t, l, steerDoc(mode+"strategy: least_conn\n", steerURLs), svc)
	base, client := front(t, h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := client.Get(base + "/hold")
		if err == nil {
			resp.Body.Close()
		}
	}()
	held := -1
	for k := 0; k < 200 && held < 0; k++ {
		for i := range steerURLs {
			if inFlight(h, i) == 1 {
				held = i
			}
		}
		if held < 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if held < 0 {
		close(release)
		t.Fatal("the held request is not counted in flight")
	}
	for k := 0; k < 4; k++ {
		do(t, client, "GET", base+"/", "")
	}
	got, _ := svc.record()
	for _, g := range names(got[1:], sha256Cookie) {
		if g == string(rune('a'+held)) {
			t.Errorf("cookies %v: a request went to the busy server %s", names(got, sha256Cookie), g)
		}
	}
	close(release)
	<-done
	for i := range steerURLs {
		if n := inFlight(h, i); n != 0 {
			t.Errorf("server %d: %d in flight after every answer", i, n)
		}
	}

	hashed := steerPlugin(t, l, steerDoc(mode+"strategy: url_hash\nhashKey: path\n", steerURLs), svc)
	base, client = front(t, hashed)
	for k := 0; k < 6; k++ {
		do(t, client, "GET", base+"/user/"+string(rune('0'+k%2)), "")
	}
	got, _ = svc.record()
	g := names(got, sha256Cookie)
	for k := 2; k < len(g); k++ {
		if g[k] != g[k-2] {
			t.Errorf("cookies %v: a path changed server", g)
			break
		}
	}
}
