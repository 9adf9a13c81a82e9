package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// reload posts a Caddyfile to the admin API's /load with Cache-Control:
// must-revalidate, which makes Caddy reload it even when it is unchanged.
func reload(t *testing.T, tc *caddytest.Tester, cfg string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+adminAddr+"/load", strings.NewReader(cfg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/caddyfile")
	req.Header.Set("Cache-Control", "must-revalidate")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /load: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /load: status %d", res.StatusCode)
	}
	tc.Client.CloseIdleConnections()
}

// policyIDs returns the ids of /lbpack/state by module name.
func policyIDs(t *testing.T, tc *caddytest.Tester) map[string][]string {
	t.Helper()
	_, body := get(t, tc, "http://"+adminAddr+"/lbpack/state")
	var state struct {
		Policies []struct{ ID, Policy string }
	}
	if err := json.Unmarshal([]byte(body), &state); err != nil {
		t.Fatalf("state %s: %v", body, err)
	}
	out := map[string][]string{}
	for _, p := range state.Policies {
		out[p.Policy] = append(out[p.Policy], p.ID)
	}
	return out
}

// Reloading the same configuration, forced through the admin API, and
// loading one changed elsewhere keep every policy's series: the same labels,
// the count going on.
func TestMetricsContinueAcrossReload(t *testing.T) {
	a, b, c := newBackend(t, "a", 0), newBackend(t, "b", 0), newBackend(t, "c", 0)
	tc := caddytest.NewTester(t)
	port := freePort(t)
	ups := fmt.Sprintf("%s %s %s", a.addr(), b.addr(), c.addr())
	site := fmt.Sprintf(`{
	admin %s
	auto_https off
	persist_config off
	skip_install_trust
}
http://127.0.0.1:%d {
	handle /hash* {
		reverse_proxy %s {
			lb_policy url_hash {
				key {http.request.header.X-User}
				mode maglev
			}
		}
	}
	handle /other {
		reverse_proxy %s {
			lb_policy url_hash
		}
	}
	handle {
		reverse_proxy %s {
			lb_policy smooth_wrr 5 3 2
		}
	}
%%s}
`, adminAddr, port, ups, ups, ups)
	same := fmt.Sprintf(site, "")
	changed := fmt.Sprintf(site, "\thandle /extra {\n\t\trespond \"extra\"\n\t}\n")

	load(tc, same)
	ids := policyIDs(t, tc)
	if len(ids["smooth_wrr"]) != 1 || len(ids["url_hash"]) != 2 || ids["url_hash"][0] == ids["url_hash"][1] {
		t.Fatalf("policies %v: want one smooth_wrr and two url_hash told apart", ids)
	}
	hashID := regexp.MustCompile(`^url_hash-[0-9a-f]{8}$`)
	for _, id := range ids["url_hash"] {
		if !hashID.MatchString(id) {
			t.Errorf("url_hash id %q: want url_hash-<8 hex digits>", id)
		}
	}
	sw := ids["smooth_wrr"][0]
	want := map[string]int{a.addr(): 0, b.addr(): 0, c.addr(): 0}
	for i, next := range []func(){
		func() {},
		func() { reload(t, tc, same) },
		func() { load(tc, changed) },
	} {
		next()
		if got := policyIDs(t, tc); fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Fatalf("load %d: policies %v, want %v as before", i+1, got, ids)
		}
		// 10 requests: one period of 5:3:2 (or the start of a fresh one).
		for _, name := range strings.Fields(sequence(t, tc, port, 10)) {
			want[map[string]string{"a": a.addr(), "b": b.addr(), "c": c.addr()}[name]]++
		}
		_, metrics := get(t, tc, "http://"+adminAddr+"/metrics")
		for addr, n := range want {
			line := fmt.Sprintf(`caddy_lbpack_picks_total{policy="%s",upstream="%s"} %d`, sw, addr, n)
			if !strings.Contains(metrics, line+"\n") {
				t.Errorf("load %d: metrics lack %q:\n%s", i+1, line, grepLines(metrics, "caddy_lbpack_picks_total"))
			}
		}
		info := fmt.Sprintf(`caddy_lbpack_policy_info{key="{http.request.header.X-User}",mode="maglev",module="url_hash",policy="%s"} 1`, ids["url_hash"][0])
		other := fmt.Sprintf(`caddy_lbpack_policy_info{key="{http.request.header.X-User}",mode="maglev",module="url_hash",policy="%s"} 1`, ids["url_hash"][1])
		if !strings.Contains(metrics, info) && !strings.Contains(metrics, other) {
			t.Errorf("load %d: no info series for the maglev url_hash:\n%s", i+1, grepLines(metrics, "caddy_lbpack_policy_info"))
		}
	}
	if want[a.addr()] != 15 || want[b.addr()] != 9 || want[c.addr()] != 6 {
		t.Errorf("30 requests over 5:3:2 gave %v", want)
	}
}

// grepLines returns the lines of s that start with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
