package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStickyRecordings checks the recordings under testdata/sticky without
// nginx: every file parses in the schema, every answer names a server of its
// case, every request carries what it says it carries, and every Set-Cookie
// is exactly what sticky cookie's rules give for the server that answered
// (the id computed here from the server's address or route) and the answer's
// Date. Replaying the requests through core comes when core has sticky.
func TestStickyRecordings(t *testing.T) {
	fams := loadStickyFamilies(t)
	if len(fams) < 10 {
		t.Fatalf("%d families under testdata/sticky, want the 10 the recorder writes", len(fams))
	}
	names := map[string]string{}
	requests := 0
	for file, fam := range fams {
		for _, c := range fam.Cases {
			if prev, dup := names[c.Name]; dup {
				t.Errorf("%s: case %s is also in %s", file, c.Name, prev)
			}
			names[c.Name] = file
			requests += len(c.Requests)
		}
		for _, err := range checkStickyFamily(fam, strings.TrimSuffix(file, ".json")) {
			t.Errorf("%s: %v", file, err)
		}
	}
	if requests < 300 {
		t.Errorf("%d recorded requests, fewer than the recorder sends", requests)
	}
}

// TestStickyRecordingsCheck shows that the check sees each kind of damage: a
// recording changed in one place must fail it.
func TestStickyRecordingsCheck(t *testing.T) {
	fams := loadStickyFamilies(t)
	find := func(file, name string) (*stickyFamily, *stickyCase) {
		fam := fams[file]
		if fam == nil {
			t.Fatalf("no %s", file)
		}
		clone := cloneFamily(t, fam)
		for i := range clone.Cases {
			if clone.Cases[i].Name == name {
				return clone, &clone.Cases[i]
			}
		}
		t.Fatalf("no case %s in %s", name, file)
		return nil, nil
	}
	mutations := []struct {
		name, file, kase string
		change           func(c *stickyCase)
		want             string
	}{
		{"cookie names another server", "cookie_round_robin.json", "rr_weights_5_3_2", func(c *stickyCase) {
			c.Requests[0].Answer.SetCookie[0] = "srv=" + md5hex(c.Servers[1].Address)
		}, "not the id of"},
		{"answer names a server outside the case", "cookie_hash.json", "hash_plain", func(c *stickyCase) {
			c.Requests[3].Answer.Backend = stickyStaleAddr
		}, "answered by"},
		{"server index out of range", "cookie_ip_hash.json", "iph_plain", func(c *stickyCase) {
			c.Requests[0].Answer.Server = len(c.Servers)
		}, "answered by"},
		{"route changed", "cookie_round_robin.json", "rr_routes", func(c *stickyCase) {
			c.Servers[0].Route = "gamma"
		}, "not the id of"},
		{"attributes reordered", "cookie_attributes.json", "attr_reverse_order", func(c *stickyCase) {
			v := c.Requests[0].Answer.SetCookie[0]
			c.Requests[0].Answer.SetCookie[0] = strings.Replace(v, "; httponly; secure", "; secure; httponly", 1)
		}, "attributes"},
		{"expires a second late", "cookie_attributes.json", "attr_expires_path_httponly", func(c *stickyCase) {
			c.Requests[0].Answer.Date = shiftDate(t, c.Requests[0].Answer.Date, -2*time.Second)
		}, "expires"},
		{"max-age wrong", "cookie_attributes.json", "attr_expires_units", func(c *stickyCase) {
			v := c.Requests[0].Answer.SetCookie[0]
			c.Requests[0].Answer.SetCookie[0] = strings.Replace(v, "max-age=129600", "max-age=129601", 1)
		}, "max-age"},
		{"request does not carry its id", "cookie_least_conn.json", "lc_weights_5_3_2", func(c *stickyCase) {
			for i := range c.Requests {
				if c.Requests[i].Sends.Kind == "server" {
					c.Requests[i].Headers = nil
					return
				}
			}
		}, "does not carry"},
		{"refused case with answers", "config.json", "cfg_route_empty", func(c *stickyCase) {
			c.Requests = []stickyExchange{{Method: "GET", Target: "/" + c.Name, Sends: none(), Answer: stickyReply{Status: 502, Server: -1}}}
		}, "refused"},
		{"sticky cookie missing", "cookie_hash_consistent.json", "chash_plain", func(c *stickyCase) {
			c.Requests[2].Answer.SetCookie = nil
		}, "sticky Set-Cookie"},
	}
	for _, m := range mutations {
		fam, c := find(m.file, m.kase)
		if errs := checkStickyFamily(fam, strings.TrimSuffix(m.file, ".json")); len(errs) != 0 {
			t.Fatalf("%s: unchanged recording fails: %v", m.name, errs)
		}
		m.change(c)
		errs := checkStickyFamily(fam, strings.TrimSuffix(m.file, ".json"))
		found := false
		for _, err := range errs {
			found = found || strings.Contains(err.Error(), m.want)
		}
		if !found {
			t.Errorf("%s: the check did not report %q (it reported %v)", m.name, m.want, errs)
		}
	}
}

