package nginxconf

import (
	"strings"
	"testing"
)

// TestWarnReach: an upstream whose weights exceed what ip_hash's or plain
// hash's first try reaches is warned of at the method's line, naming the
// servers never reached; consistent hashing and small weights are not.
func TestWarnReach(t *testing.T) {
	cases := []struct{ method, weights, want string }{
		{"ip_hash", "5000 3000 2000", "nginx.conf:3: ip_hash: the weights add up to 10000, more than the hash reaches (6271): 10.0.0.3:80 (nginx.conf:6) never get a key on a first try, in nginx as in lbpack; weights that sum to at most 6271 reach every server\n"},
		{"hash $uri", "50000 30000 20000", "nginx.conf:3: hash: the weights add up to 100000, more than the hash reaches (32768): 10.0.0.2:80 (nginx.conf:5), 10.0.0.3:80 (nginx.conf:6) never get a key on a first try, in nginx as in lbpack; weights that sum to at most 32768 reach every server\n"},
		{"hash $uri consistent", "5000 3000 2000", ""},
		{"ip_hash", "5 3 2", ""},
		{"least_conn", "50000 30000 20000", ""},
	}
	for _, c := range cases {
		w := strings.Fields(c.weights)
		cfg, err := load(t, site("upstream u {\n "+c.method+";\n server 10.0.0.1:80 weight="+w[0]+";\n server 10.0.0.2:80 weight="+w[1]+";\n server 10.0.0.3:80 weight="+w[2]+";\n}"))
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, x := range cfg.Warnings {
			if x.Directive == "ip_hash" || x.Directive == "hash" {
				got += x.String() + "\n"
			}
		}
		if got != c.want {
			t.Errorf("%s %s: warnings %q, want %q", c.method, c.weights, got, c.want)
		}
	}
}

// TestCheckUpstream: an upstream lbpack's balancer refuses, which both
// hosts would refuse at start, is refused with core's reason, the server
// named as nginx.conf writes it.
func TestCheckUpstream(t *testing.T) {
	_, err := load(t, site("upstream u {\n hash $uri consistent;\n server 10.0.0.1:80 weight=50000;\n server 10.0.0.2:80 weight=30000;\n}"))
	want := "nginx.conf:2: upstream u: lbpack cannot balance it: server 10.0.0.2:80 (nginx.conf:5) weight 30000: ketama gives each unit of weight 160 points; the total weight may not exceed 65536"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
