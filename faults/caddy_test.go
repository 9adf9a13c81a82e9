package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/lbpack/lbpack/internal/faultsuite"

	_ "github.com/lbpack/lbpack/caddyplugin"
)

// basePort is the first of the suite's ports (see the package comment).
func basePort(t *testing.T) int { return faultsuite.BasePort(t, "LBPACK_FAULT_PORT", 33100) }

// The health settings every policy runs with: lb_retries alone, Caddy's
// passive health checks, its active ones.
var caddyHealth = []struct {
	name, directives string
	targets          faultsuite.Targets
}{
	{"lb_retries 2", "lb_retries 2", faultsuite.Targets{BackAgain: true}},
	{"lb_retries 2, passive (fail_duration 1s)", "lb_retries 2\n\t\tfail_duration 1s\n\t\tmax_fails 1", faultsuite.Targets{BackAgain: true}},
	{"lb_retries 2, active (health_interval 200ms)", "lb_retries 2\n\t\thealth_uri /health\n\t\thealth_interval 200ms\n\t\thealth_timeout 500ms", faultsuite.Targets{BackAgain: true, OutSoon: true}},
}

var caddyPolicies = []string{"smooth_wrr", "gcd_wrr", "weighted_least_conn", "nginx_ip_hash", "url_hash", "fair"}

func TestCaddyFaults(t *testing.T) {
	base := basePort(t)
	var rows []faultsuite.Row
	for _, policy := range caddyPolicies {
		for _, h := range caddyHealth {
			c := faultsuite.Case{Host: "Caddy", Name: "`" + policy + "`, " + h.name, Targets: h.targets,
				Header: faultsuite.SpreadClients, InProcess: true}
			t.Run(policy+"/"+h.name, func(t *testing.T) {
				rows = append(rows, faultsuite.RunCase(t, base, c, caddyProxy(t, policy, h.directives)))
			})
		}
	}
	// Slow start: the restarted upstream, back healthy, ramps up over 2 s.
	for _, policy := range []string{"smooth_wrr", "weighted_least_conn", "fair"} {
		h := caddyHealth[2]
		c := faultsuite.Case{Host: "Caddy", Name: "`" + policy + "`, " + h.name + ", slow_start 2s", Targets: h.targets,
			Header: faultsuite.SpreadClients, InProcess: true, End: faultsuite.RestartAt + 3*time.Second}
		c.Targets.Ramp = true
		if policy == "fair" {
			// Under fair a ramp lowers the upstream's weight in its score
			// and so caps what it takes; it does not schedule a share.
			// The restarted upstream still carries the failure penalty of
			// its down time, so fair probes it (one request per quarter of
			// decay_time) rather than ramping it in 2 s: what is asserted
			// is that it gets traffic again (BackAgain), and its shares
			// are in the table.
			c.Targets.Ramp = false
		}
		t.Run(policy+"/"+h.name+", slow_start", func(t *testing.T) {
			rows = append(rows, faultsuite.RunCase(t, base, c, caddyProxy(t, policy+" {\n\t\t\tslow_start {dead} 2s\n\t\t}", h.directives)))
		})
	}
	// lb_try_duration: Caddy waits lb_try_interval (250 ms by default)
	// before each retry, and with every upstream down keeps trying for the
	// whole duration: the answers come after it, not at once.
	for _, policy := range []string{"smooth_wrr", "url_hash"} {
		c := faultsuite.Case{Host: "Caddy", Name: "`" + policy + "`, lb_try_duration 1s", Header: faultsuite.SpreadClients, InProcess: true,
			Targets: faultsuite.Targets{BackAgain: true, DownWithin: 2500 * time.Millisecond}}
		t.Run(policy+"/lb_try_duration", func(t *testing.T) {
			rows = append(rows, faultsuite.RunCase(t, base, c, caddyProxy(t, policy, "lb_try_duration 1s")))
		})
	}
	faultsuite.WriteDocs(t, rows, len(caddyPolicies)*len(caddyHealth)+5)
}

// caddyProxy runs Caddy in this process: the site on the first port, the
// admin endpoint (for the policies' pick counts) on the second.
func caddyProxy(t *testing.T, policy, directives string) faultsuite.Proxy {
	return func(backends []string, dead int, ports []int) (faultsuite.Running, error) {
		policy := strings.ReplaceAll(policy, "{dead}", backends[dead])
		admin := fmt.Sprintf("127.0.0.1:%d", ports[1])
		cf := fmt.Sprintf(`{
	admin %s
	auto_https off
	persist_config off
	skip_install_trust
	log {
		output discard
	}
	servers {
		trusted_proxies static 127.0.0.1/32
		client_ip_headers X-Forwarded-For
	}
}
http://127.0.0.1:%d {
	reverse_proxy %s {
		lb_policy %s
		%s
	}
}
`, admin, ports[0], strings.Join(backends, " "), policy, directives)
		cfg, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
		if err != nil {
			return faultsuite.Running{}, fmt.Errorf("adapting the Caddyfile: %v\n%s", err, cf)
		}
		for _, w := range warnings {
			t.Logf("Caddyfile: %s", w)
		}
		if err := faultsuite.Retry(func() error { return caddy.Load(cfg, true) }); err != nil {
			return faultsuite.Running{}, fmt.Errorf("loading the config: %v\n%s", err, cf)
		}
		client := &http.Client{Timeout: 2 * time.Second}
		tries := func() int64 { return picks(client, admin, backends[dead]) }
		stop := func() {
			client.CloseIdleConnections()
			// Stop ends the apps but not the admin endpoint; a config with
			// the endpoint off ends it too.
			if err := caddy.Load([]byte(`{"admin":{"disabled":true}}`), true); err != nil {
				t.Errorf("stopping Caddy's admin endpoint: %v", err)
			}
			if err := caddy.Stop(); err != nil {
				t.Errorf("stopping Caddy: %v", err)
			}
		}
		return faultsuite.Running{URL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), Tries: tries, Stop: stop}, nil
	}
}

// picks reads the policies' picks of addr from GET /lbpack/state: every
// try of a request is one Select, so one pick. -1 when the endpoint fails.
func picks(c *http.Client, admin, addr string) int64 {
	resp, err := c.Get("http://" + admin + "/lbpack/state")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var st struct {
		Policies []struct {
			Upstreams []struct {
				Address string `json:"address"`
				Picks   int64  `json:"picks"`
			} `json:"upstreams"`
		} `json:"policies"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return -1
	}
	var n int64
	for _, p := range st.Policies {
		for _, u := range p.Upstreams {
			if u.Address == addr {
				n += u.Picks
			}
		}
	}
	return n
}
