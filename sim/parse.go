package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseSlowdown parses a server's change of speed over time, with F a
// factor (a positive number followed by "x") and D Go durations:
//
//	Fx@D1-D2       service is F times slower from D1 until D2
//	Fx@every:D     F times slower during every other period D (the
//	               second, fourth...): a server that flaps
//
// For example "10x@0s-20s" (slow for the first 20 s) and "20x@every:1s".
func ParseSlowdown(s string) (func(time.Duration) float64, error) {
	f, err := parseSlowdown(s)
	if err != nil {
		return nil, fmt.Errorf("sim: slowdown %q: %v", s, err)
	}
	return f, nil
}

func parseSlowdown(s string) (func(time.Duration) float64, error) {
	fs, when, ok := strings.Cut(s, "@")
	if !ok || !strings.HasSuffix(fs, "x") {
		return nil, fmt.Errorf("want Fx@D1-D2 or Fx@every:D")
	}
	factor, err := strconv.ParseFloat(strings.TrimSuffix(fs, "x"), 64)
	if err != nil || !(factor > 0) || math.IsInf(factor, 0) {
		return nil, fmt.Errorf("factor %q: want a positive number followed by x", fs)
	}
	if p, ok := strings.CutPrefix(when, "every:"); ok {
		d, err := parseDur(p)
		if err != nil {
			return nil, err
		}
		if d == 0 {
			return nil, fmt.Errorf("period must be positive")
		}
		return flap(d, factor), nil
	}
	from, to, err := parseSpan(when, "want Fx@D1-D2 or Fx@every:D")
	if err != nil {
		return nil, err
	}
	if from >= to {
		return nil, fmt.Errorf("window %v-%v is empty", from, to)
	}
	return slowWindow(from, to, factor), nil
}

// ParseErrors parses a server's error answers: "P%" (a fraction P of the
// requests, at random, answered with an error in the usual service time)
// or "P%:DIST" (answered in DIST, a distribution as for ParseDist but not
// slow:). For example "100%:1ms", a backend that fails everything fast.
func ParseErrors(s string) (rate float64, d Dist, err error) {
	ps, ds, hasDist := strings.Cut(s, ":")
	p, perr := parsePercent(ps)
	if perr != nil {
		return 0, nil, fmt.Errorf("sim: errors %q: %v", s, perr)
	}
	if hasDist {
		if d, err = parseDist(ds, false); err != nil {
			return 0, nil, fmt.Errorf("sim: errors %q: %v", s, err)
		}
	}
	return p, d, nil
}

// ParseClasses parses request cost classes: "P%:C[,P%:C...]", each a share
// of the requests and their cost, a multiple of the service time; the
// shares must add up to 100%. For example "95%:1,5%:100".
func ParseClasses(s string) ([]Class, error) {
	var out []Class
	total := 0.0
	for _, item := range strings.Split(s, ",") {
		ps, cs, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, fmt.Errorf("sim: classes %q: %q: want P%%:COST", s, item)
		}
		p, err := parsePercent(ps)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("sim: classes %q: share %q: want more than 0%% and at most 100%%", s, ps)
		}
		c, err := strconv.ParseFloat(cs, 64)
		if err != nil || !(c > 0) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("sim: classes %q: cost %q: want a positive number", s, cs)
		}
		out = append(out, Class{Share: p, Cost: c})
		total += p
	}
	if math.Abs(total-1) > 1e-9 {
		return nil, fmt.Errorf("sim: classes %q: shares add up to %g%%, want 100%%", s, 100*total)
	}
	return out, nil
}