func loadStickyFamilies(t *testing.T) map[string]*stickyFamily {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "sticky", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*stickyFamily{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		fam := &stickyFamily{}
		if err := dec.Decode(fam); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		fams[filepath.Base(f)] = fam
	}
	return fams
}

func cloneFamily(t *testing.T, fam *stickyFamily) *stickyFamily {
	data, err := json.Marshal(fam)
	if err != nil {
		t.Fatal(err)
	}
	out := &stickyFamily{}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func shiftDate(t *testing.T, date string, d time.Duration) string {
	tm, err := time.Parse(http1Date, date)
	if err != nil {
		t.Fatal(err)
	}
	return tm.Add(d).Format(http1Date)
}

const (
	http1Date = "Mon, 02 Jan 2006 15:04:05 GMT"
	// cookieDate is nginx's cookie date (ngx_http_cookie_time): two-digit
	// years up to 2037.
	cookieDate = "Mon, 02-Jan-06 15:04:05 GMT"
	// maxExpires is what expires=max writes, whatever the date.
	maxExpires = "; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000"
)

// stickyMethods are the methods the recordings use.
var stickyMethods = map[string]bool{"round_robin": true, "least_conn": true, "ip_hash": true, "hash": true, "hash_consistent": true}

// checkStickyFamily returns every inconsistency of a family read from
// file (its name without .json).
func checkStickyFamily(fam *stickyFamily, file string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if fam.Family != file {
		fail("family %q in a file named %s", fam.Family, file)
	}
	if v, ok := strings.CutPrefix(fam.NginxVersion, "nginx version: nginx/1."); !ok || atoiPrefix(v) < 31 {
		fail("nginx_version %q: the recordings come from nginx >= 1.31", fam.NginxVersion)
	}
	if !strings.Contains(fam.Command, "-record-sticky") {
		fail("command %q is not the recorder's", fam.Command)
	}
	for i := range fam.Cases {
		c := &fam.Cases[i]
		for _, err := range checkStickyCase(c) {
			fail("%s: %v", c.Name, err)
		}
	}
	return errs
}

func atoiPrefix(s string) int {
	n := 0
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			break
		}
		n = n*10 + int(ch-'0')
	}
	return n
}

func checkStickyCase(c *stickyCase) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !stickyMethods[c.Method] {
		fail("method %q", c.Method)
	}
	if !strings.Contains(c.Upstream, "upstream "+c.Name+" {") || !strings.Contains(c.Upstream, c.Sticky+";") {
		fail("the upstream block is not upstream %s with %q", c.Name, c.Sticky)
	}
	if f := strings.Fields(c.Sticky); len(f) < 2 || f[0] != "sticky" || f[1] != c.Mode {
		fail("mode %q for %q", c.Mode, c.Sticky)
	}
	if len(c.Servers) == 0 {
		fail("no servers")
	}
	for _, s := range c.Servers {
		if !strings.Contains(c.Upstream, "server "+s.Address) {
			fail("server %s is not in the upstream block", s.Address)
		}
	}
	if !c.ConfigTest.OK {
		if len(c.Requests) > 0 {
			fail("nginx refused the configuration, yet it has %d answers", len(c.Requests))
		}
		if !anyContains(c.ConfigTest.Messages, "[emerg] ") || !anyContains(c.ConfigTest.Messages, "PREFIX/nginx.conf:") {
			fail("refused without nginx's [emerg] message and line: %q", c.ConfigTest.Messages)
		}
		return errs
	}
	if len(c.Requests) == 0 {
		fail("an accepted configuration with no requests")
	}
	// nginx drops a sticky directive written before the method's ("load
	// balancing method redefined"): no cookie then.
	dropped := anyContains(c.ConfigTest.Messages, "load balancing method redefined")
	for i := range c.Requests {
		for _, err := range checkStickyExchange(c, &c.Requests[i], dropped) {
			fail("request %d (%s): %v", i, c.Requests[i].Target, err)
		}
	}
	return errs
}

