package traefikplugin

import (
	"strings"

	"github.com/lbpack/lbpack/core"
)

// warnReach logs, at New, when the first try of ip_hash's or url_hash
// modulo's weight walk never reaches some servers (core.Unreachable):
// nginx's behaviour, kept, but worth a word, as the weights say otherwise.
func warnReach(name string, s *settings) {
	c := s.balancer
	far, span := core.Unreachable(c.Strategy, c.HashMode, c.Backends)
	if len(far) == 0 {
		return
	}
	urls := make([]string, len(far))
	for i, k := range far {
		urls[i] = s.targets[k].Redacted()
	}
	total := 0
	for _, b := range c.Backends {
		total += b.Weight
	}
	events.Printf("lbpack middleware %q: the weights add up to %d, more than the hash reaches (%d, as in nginx): %s get a key only when an earlier choice is unavailable; weights that sum to at most %d reach every server",
		name, total, span, strings.Join(urls, ", "), span)
}
