package conformance

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The sticky recorder: it runs the cases of stickyFamilies through a real
// nginx >= 1.31 and writes what nginx answered to testdata/sticky, one file
// per family. It never builds nginx; it runs only when asked:
//
//	NGINX131=/path/to/nginx go test ./conformance -run TestRecordSticky -record-sticky -count=1
//
// The backends listen on fixed addresses, since a server's cookie value is
// the MD5 of its address: recordings made anywhere are byte-identical but for
// the dates.
var recordSticky = flag.Bool("record-sticky", false,
	"record nginx's sticky sessions into testdata/sticky (needs NGINX131, the path of an nginx >= 1.31)")

const stickyRecordCommand = "NGINX131=/path/to/nginx-1.31.4 go test ./conformance -run TestRecordSticky -record-sticky -count=1"

const (
	stickyFrontPort   = 44100
	stickyFirstPort   = 44101 // backends on stickyFirstPort.. +stickyBackends-1
	stickyBackends    = 8
	stickyDeadAddr    = "127.0.0.1:44109" // nothing listens there
	stickyStaleAddr   = "127.0.0.1:44199" // in no upstream: its md5 is a stale cookie
	stickyGarbage     = "not-a-server-id"
	stickyDeadSlot    = -1
	stickyRecordLimit = 10 * time.Second
)

// stickyIPv6Slot is the slot of the one backend on [::1], whose id nginx
// computes from its bracketed address.
const stickyIPv6Slot = stickyBackends

func stickyAddr(slot int) string {
	switch slot {
	case stickyDeadSlot:
		return stickyDeadAddr
	case stickyIPv6Slot:
		return "[::1]:" + strconv.Itoa(stickyFirstPort+slot+1)
	}
	return "127.0.0.1:" + strconv.Itoa(stickyFirstPort+slot)
}

// TestRecordSticky records every family. It is a tool, not a check: without
// -record-sticky it does nothing but say so.
func TestRecordSticky(t *testing.T) {
	if !*recordSticky {
		t.Skip("records testdata/sticky from a real nginx: run with -record-sticky and NGINX131 set")
	}
	bin := os.Getenv("NGINX131")
	if bin == "" {
		t.Fatal("-record-sticky needs NGINX131: the path of an nginx >= 1.31 built with the realip module")
	}
	version := stickyNginxVersion(t, bin)
	be := startStickyBackends(t)
	for _, fam := range stickyFamilies() {
		fam.NginxVersion = version
		fam.Command = stickyRecordCommand
		recordFamily(t, bin, be, fam)
		data, err := json.MarshalIndent(fam, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "sticky", fam.Family+".json")
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d cases)", path, len(fam.Cases))
	}
}

// stickyNginxVersion returns the first line of "nginx -v" and insists on
// 1.31 or later.
func stickyNginxVersion(t *testing.T, bin string) string {
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -v: %v: %s", bin, err, out)
	}
	line := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	v := strings.TrimPrefix(line, "nginx version: nginx/")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("cannot read the version in %q", line)
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	if major < 1 || major == 1 && minor < 31 {
		t.Fatalf("%s is %s: sticky needs nginx >= 1.31", bin, line)
	}
	return line
}

// startStickyBackends starts the backends (the harness's pool) at their
// fixed addresses, one of them on [::1].
func startStickyBackends(t *testing.T) *pool {
	hosts := make([]string, stickyBackends+1)
	for i := range hosts {
		hosts[i] = stickyAddr(i)
	}
	return listenPool(t, hosts)
}

// stickyConf is nginx.conf for the given cases, listening on port.
func stickyConf(port int, cases []*stickyCase) string {
	var b strings.Builder
	b.WriteString(confHTTPStart)
	for _, c := range cases {
		b.WriteString(c.Upstream)
	}
	b.WriteString(confFrontServer(port))
	for _, c := range cases {
		b.WriteString(c.Location)
	}
	b.WriteString("    }\n}\n")
	return b.String()
}

// recordFamily tests each case's configuration alone, then runs the accepted
// ones through one nginx and fills in the answers.
func recordFamily(t *testing.T, bin string, be *pool, fam *stickyFamily) {
	var run []*stickyCase
	for i := range fam.Cases {
		c := &fam.Cases[i]
		c.ConfigTest = stickyConfigTestOf(t, bin, c)
		if c.ConfigTest.OK {
			run = append(run, c)
		} else {
			c.Requests = nil
		}
	}
	if len(run) == 0 {
		return
	}
	dir := nginxPrefix(t)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(stickyConf(stickyFrontPort, run)), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &nginx{}
	if err := n.start(bin, dir, stickyFrontPort); err != nil {
		t.Fatalf("%s: nginx did not start: %v", fam.Family, err)
	}
	defer n.stop()
	client := &http.Client{
		Timeout:   stickyRecordLimit,
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, DisableCompression: true},
	}
	defer client.CloseIdleConnections()
	held := &http.Client{Timeout: stickyRecordLimit, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	for _, c := range run {
		if err := recordCase(n.base, client, held, be, c); err != nil {
			t.Fatalf("%s/%s: %v\nnginx log: %s", fam.Family, c.Name, err, n.stderr())
		}
	}
}

