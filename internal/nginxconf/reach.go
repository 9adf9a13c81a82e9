package nginxconf

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/lbpack/lbpack/core"
)

// coreConfig is the lbpack balancer an upstream becomes in both hosts: its
// strategy and servers.
func coreConfig(u *Upstream) core.Config {
	cfg := core.Config{Strategy: traefikStrategies[u.Method]}
	switch {
	case u.Method == Hash && u.Consistent:
		cfg.HashMode = core.HashKetama
	case u.Method == Hash:
		cfg.HashMode = core.HashModulo
	case u.Method == Random && u.TwoLeastTime:
		cfg.Strategy = core.Fair
	case u.Method == Random && u.Two:
		cfg.Strategy, cfg.TwoChoices = core.LeastConn, true
	}
	for _, s := range u.Servers {
		cfg.Backends = append(cfg.Backends, core.Backend{Address: s.Addr, Weight: s.Weight, Down: s.Down, Backup: s.Backup,
			MaxConns: s.MaxConns, MaxFails: s.MaxFails, FailTimeout: s.FailTimeout, SlowStart: s.SlowStart,
			Route: s.Route, Drain: s.Drain})
	}
	return cfg
}

// backendField is how core names a backend in its errors.
var backendField = regexp.MustCompile(`backends\[(\d+)\]\.?`)

// checkUpstream refuses an upstream that lbpack's balancer refuses (a ring
// too large for ketama, say), which both hosts would refuse at start, with
// core's reason in nginx's terms; then it warns of servers the hash never
// reaches (warnReach).
func (l *loader) checkUpstream(u *Upstream) error {
	cfg := coreConfig(u)
	if _, err := core.New(cfg); err != nil {
		msg := strings.TrimPrefix(err.Error(), "lbpack: ")
		msg = backendField.ReplaceAllStringFunc(msg, func(f string) string {
			i, _ := strconv.Atoi(backendField.FindStringSubmatch(f)[1])
			if i >= len(u.Servers) {
				return f
			}
			return fmt.Sprintf("server %s (%s) ", u.Servers[i].Addr, u.Servers[i].Pos)
		})
		return errorf(u.Pos, "upstream %s: lbpack cannot balance it: %s", u.Name, msg)
	}
	l.warnReach(u, cfg)
	return nil
}

// warnReach warns when the first try of ip_hash's or plain hash's weight
// walk never reaches some of the upstream's servers (core.Unreachable):
// nginx does the same, and lbpack keeps it, but the weights say otherwise.
func (l *loader) warnReach(u *Upstream, cfg core.Config) {
	far, span := core.Unreachable(cfg.Strategy, cfg.HashMode, cfg.Backends)
	if len(far) == 0 {
		return
	}
	total := 0
	for _, s := range u.Servers {
		total += s.Weight
	}
	names := make([]string, len(far))
	for i, k := range far {
		names[i] = fmt.Sprintf("%s (%s)", u.Servers[k].Addr, u.Servers[k].Pos)
	}
	l.c.Warnings = append(l.c.Warnings, Warning{Pos: u.MethodPos, Directive: u.Method,
		Msg: fmt.Sprintf("the weights add up to %d, more than the hash reaches (%d): %s never get a key on a first try, in nginx as in lbpack; weights that sum to at most %d reach every server",
			total, span, strings.Join(names, ", "), span)})
}
