package nginxconf

import (
	"fmt"
	"strings"

	"github.com/lbpack/lbpack/core"
)

// warnReach warns when the first try of ip_hash's or plain hash's weight
// walk never reaches some of the upstream's servers (core.Unreachable):
// nginx does the same, and lbpack keeps it, but the weights say otherwise.
func (l *loader) warnReach(u *Upstream) {
	strategy, mode := core.IPHash, ""
	switch {
	case u.Method == Hash && !u.Consistent:
		strategy, mode = core.URLHash, core.HashModulo
	case u.Method != IPHash:
		return
	}
	backends := make([]core.Backend, len(u.Servers))
	total := 0
	for i, s := range u.Servers {
		backends[i] = core.Backend{Address: s.Addr, Weight: s.Weight}
		total += s.Weight
	}
	far, span := core.Unreachable(strategy, mode, backends)
	if len(far) == 0 {
		return
	}
	names := make([]string, len(far))
	for i, k := range far {
		names[i] = fmt.Sprintf("%s (%s)", u.Servers[k].Addr, u.Servers[k].Pos)
	}
	l.c.Warnings = append(l.c.Warnings, Warning{Pos: u.MethodPos, Directive: u.Method,
		Msg: fmt.Sprintf("the weights add up to %d, more than the hash reaches (%d): %s never get a key on a first try, in nginx as in lbpack; weights that sum to at most %d reach every server",
			total, span, strings.Join(names, ", "), span)})
}
