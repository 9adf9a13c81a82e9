package faultsuite

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCountIn(t *testing.T) {
	// /proc/net/tcp lines: local, remote, state, ..., inode (field 10).
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:80E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 101 1 0 100 0 0 10 0
   1: 0100007F:80E8 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 102 1 0 20 4 30 10 -1
   2: 0100007F:D431 0100007F:80E8 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0
   3: 0100007F:D432 0100007F:80E9 08 00000000:00000000 00:00000000 00000000     0        0 103 1 0 20 4 30 10 -1
   4: 0100007F:80E8 0100007F:D433 01 00000000:00000000 00:00000000 00000000     0        0 104 1 0 20 4 30 10 -1
   5: 0100007F:1F90 0100007F:D434 01 00000000:00000000 00:00000000 00000000     0        0 105 1 0 20 4 30 10 -1
`
	want := map[int]bool{0x80E8: true, 0x80E9: true}
	tests := []struct {
		held []string
		n    int
	}{
		{[]string{"101", "102", "103", "104", "105"}, 3}, // the listener and the other port do not count
		{[]string{"102"}, 1},
		{nil, 0}, // another program's sockets
	}
	for _, tt := range tests {
		held := map[string]bool{}
		for _, h := range tt.held {
			held[h] = true
		}
		n, err := countIn(bufio.NewScanner(strings.NewReader(table)), want, held)
		if err != nil || n != tt.n {
			t.Errorf("held %v: %d, %v; want %d", tt.held, n, err, tt.n)
		}
	}
}

func TestTriesWhileDown(t *testing.T) {
	ms := time.Millisecond
	ss := []sample{{0, 5}, {100 * ms, 7}, {200 * ms, 8}, {300 * ms, 8}, {600 * ms, 9}, {900 * ms, 9}, {1100 * ms, 12}}
	// Killed at 150 ms, restarted at 1000 ms: tries at 200 and 600 ms.
	tries, last, late := triesWhileDown(ss, 150*ms, 1000*ms)
	if tries != 2 || last != 450*ms || late != 1 {
		t.Errorf("got %d tries, last %v, %d late; want 2, 450ms, 1", tries, last, late)
	}
	if tries, last, _ := triesWhileDown(ss, 610*ms, 1000*ms); tries != 0 || last != -1 {
		t.Errorf("no try while down: got %d, last %v", tries, last)
	}
}

func TestWriteRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.md")
	doc := "# title\n\nprose\n\n" + beginMark + "\n\n" + tableHead +
		"| Traefik plugin | t1 | 1 |\n| Caddy | old | 1 |\n| nginx | n1 | 1 |\n\n" + endMark + "\nafter\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := []Row{{Host: "Caddy", Case: "c1"}, {Host: "Caddy", Case: "c2"}}
	if err := WriteRows(path, rows); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var hosts []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| host |") {
			f := strings.Split(line, "|")
			hosts = append(hosts, strings.TrimSpace(f[1])+"/"+strings.TrimSpace(f[2]))
		}
	}
	if got, want := strings.Join(hosts, " "), "nginx/n1 Caddy/c1 Caddy/c2 Traefik plugin/t1"; got != want {
		t.Errorf("rows %q, want %q", got, want)
	}
	if !strings.HasPrefix(string(b), "# title\n\nprose\n\n") || !strings.HasSuffix(string(b), endMark+"\nafter\n") {
		t.Errorf("the text around the table changed:\n%s", b)
	}
	os.WriteFile(path, []byte("no markers"), 0o644)
	if err := WriteRows(path, rows); err == nil {
		t.Error("a file without the markers: no error")
	}
}

// proxy is a plain round-robin proxy with no retries: a request that meets
// the dead backend fails. damage, when set, cuts request bodies short.
type proxy struct {
	backends []string
	next     atomic.Int64
	damage   bool
	tr       *http.Transport
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	addr := p.backends[int(p.next.Add(1))%len(p.backends)]
	body := io.Reader(r.Body)
	n := r.ContentLength
	if p.damage && n > 1 {
		body, n = io.LimitReader(r.Body, n-1), n-1
	}
	out, _ := http.NewRequest(r.Method, "http://"+addr+r.URL.RequestURI(), body)
	out.ContentLength = n
	out.Header = r.Header.Clone()
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// The suite catches a proxy that loses requests and one that damages
// bodies: the assertions can fail.
func TestScenarioCatchesFaults(t *testing.T) {
	ms := time.Millisecond
	for _, damage := range []bool{false, true} {
		epoch := time.Now()
		ports, err := FreePorts(33460, 33499, 3) // the harness test's own ports
		if err != nil {
			t.Fatal(err)
		}
		var bs []*Backend
		var addrs []string
		for k, port := range ports {
			b, err := NewBackend(fmt.Sprint(k), fmt.Sprintf("127.0.0.1:%d", port), epoch)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Kill()
			bs, addrs = append(bs, b), append(addrs, b.Addr)
		}
		p := &proxy{backends: addrs, damage: damage, tr: &http.Transport{}}
		front := httptest.NewServer(p)
		load := Load{URL: front.URL, Workers: 4, Interval: 10 * ms, PostEvery: 2, BodySize: 512}
		s := Scenario{Backends: bs, Dead: 2, Load: load, Epoch: epoch, KillAt: 200 * ms, RestartAt: 1000 * ms, End: 1300 * ms}
		res := s.Run()
		for _, b := range bs {
			b.Kill()
		}
		row := Row{Result: res, Down: AllDown(load, epoch, 3)}
		front.Close()
		p.tr.CloseIdleConnections()
		problems := strings.Join(row.Problems(Targets{BackAgain: true}), "\n")
		if damage {
			if res.BadBodies == 0 || !strings.Contains(problems, "arrived damaged") {
				t.Errorf("damaged bodies: %d found, problems: %s", res.BadBodies, problems)
			}
			continue
		}
		// A third of the requests sent while the backend was down failed.
		if res.GETErrors == 0 || res.POSTErrors == 0 || !strings.Contains(problems, "GETs of") {
			t.Errorf("no retries: %d GET errors, %d POST errors; problems: %s", res.GETErrors, res.POSTErrors, problems)
		}
		if res.BackAfter < 0 {
			t.Errorf("the restarted backend got no request: %+v", res.Ramp)
		}
	}
}