// stickyConfigTestOf runs "nginx -t" on a configuration holding case c alone.
func stickyConfigTestOf(t *testing.T, bin string, c *stickyCase) stickyConfigTest {
	dir := nginxPrefix(t)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(stickyConf(stickyFrontPort, []*stickyCase{c})), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-p", dir+"/", "-c", conf, "-e", "stderr").CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("%s -t: %v", bin, err)
	}
	ct := stickyConfigTest{OK: err == nil, Messages: []string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			line = strings.ReplaceAll(line, dir, "PREFIX")
			ct.Messages = append(ct.Messages, logStamp.ReplaceAllString(line, "$1 "))
		}
	}
	return ct
}

// logStamp is the date and process of an nginx log line, which the
// recordings leave out.
var logStamp = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: `)

// stickyFlight is a request held at its backend.
type stickyFlight struct {
	id   string
	done chan stickyResult
}

type stickyResult struct {
	reply stickyReply
	err   error
}

// recordCase sends c's requests one after another and records the answers.
func recordCase(base string, client, heldClient *http.Client, be *pool, c *stickyCase) error {
	flights := map[int]*stickyFlight{}
	defer func() {
		for _, f := range flights {
			be.gates.Release(f.id)
		}
	}()
	// land releases held request j and records its answer.
	land := func(j int) error {
		f := flights[j]
		if f == nil {
			return fmt.Errorf("request %d is released but not held", j)
		}
		delete(flights, j)
		be.gates.Release(f.id)
		res := <-f.done
		if res.err != nil {
			return fmt.Errorf("held request %d: %v", j, res.err)
		}
		c.Requests[j].Answer = res.reply
		return nil
	}
	for i := range c.Requests {
		ex := &c.Requests[i]
		for _, j := range ex.ReleaseBefore {
			if err := land(j); err != nil {
				return err
			}
		}
		if ex.PauseBeforeMS > 0 {
			time.Sleep(time.Duration(ex.PauseBeforeMS) * time.Millisecond)
		}
		if !ex.Held {
			reply, err := stickyDo(base, client, c, ex)
			if err != nil {
				return fmt.Errorf("request %d: %v", i, err)
			}
			ex.Answer = reply
			continue
		}
		f, err := be.holdSticky(base, heldClient, c, ex, i)
		if err != nil {
			return fmt.Errorf("request %d: %v", i, err)
		}
		flights[i] = f
	}
	for j := range c.Requests {
		if flights[j] != nil {
			if err := land(j); err != nil {
				return err
			}
		}
	}
	return nil
}

// hold sends ex on a connection of its own and returns once its backend has
// it, so that nginx counts it in flight.
func (be *pool) holdSticky(base string, client *http.Client, c *stickyCase, ex *stickyExchange, i int) (*stickyFlight, error) {
	f := &stickyFlight{id: fmt.Sprintf("%s-%d", c.Name, i), done: make(chan stickyResult, 1)}
	be.gates.Hold(f.id)
	sep := "?"
	if strings.Contains(ex.Target, "?") {
		sep = "&"
	}
	ex.Target += sep + "hold=" + f.id
	go func() {
		reply, err := stickyDo(base, client, c, ex)
		f.done <- stickyResult{reply, err}
	}()
	select {
	case a := <-be.arrived:
		if a.id != f.id {
			return nil, fmt.Errorf("held request %s: %s arrived instead", f.id, a.id)
		}
		return f, nil
	case res := <-f.done:
		return nil, fmt.Errorf("held request %s answered before its release: %+v %v", f.id, res.reply, res.err)
	case <-time.After(stickyRecordLimit):
		return nil, fmt.Errorf("held request %s: no backend got it", f.id)
	}
}

// stickyDo sends one request and reads nginx's answer.
func stickyDo(base string, client *http.Client, c *stickyCase, ex *stickyExchange) (stickyReply, error) {
	req, err := http.NewRequest(ex.Method, base+ex.Target, nil)
	if err != nil {
		return stickyReply{}, err
	}
	for _, h := range ex.Headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Add(name, value)
	}
	resp, err := client.Do(req)
	if err != nil {
		return stickyReply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return stickyReply{}, err
	}
	r := stickyReply{
		Status:       resp.StatusCode,
		Server:       -1,
		UpstreamAddr: resp.Header.Get("X-Upstream"),
		SetCookie:    append([]string{}, resp.Header.Values("Set-Cookie")...),
		Date:         resp.Header.Get("Date"),
	}
	if resp.StatusCode == http.StatusOK {
		r.Backend = string(body)
		for i, s := range c.Servers {
			if s.Address == r.Backend {
				r.Server = i
			}
		}
		if r.Server < 0 {
			return r, fmt.Errorf("answer %q names no server of the case", body)
		}
	}
	return r, nil
}