func anyContains(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func checkStickyExchange(c *stickyCase, ex *stickyExchange, dropped bool) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if ex.Method != "GET" || !strings.HasPrefix(ex.Target, "/"+c.Name) {
		fail("%s %s is not a request to /%s", ex.Method, ex.Target, c.Name)
	}
	if msg := checkSends(c, ex); msg != "" {
		fail("%s", msg)
	}
	a := ex.Answer
	if _, err := time.Parse(http1Date, a.Date); err != nil {
		fail("date %q: %v", a.Date, err)
	}
	if a.Status == 200 {
		if a.Server < 0 || a.Server >= len(c.Servers) || c.Servers[a.Server].Address != a.Backend {
			fail("answered by %q, recorded as server %d", a.Backend, a.Server)
			return errs
		}
		if !strings.HasSuffix(a.UpstreamAddr, a.Backend) {
			fail("answered by %s, but nginx tried %q", a.Backend, a.UpstreamAddr)
		}
	} else if a.Server != -1 || a.Backend != "" {
		fail("status %d answered by %q (server %d)", a.Status, a.Backend, a.Server)
	}
	// The sticky cookie comes first; the backend's own cookie (sess=) after.
	cookies := a.SetCookie
	var own []string
	// $upstream_addr ends with the last server nginx tried, or is the
	// upstream's name when no server could be tried.
	tried := a.UpstreamAddr[strings.LastIndex(a.UpstreamAddr, ", ")+1:]
	tried = strings.TrimSpace(tried)
	triedServer := false
	for _, s := range c.Servers {
		triedServer = triedServer || s.Address == tried
	}
	if c.Mode == "cookie" && !dropped && triedServer {
		if len(cookies) == 0 || !strings.HasPrefix(cookies[0], c.CookieName+"=") {
			fail("no sticky Set-Cookie %s= first in %q", c.CookieName, cookies)
			return errs
		}
		// The cookie names the last server tried: the one that answered,
		// or the one that failed when nginx answers 502 itself.
		if err := checkStickyCookie(c, cookies[0], tried, a.Date); err != "" {
			fail("%s", err)
		}
		own = cookies[1:]
	} else {
		own = cookies
	}
	wantOwn := []string{}
	if ex.Sends.Creates != "" && a.Status == 200 {
		wantOwn = append(wantOwn, "sess="+ex.Sends.Creates+"; path=/")
	}
	if strings.Join(own, "\n") != strings.Join(wantOwn, "\n") {
		fail("Set-Cookie %q beyond the sticky cookie, want %q", own, wantOwn)
	}
	return errs
}

// checkSends checks that the request carries the value its Sends describes.
func checkSends(c *stickyCase, ex *stickyExchange) string {
	s := ex.Sends
	var value string
	switch s.Kind {
	case "none":
		return ""
	case "server":
		if s.Server == nil || *s.Server < 0 || *s.Server >= len(c.Servers) {
			return fmt.Sprintf("sends server %v, not a server of the case", s.Server)
		}
		value = stickySID(c.Servers[*s.Server])
	case "stale":
		for _, srv := range c.Servers {
			if srv.Address == s.Value {
				return fmt.Sprintf("stale address %s is a server of the case", s.Value)
			}
		}
		value = md5hex(s.Value)
	case "garbage", "session":
		value = s.Value
	case "empty":
		value = ""
	default:
		return fmt.Sprintf("sends kind %q", s.Kind)
	}
	for _, h := range ex.Headers {
		name, hv, _ := strings.Cut(h, ": ")
		for _, part := range strings.Split(hv, ";") {
			if kv := strings.TrimSpace(part); strings.HasSuffix(kv, "="+value) || name != "Cookie" && kv == value {
				return ""
			}
		}
	}
	if strings.Contains(ex.Target+"&", "="+value+"&") {
		return ""
	}
	return fmt.Sprintf("does not carry %s %q", s.Kind, value)
}

