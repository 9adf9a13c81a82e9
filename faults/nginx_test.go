package faults

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lbpack/lbpack/internal/faultsuite"
)

// nginx, with proxy_next_upstream, is the anchor of the table: what a user
// moving from nginx has today.
func TestNginxFaults(t *testing.T) {
	bin := nginxBinary(t)
	base := basePort(t) + faultsuite.PortSpan
	next := "proxy_next_upstream error timeout; proxy_next_upstream_tries 3"
	cases := []struct{ name, method string }{
		{"round robin, " + next + ", max_fails=1 fail_timeout=1s", ""},
		{"`least_conn`, " + next + ", max_fails=1 fail_timeout=1s", "least_conn;"},
		{"`hash $request_uri consistent`, " + next + ", max_fails=1 fail_timeout=1s", "hash $request_uri consistent;"},
	}
	var rows []faultsuite.Row
	for _, c := range cases {
		// nginx's fail_timeout counts in whole seconds of its clock, so the
		// backend may wait up to 2 s after the last failed try: a longer run.
		fc := faultsuite.Case{Host: "nginx", Name: c.name, Targets: faultsuite.Targets{BackAgain: true},
			End: faultsuite.RestartAt + 3*time.Second}
		t.Run(c.name, func(t *testing.T) {
			rows = append(rows, faultsuite.RunCase(t, base, fc, nginxProxy(t, bin, c.method)))
		})
	}
	faultsuite.WriteDocs(t, rows, len(cases))
}

// nginxBinary finds nginx: $NGINX, the PATH, then the usual sbin
// directories. Without it the test skips, or fails when CI is set.
func nginxBinary(t *testing.T) string {
	if p := os.Getenv("NGINX"); p != "" {
		return p
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal("nginx not found and CI is set: install it (apt-get install -y nginx) or set NGINX")
	}
	t.Skip("nginx not found (apt-get install -y nginx, or set NGINX): the anchor rows need it")
	return ""
}

// nginxProxy runs nginx on the first port, its access log listing every upstream
// each request tried ($upstream_addr), from which the tries of the dead
// backend are counted.
func nginxProxy(t *testing.T, bin, method string) faultsuite.Proxy {
	return func(backends []string, dead int, ports []int) (faultsuite.Running, error) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
			return faultsuite.Running{}, err
		}
		var servers bytes.Buffer
		for _, b := range backends {
			fmt.Fprintf(&servers, "        server %s max_fails=1 fail_timeout=1s;\n", b)
		}
		conf := fmt.Sprintf(`pid nginx.pid;
error_log stderr warn;
events { worker_connections 1024; }
http {
    log_format tries "$upstream_addr";
    access_log access.log tries;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    upstream backends {
        %s
%s        keepalive 32;
    }
    server {
        listen 127.0.0.1:%d;
        location = /nginx-ready { access_log off; return 200 "ready"; }
        location / {
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries 3;
            proxy_connect_timeout 1s;
        }
    }
}
`, method, servers.String(), ports[0])
		if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
			return faultsuite.Running{}, err
		}
		logf, err := os.Create(filepath.Join(dir, "stderr.log"))
		if err != nil {
			return faultsuite.Running{}, err
		}
		defer logf.Close()
		cmd := exec.Command(bin, "-p", dir+"/", "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr",
			"-g", "daemon off; master_process on; worker_processes 1;")
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return faultsuite.Running{}, err
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			pgid := cmd.Process.Pid
			syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
			}
			// The workers are in the group too: none outlives the test.
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
		}
		url := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		if err := waitReady(url+"/nginx-ready", exited); err != nil {
			stop()
			msg, _ := os.ReadFile(filepath.Join(dir, "stderr.log"))
			return faultsuite.Running{}, fmt.Errorf("%v: %s", err, msg)
		}
		tries := logCounter(filepath.Join(dir, "access.log"), backends[dead])
		log := func() string {
			b, _ := os.ReadFile(filepath.Join(dir, "stderr.log"))
			return string(b)
		}
		pids := func() []int { return faultsuite.Children(cmd.Process.Pid) }
		return faultsuite.Running{URL: url, Pids: pids, Tries: tries, Stop: stop, Log: log}, nil
	}
}

// waitReady polls url until it answers 200, for up to 10 s.
func waitReady(url string, exited <-chan struct{}) error {
	c := &http.Client{Timeout: 500 * time.Millisecond}
	defer c.CloseIdleConnections()
	for k := 0; k < 200; k++ {
		select {
		case <-exited:
			return fmt.Errorf("nginx exited")
		default:
		}
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nginx did not answer within 10 s")
}

// logCounter counts, in the complete lines of the access log so far, how
// many times addr appears: once per try of that upstream.
func logCounter(path, addr string) func() int64 {
	var mu sync.Mutex
	var off, n int64
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		b, err := os.ReadFile(path)
		if err != nil || int64(len(b)) <= off {
			return n
		}
		chunk := b[off:]
		if k := bytes.LastIndexByte(chunk, '\n'); k >= 0 {
			chunk = chunk[:k+1]
			n += int64(bytes.Count(chunk, []byte(addr)))
			off += int64(len(chunk))
		}
		return n
	}
}
