package caddyplugin

import (
	"github.com/lbpack/lbpack/core"
	"go.uber.org/zap"
)

// warnReach warns when the first try of nginx_ip_hash's or url_hash
// modulo's weight walk never reaches some upstreams (core.Unreachable):
// nginx's behaviour, kept, but worth a word, as the weights say otherwise.
func (p *policy) warnReach(backends []core.Backend) {
	far, span := core.Unreachable(p.cfg.Strategy, p.cfg.HashMode, backends)
	if len(far) == 0 {
		return
	}
	addrs := make([]string, len(far))
	for i, k := range far {
		addrs[i] = backends[k].Address
	}
	total := 0
	for _, b := range backends {
		total += b.Weight
	}
	p.logger.Warn("the weights add up to more than the hash reaches (as in nginx): these upstreams get a key only when an earlier choice is unavailable; weights that sum to at most hash_range reach every upstream",
		zap.String("policy", p.id), zap.Strings("unreachable", addrs), zap.Int("total_weight", total), zap.Int("hash_range", span))
}