// stickyAttrOrder is the order in which nginx writes the cookie's attributes
// (ngx_http_upstream_sticky_cookie_insert), whatever the order configured.
var stickyAttrOrder = []string{"expires", "max-age", "domain", "httponly", "secure", "samesite", "path"}

// checkStickyCookie checks one sticky Set-Cookie header: its value is the id
// of the server at address tried, and its attributes are the configured
// ones, in nginx's order, with expires = Date + the configured time (nginx
// reads its clock when it picks the server, Date when it sends the header: a
// second may pass in between).
func checkStickyCookie(c *stickyCase, cookie, tried, date string) string {
	parts := strings.Split(cookie, "; ")
	name, value, _ := strings.Cut(parts[0], "=")
	if name != c.CookieName {
		return fmt.Sprintf("cookie %q, want %s=", cookie, c.CookieName)
	}
	want := ""
	for _, s := range c.Servers {
		if s.Address == tried {
			want = stickySID(s)
		}
	}
	if value != want {
		return fmt.Sprintf("cookie value %q is not the id of %s (%q)", value, tried, want)
	}
	attrs := map[string]string{}
	last := -1
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		pos := -1
		for i, a := range stickyAttrOrder {
			if a == k {
				pos = i
			}
		}
		if pos <= last {
			return fmt.Sprintf("attributes of %q out of nginx's order %v", cookie, stickyAttrOrder)
		}
		last = pos
		attrs[k] = v
	}
	params := map[string]string{}
	for _, p := range strings.Fields(c.Sticky)[3:] {
		k, v, _ := strings.Cut(p, "=")
		params[k] = v
	}
	for _, flag := range []string{"httponly", "secure"} {
		if _, set := params[flag]; set != hasKey(attrs, flag) {
			return fmt.Sprintf("%s in %q does not follow the directive %q", flag, cookie, c.Sticky)
		}
	}
	if p, ok := params["path"]; ok != hasKey(attrs, "path") || attrs["path"] != p {
		return fmt.Sprintf("path in %q does not follow the directive %q", cookie, c.Sticky)
	}
	for _, k := range []string{"domain", "samesite"} {
		p, ok := params[k]
		if ok && !strings.HasPrefix(p, "$") && attrs[k] != p || !ok && hasKey(attrs, k) {
			return fmt.Sprintf("%s in %q does not follow the directive %q", k, cookie, c.Sticky)
		}
	}
	if c.ExpiresSeconds == nil {
		if hasKey(attrs, "expires") || hasKey(attrs, "max-age") {
			return fmt.Sprintf("%q has expires without expires=", cookie)
		}
		return ""
	}
	if *c.ExpiresSeconds < 0 {
		if !strings.Contains(cookie, maxExpires) {
			return fmt.Sprintf("expires=max, but %q lacks %q", cookie, maxExpires)
		}
		return ""
	}
	if attrs["max-age"] != strconv.FormatInt(*c.ExpiresSeconds, 10) {
		return fmt.Sprintf("max-age in %q, want %d", cookie, *c.ExpiresSeconds)
	}
	exp, err := time.Parse(cookieDate, attrs["expires"])
	if err != nil {
		return fmt.Sprintf("expires in %q: %v", cookie, err)
	}
	sent, _ := time.Parse(http1Date, date)
	at := exp.Add(-time.Duration(*c.ExpiresSeconds) * time.Second)
	if at.After(sent) || at.Before(sent.Add(-time.Second)) {
		return fmt.Sprintf("expires in %q is not Date %s + %ds", cookie, date, *c.ExpiresSeconds)
	}
	return ""
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
