package core

import (
	"strconv"
	"strings"
)

// ParseStatus reads one entry of a list of answer statuses that count as a
// backend's failure, as both hosts' options take it (Caddy's fail_status,
// the Traefik plugin's failStatus) and as Traits.FailStatus gives a
// strategy's default: a status ("503"), a class ("5xx"), or a range
// ("500-504"), within 100 to 599. It returns the lowest and highest status
// the entry covers, and ok false for anything else.
func ParseStatus(v string) (lo, hi int, ok bool) {
	if len(v) == 3 && (v[1] == 'x' || v[1] == 'X') && (v[2] == 'x' || v[2] == 'X') && v[0] >= '1' && v[0] <= '5' {
		lo = int(v[0]-'0') * 100
		return lo, lo + 99, true
	}
	first, last, isRange := strings.Cut(v, "-")
	if !isRange {
		last = first
	}
	lo, err := strconv.Atoi(first)
	if err != nil || len(first) != 3 {
		return 0, 0, false
	}
	hi, err = strconv.Atoi(last)
	if err != nil || len(last) != 3 || lo < 100 || hi > 599 || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}
