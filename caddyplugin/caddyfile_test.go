package caddyplugin

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// site wraps a reverse_proxy body in a Caddyfile.
func site(proxy string) string {
	return "{\n\tadmin off\n\tauto_https off\n}\nhttp://localhost:8080 {\n\treverse_proxy " + proxy + "\n}\n"
}

// adapt runs the Caddyfile adapter and returns the JSON config.
func adapt(t *testing.T, caddyfile string) ([]byte, error) {
	t.Helper()
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	return out, err
}

// selectionPolicy finds the selection_policy object in an adapted config.
func selectionPolicy(t *testing.T, cfg []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(cfg, &v); err != nil {
		t.Fatal(err)
	}
	var found any
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "selection_policy" {
					found = e
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	b, err := json.Marshal(found) // map keys come out sorted
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// validate provisions the adapted config without starting it.
func validate(cfgJSON []byte) error {
	var cfg caddy.Config
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		return err
	}
	return caddy.Validate(&cfg)
}

func TestCaddyfileAdapt(t *testing.T) {
	tests := []struct {
		name, proxy, want string
	}{
		{"smooth_wrr positional",
			"10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 {\n\t\tlb_policy smooth_wrr 5 3 2\n\t}",
			`{"policy":"smooth_wrr","weights":[5,3,2]}`},
		{"smooth_wrr block",
			"10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 10.0.0.4:80 {\n\t\tlb_policy smooth_wrr {\n\t\t\tweight 10.0.0.1:80 5\n\t\t\tslow_start 10.0.0.1:80 30s\n\t\t\tbackup 10.0.0.3:80\n\t\t\tdown 10.0.0.4:80\n\t\t\tstagger\n\t\t}\n\t}",
			`{"policy":"smooth_wrr","stagger":true,"upstreams":{"10.0.0.1:80":{"slow_start":30000000000,"weight":5},"10.0.0.3:80":{"backup":true},"10.0.0.4:80":{"down":true}}}`},
		{"gcd_wrr",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy gcd_wrr 4 2 {\n\t\t\tstagger\n\t\t}\n\t}",
			`{"policy":"gcd_wrr","stagger":true,"weights":[4,2]}`},
		{"url_hash header key maglev",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy url_hash {\n\t\t\tkey {http.request.header.X-User}\n\t\t\tmode maglev\n\t\t}\n\t}",
			`{"key":"{http.request.header.X-User}","mode":"maglev","policy":"url_hash"}`},
		{"url_hash bounded",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy url_hash 2 1 {\n\t\t\tkey {http.request.cookie.sid}\n\t\t\tmode bounded\n\t\t\tload_factor 1.5\n\t\t}\n\t}",
			`{"key":"{http.request.cookie.sid}","load_factor":1.5,"mode":"bounded","policy":"url_hash","weights":[2,1]}`},
		{"url_hash client_ip ketama down",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy url_hash {\n\t\t\tkey {client_ip}\n\t\t\tmode ketama\n\t\t\tdown 10.0.0.2:80\n\t\t}\n\t}",
			`{"key":"{http.vars.client_ip}","mode":"ketama","policy":"url_hash","upstreams":{"10.0.0.2:80":{"down":true}}}`},
		{"url_hash modulo",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy url_hash {\n\t\t\tmode modulo\n\t\t}\n\t}",
			`{"mode":"modulo","policy":"url_hash"}`},
		{"fair",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy fair\n\t}",
			`{"policy":"fair"}`},
		{"fair options",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy fair 3 1 {\n\t\t\tdecay_time 5s\n\t\t}\n\t}",
			`{"decay_time":5000000000,"policy":"fair","weights":[3,1]}`},
		{"weighted_least_conn",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy weighted_least_conn {\n\t\t\tweight 10.0.0.2:80 3\n\t\t\ttwo_choices\n\t\t}\n\t}",
			`{"policy":"weighted_least_conn","two_choices":true,"upstreams":{"10.0.0.2:80":{"weight":3}}}`},
		{"failure and capacity options",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy smooth_wrr {\n\t\t\tmax_fails 2\n\t\t\tfail_timeout 30s\n\t\t\tmax_conns 100\n\t\t\tmax_fails 10.0.0.1:80 3\n\t\t\tfail_timeout 10.0.0.1:80 5s\n\t\t\tmax_conns 10.0.0.2:80 1\n\t\t}\n\t}",
			`{"fail_timeout":30000000000,"max_conns":100,"max_fails":2,"policy":"smooth_wrr","upstreams":{"10.0.0.1:80":{"fail_timeout":5000000000,"max_fails":3},"10.0.0.2:80":{"max_conns":1}}}`},
		{"fail_status",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy fair {\n\t\t\tfail_status 502 503 4xx\n\t\t}\n\t}",
			`{"fail_status":[502,503,4],"policy":"fair"}`},
		{"fail_status with max_fails",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy weighted_least_conn {\n\t\t\tmax_fails 10.0.0.1:80 3\n\t\t\tfail_status 5xx 429\n\t\t}\n\t}",
			`{"fail_status":[5,429],"policy":"weighted_least_conn","upstreams":{"10.0.0.1:80":{"max_fails":3}}}`},
		{"url_hash fallback",
			"10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy url_hash {\n\t\t\tkey {http.request.header.X-User}\n\t\t\tfallback smooth_wrr {\n\t\t\t\tstagger\n\t\t\t}\n\t\t}\n\t}",
			`{"fallback":{"policy":"smooth_wrr","stagger":true},"key":"{http.request.header.X-User}","policy":"url_hash"}`},
		{"nginx_ip_hash",
			"10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 {\n\t\tlb_policy nginx_ip_hash 2 1 1\n\t}",
			`{"policy":"nginx_ip_hash","weights":[2,1,1]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := adapt(t, site(tt.proxy))
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			if got := selectionPolicy(t, cfg); got != tt.want {
				t.Errorf("selection_policy\n got %s\nwant %s", got, tt.want)
			}
			if err := validate(cfg); err != nil {
				t.Errorf("validate: %v", err)
			}
		})
	}
}

func TestCaddyfileAdaptErrors(t *testing.T) {
	const three = "10.0.0.1:80 10.0.0.2:80 10.0.0.3:80"
	tests := []struct {
		name, proxy, want string
	}{
		{"unknown option", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tbogus 1\n\t\t}\n\t}", `lb_policy smooth_wrr: unknown option "bogus"`},
		{"option of another policy", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tmode maglev\n\t\t}\n\t}", `lb_policy smooth_wrr: unknown option "mode"`},
		{"unknown mode", three + " {\n\t\tlb_policy url_hash {\n\t\t\tmode zigzag\n\t\t}\n\t}", `lb_policy url_hash: mode "zigzag": unknown`},
		{"negative weight", three + " {\n\t\tlb_policy smooth_wrr 5 -3 2\n\t}", `lb_policy smooth_wrr: weight "-3": must be from 1 to 1000000`},
		{"zero weight", three + " {\n\t\tlb_policy gcd_wrr 5 0 2\n\t}", `lb_policy gcd_wrr: weight "0": must be from 1 to 1000000`},
		{"non-numeric weight", three + " {\n\t\tlb_policy smooth_wrr 5 x 2\n\t}", `weight "x": not an integer`},
		{"negative address weight", three + " {\n\t\tlb_policy fair {\n\t\t\tweight 10.0.0.1:80 -1\n\t\t}\n\t}", `lb_policy fair: weight 10.0.0.1:80 "-1": must be from 1 to 1000000`},
		{"non-numeric address weight", three + " {\n\t\tlb_policy fair {\n\t\t\tweight 10.0.0.1:80 heavy\n\t\t}\n\t}", `weight 10.0.0.1:80 "heavy": not an integer`},
		{"weight twice", three + " {\n\t\tlb_policy fair {\n\t\t\tweight 10.0.0.1:80 2\n\t\t\tweight 10.0.0.1:80 3\n\t\t}\n\t}", `weight 10.0.0.1:80: given twice`},
		{"weight without address", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tweight\n\t\t}\n\t}", `weight: missing the upstream address`},
		{"weight bad address", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tweight backend-a 3\n\t\t}\n\t}", `weight "backend-a": want host:port`},
		{"backup bad address", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tbackup 10.0.0.1\n\t\t}\n\t}", `backup "10.0.0.1": want host:port`},
		{"down without address", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tdown\n\t\t}\n\t}", `lb_policy smooth_wrr: down: missing the upstream address`},
		{"slow_start bad duration", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tslow_start 10.0.0.1:80 soon\n\t\t}\n\t}", `slow_start 10.0.0.1:80 "soon": want a positive duration`},
		{"stagger argument", three + " {\n\t\tlb_policy gcd_wrr {\n\t\t\tstagger yes\n\t\t}\n\t}", `lb_policy gcd_wrr: stagger: unexpected argument "yes"`},
		{"load_factor too small", three + " {\n\t\tlb_policy url_hash {\n\t\t\tmode bounded\n\t\t\tload_factor 0.5\n\t\t}\n\t}", `lb_policy url_hash: load_factor "0.5": want a number above 1`},
		{"decay_time bad", three + " {\n\t\tlb_policy fair {\n\t\t\tdecay_time -5s\n\t\t}\n\t}", `lb_policy fair: decay_time "-5s": want a positive duration`},
		{"two_choices argument", three + " {\n\t\tlb_policy weighted_least_conn {\n\t\t\ttwo_choices 2\n\t\t}\n\t}", `lb_policy weighted_least_conn: two_choices: unexpected argument "2"`},
		{"weight too large", three + " {\n\t\tlb_policy smooth_wrr 5 2000000 2\n\t}", `lb_policy smooth_wrr: weight "2000000": must be from 1 to 1000000`},
		{"mode twice", three + " {\n\t\tlb_policy url_hash {\n\t\t\tmode maglev\n\t\t\tmode ketama\n\t\t}\n\t}", `lb_policy url_hash: mode: given twice`},
		{"key twice", three + " {\n\t\tlb_policy url_hash {\n\t\t\tkey {uri}\n\t\t\tkey {path}\n\t\t}\n\t}", `lb_policy url_hash: key: given twice`},
		{"empty key", three + " {\n\t\tlb_policy url_hash {\n\t\t\tkey \"\"\n\t\t}\n\t}", `lb_policy url_hash: key "": empty`},
		{"slow_start twice", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tslow_start 10.0.0.1:80 10s\n\t\t\tslow_start 10.0.0.1:80 20s\n\t\t}\n\t}", `lb_policy smooth_wrr: slow_start 10.0.0.1:80: given twice`},
		{"decay_time twice", three + " {\n\t\tlb_policy fair {\n\t\t\tdecay_time 5s\n\t\t\tdecay_time 9s\n\t\t}\n\t}", `lb_policy fair: decay_time: given twice`},
		{"stagger twice", three + " {\n\t\tlb_policy gcd_wrr {\n\t\t\tstagger\n\t\t\tstagger\n\t\t}\n\t}", `lb_policy gcd_wrr: stagger: given twice`},
		{"backup twice", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tbackup 10.0.0.3:80\n\t\t\tbackup 10.0.0.3:80\n\t\t}\n\t}", `lb_policy smooth_wrr: backup 10.0.0.3:80: given twice`},
		{"max_fails twice", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tmax_fails 2\n\t\t\tmax_fails 3\n\t\t}\n\t}", `lb_policy smooth_wrr: max_fails: given twice`},
		{"max_fails bad", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tmax_fails 10.0.0.1:80 x\n\t\t}\n\t}", `lb_policy smooth_wrr: max_fails 10.0.0.1:80 "x": want a whole number of at least 1`},
		{"max_conns zero", three + " {\n\t\tlb_policy weighted_least_conn {\n\t\t\tmax_conns 0\n\t\t}\n\t}", `lb_policy weighted_least_conn: max_conns "0": want a whole number of at least 1`},
		{"fail_timeout zero", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tfail_timeout 10.0.0.1:80 0\n\t\t}\n\t}", `lb_policy smooth_wrr: fail_timeout 10.0.0.1:80 "0": want a positive duration`},
		{"max_fails extra argument", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tmax_fails 10.0.0.1:80 2 3\n\t\t}\n\t}", `lb_policy smooth_wrr: max_fails: unexpected argument "3"`},
		{"slow_start without value", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tslow_start 10.0.0.1:80\n\t\t}\n\t}", `lb_policy smooth_wrr: slow_start 10.0.0.1:80: missing the value`},
		{"fail_status twice", three + " {\n\t\tlb_policy fair {\n\t\t\tfail_status 502\n\t\t\tfail_status 503\n\t\t}\n\t}", `lb_policy fair: fail_status: given twice`},
		{"fail_status empty", three + " {\n\t\tlb_policy fair {\n\t\t\tfail_status\n\t\t}\n\t}", `lb_policy fair: fail_status: missing the statuses`},
		{"fail_status bad code", three + " {\n\t\tlb_policy fair {\n\t\t\tfail_status 5xx 600\n\t\t}\n\t}", `lb_policy fair: fail_status "600": want a status from 100 to 599, a class from 1xx to 5xx, or a range such as 500-504`},
		{"fail_status bad class", three + " {\n\t\tlb_policy fair {\n\t\t\tfail_status 6xx\n\t\t}\n\t}", `lb_policy fair: fail_status "6xx": want a status`},
		{"fail_status word", three + " {\n\t\tlb_policy fair {\n\t\t\tfail_status http_500\n\t\t}\n\t}", `lb_policy fair: fail_status "http_500": want a status`},
		{"fallback without policy", three + " {\n\t\tlb_policy url_hash {\n\t\t\tfallback\n\t\t}\n\t}", `lb_policy url_hash: fallback: missing the policy name`},
		{"control character", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tdown \"10.0.0.1\n:80\"\n\t\t}\n\t}", `control character`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, site(tt.proxy))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v\nwant one containing %s", err, tt.want)
			}
		})
	}
}

// Errors that need the reverse proxy's upstreams: the Caddyfile adapts, and
// loading (provisioning) the config fails with an error naming the token.
func TestCaddyfileProvisionErrors(t *testing.T) {
	const three = "10.0.0.1:80 10.0.0.2:80 10.0.0.3:80"
	tests := []struct {
		name, proxy, want string
	}{
		{"positional count", three + " {\n\t\tlb_policy smooth_wrr 5 3\n\t}", "weights: 2 positional weights for 3 upstreams"},
		{"address not an upstream", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tweight 10.0.0.9:80 4\n\t\t}\n\t}", `lb_policy smooth_wrr: weight 10.0.0.9:80: not one of the reverse proxy's upstreams`},
		{"down address not an upstream", three + " {\n\t\tlb_policy nginx_ip_hash {\n\t\t\tdown 10.0.0.9:80\n\t\t}\n\t}", `lb_policy nginx_ip_hash: down 10.0.0.9:80: not one of the reverse proxy's upstreams`},
		{"both weight forms", three + " {\n\t\tlb_policy smooth_wrr 5 3 2 {\n\t\t\tweight 10.0.0.1:80 4\n\t\t}\n\t}", `lb_policy smooth_wrr: weight 10.0.0.1:80: give weights by position or by address, not both`},
		{"backup with a hash policy", three + " {\n\t\tlb_policy url_hash {\n\t\t\tbackup 10.0.0.3:80\n\t\t}\n\t}", `backup`},
		{"positional weights with dynamic upstreams", "{\n\t\tdynamic a {\n\t\t\tname backend.invalid\n\t\t\tport 80\n\t\t}\n\t\tlb_policy smooth_wrr 5 3\n\t}", "positional weights need static upstreams"},
		{"unix socket upstream", "unix//run/app.sock {\n\t\tlb_policy smooth_wrr\n\t}", "want host:port"},
		{"placeholder upstream", "{http.request.header.X-H1}:20101 10.0.0.1:80 {\n\t\tlb_policy url_hash\n\t}", `upstream "{http.request.header.X-H1}:20101": a placeholder in the dial address`},
		{"placeholder host", "10.0.0.1:80 {host}:80 {\n\t\tlb_policy smooth_wrr\n\t}", `upstream "{http.request.host}:80": a placeholder`},
		{"backup and down", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tbackup 10.0.0.3:80\n\t\t\tdown 10.0.0.3:80\n\t\t}\n\t}", `lb_policy smooth_wrr: backup and down 10.0.0.3:80: an upstream is a backup or down, not both`},
		{"slow_start with url_hash", three + " {\n\t\tlb_policy url_hash {\n\t\t\tslow_start 10.0.0.1:80 10s\n\t\t}\n\t}", `lb_policy url_hash: slow_start 10.0.0.1:80: a hash policy maps keys by weight`},
		{"slow_start with nginx_ip_hash", three + " {\n\t\tlb_policy nginx_ip_hash {\n\t\t\tslow_start 10.0.0.1:80 10s\n\t\t}\n\t}", `lb_policy nginx_ip_hash: slow_start 10.0.0.1:80: a hash policy`},
		{"backup with nginx_ip_hash", three + " {\n\t\tlb_policy nginx_ip_hash {\n\t\t\tbackup 10.0.0.3:80\n\t\t}\n\t}", `lb_policy nginx_ip_hash: backup 10.0.0.3:80: lb_policy nginx_ip_hash does not accept backup backends`},
		{"ketama total weight", "10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy url_hash 40000 40000\n\t}", `lb_policy url_hash: weight 10.0.0.2:80 40000: ketama`},
		{"every upstream a backup", "10.0.0.1:80 10.0.0.2:80 {\n\t\tlb_policy fair {\n\t\t\tbackup 10.0.0.1:80 10.0.0.2:80\n\t\t}\n\t}", `lb_policy fair: upstreams: every upstream is a backup`},
		{"fail_timeout without max_fails", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tfail_timeout 10.0.0.1:80 5s\n\t\t}\n\t}", `lb_policy smooth_wrr: fail_timeout 10.0.0.1:80 5s: has no effect without max_fails`},
		{"fail_status without max_fails", three + " {\n\t\tlb_policy smooth_wrr {\n\t\t\tfail_status 5xx\n\t\t}\n\t}", `lb_policy smooth_wrr: fail_status 5xx: has no effect without max_fails`},
		{"fail_status repeated code", three + " {\n\t\tlb_policy fair {\n\t\t\tfail_status 502 502\n\t\t}\n\t}", `lb_policy fair: fail_status 502: given twice`},
		{"fail_status code in a class", three + " {\n\t\tlb_policy fair {\n\t\t\tfail_status 5xx 503\n\t\t}\n\t}", `lb_policy fair: fail_status 5xx and 503: one includes the other`},
		{"max_conns not an upstream", three + " {\n\t\tlb_policy weighted_least_conn {\n\t\t\tmax_conns 10.0.0.9:80 4\n\t\t}\n\t}", `lb_policy weighted_least_conn: max_conns 10.0.0.9:80: not one of the reverse proxy's upstreams`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := adapt(t, site(tt.proxy))
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			err = validate(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v\nwant one containing %s", err, tt.want)
			}
		})
	}
}

// The demo Caddyfile adapts and provisions: every route's policy is valid.
func TestCaddyfileExample(t *testing.T) {
	src, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := adapt(t, string(src))
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	for _, p := range []string{"smooth_wrr", "gcd_wrr", "url_hash", "fair", "weighted_least_conn", "nginx_ip_hash"} {
		if !strings.Contains(string(cfg), `"policy":"`+p+`"`) {
			t.Errorf("the demo has no %s route", p)
		}
	}
	if err := validate(cfg); err != nil {
		t.Errorf("validate: %v", err)
	}
}
