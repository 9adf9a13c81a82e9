package sim

import (
	"time"

	"github.com/lbpack/lbpack/core"
)

// nginxLeastConn is nginx's least_conn (ngx_http_upstream_least_conn_module.c,
// ngx_http_upstream_get_least_conn_peer): the fewest connections per weight,
// ties by smooth weighted round robin. lbpack's least_conn is that function,
// pick for pick (the conformance suite checks it against nginx), so the model
// runs core's least_conn. What differs is what nginx counts as a failure: a
// 500 is not one unless proxy_next_upstream lists http_500, and by default it
// does not, so error answers reach the model as successes.
type nginxLeastConn struct{ *lbpack }

// NginxLeastConn is the model of nginx's least_conn with its defaults.
func NginxLeastConn() Contender {
	return Contender{Name: "nginx least_conn", Kind: KindPeer,
		Note: "nginx src/http/modules/ngx_http_upstream_least_conn_module.c: ngx_http_upstream_get_least_conn_peer (run as core's least_conn, which matches it)",
		New: func(env Env) (Policy, error) {
			cfg := coreConfig(env, core.LeastConn)
			cfg.TwoChoices = false
			b, err := core.New(cfg)
			if err != nil {
				return nil, err
			}
			return nginxLeastConn{newLbpack(b)}, nil
		}}
}

func (n nginxLeastConn) Done(i int, latency time.Duration, _ bool) { n.lbpack.Done(i, latency, false) }
