// Package corpus reads the nginx configurations of the conversion proof
// (conformance/testdata/convert) and the requests sent through them, for the
// tests that run each in nginx, in Caddy and in the Traefik plugin: those of
// package conformance and of the yaegitest module. It uses the standard
// library only.
//
// A configuration is a directory with nginx.conf and the files it includes,
// written with placeholders (@PORT@, @B0@...) that Write fills in with the
// addresses of one run. Its requests.txt holds one request per line:
//
//	METHOD <tab> HOST <tab> TARGET [<tab> Name: value]...
//
// where TARGET is the path and raw query exactly as sent. Lines starting
// with "#" are comments.
package corpus

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Request is one request of a configuration's sequence.
type Request struct {
	Method string
	Host   string
	Target string
	Header [][2]string
}

// String renders r as its requests.txt line.
func (r Request) String() string {
	parts := []string{r.Method, r.Host, r.Target}
	for _, h := range r.Header {
		parts = append(parts, h[0]+": "+h[1])
	}
	return strings.Join(parts, "\t")
}

// ReadRequests reads the requests.txt of dir.
func ReadRequests(dir string) ([]Request, error) {
	f, err := os.Open(filepath.Join(dir, "requests.txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, "\t")
		if len(fields) < 3 {
			return nil, fmt.Errorf("requests.txt:%d: want METHOD, HOST and TARGET separated by tabs", line)
		}
		r := Request{Method: fields[0], Host: fields[1], Target: fields[2]}
		for _, h := range fields[3:] {
			name, value, ok := strings.Cut(h, ": ")
			if !ok {
				return nil, fmt.Errorf("requests.txt:%d: header %q: want Name: value", line, h)
			}
			r.Header = append(r.Header, [2]string{name, value})
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// WriteRequests writes requests as requests.txt of dir, after a comment.
func WriteRequests(dir, comment string, reqs []Request) error {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(comment), "\n") {
		b.WriteString("# " + l + "\n")
	}
	for _, r := range reqs {
		b.WriteString(r.String() + "\n")
	}
	return os.WriteFile(filepath.Join(dir, "requests.txt"), []byte(b.String()), 0o644)
}

var placeholder = regexp.MustCompile(`@[A-Z0-9_]+@`)

// Placeholders returns the placeholders the configuration files of dir
// use, sorted.
func Placeholders(dir string) ([]string, error) {
	seen := map[string]bool{}
	err := walkConf(dir, func(_ string, data []byte) error {
		for _, m := range placeholder.FindAll(data, -1) {
			seen[string(m)] = true
		}
		return nil
	})
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, err
}

// Write copies the configuration files of dir to dst, each placeholder
// replaced by its value in vars, and returns the path of dst's nginx.conf.
// A placeholder without a value is an error.
func Write(dir, dst string, vars map[string]string) (string, error) {
	err := walkConf(dir, func(rel string, data []byte) error {
		var missing string
		out := placeholder.ReplaceAllFunc(data, func(m []byte) []byte {
			v, ok := vars[string(m)]
			if !ok {
				missing = string(m)
			}
			return []byte(v)
		})
		if missing != "" {
			return fmt.Errorf("%s: no value for %s", rel, missing)
		}
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, out, 0o644)
	})
	return filepath.Join(dst, "nginx.conf"), err
}

// walkConf calls fn with every configuration file under dir (all files but
// requests.txt and READMEs), by path relative to dir.
func walkConf(dir string, fn func(rel string, data []byte) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "requests.txt" || strings.HasSuffix(rel, ".md") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fn(rel, data)
	})
}

// Send sends r to the proxy at base ("http://127.0.0.1:PORT") and returns
// the status and the body (the answering backend's address).
func Send(c *http.Client, base string, r Request) (int, string, error) {
	req, err := http.NewRequest(r.Method, base+"/", nil)
	if err != nil {
		return 0, "", err
	}
	path, query, _ := strings.Cut(r.Target, "?")
	req.URL.Opaque = path // sent as written, escapes and all
	req.URL.RawQuery = query
	req.Host = r.Host
	for _, h := range r.Header {
		req.Header.Add(h[0], h[1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body), err
}
