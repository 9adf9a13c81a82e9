package sim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// A Dist is a latency distribution: the time a backend takes to answer one
// request. Sample must be deterministic given the random source.
type Dist interface {
	Sample(r *rand.Rand) time.Duration
	// Mean is the distribution's expected value (the oracle's estimate).
	Mean() time.Duration
	String() string
}

// ParseDist parses a latency distribution. The grammar, with D a Go duration
// ("10ms", "1.5s") and P a percentage from 0 to 100 followed by "%":
//
//	D                 every request takes D
//	exp:D             exponential with mean D (D > 0)
//	uniform:D1-D2     uniform between D1 and D2 (D1 <= D2)
//	slow:D@P          a fraction P of the requests, drawn at random, take D;
//	                  the others take the base, which is Options.Default
//	                  (10ms unless set)
//	slow:D@P:BASE     the same with an explicit base, BASE being one of the
//	                  three forms above
//
// For example "exp:10ms", "slow:100ms@30%" (30% take 100ms, 70% take the
// default) and "slow:1s@1%:exp:20ms".
func ParseDist(s string) (Dist, error) {
	d, err := parseDist(s, true)
	if err != nil {
		return nil, fmt.Errorf("sim: latency %q: %v", s, err)
	}
	return d, nil
}

func parseDist(s string, slowOK bool) (Dist, error) {
	kind, arg, hasKind := strings.Cut(s, ":")
	if !hasKind {
		d, err := parseDur(s)
		if err != nil {
			return nil, err
		}
		return constDist(d), nil
	}
	switch kind {
	case "exp":
		d, err := parseDur(arg)
		if err != nil {
			return nil, err
		}
		if d == 0 {
			return nil, fmt.Errorf("exponential mean must be positive")
		}
		return expDist(d), nil
	case "uniform":
		a, b, err := parseSpan(arg, "want uniform:D1-D2")
		if err != nil {
			return nil, err
		}
		if a > b {
			return nil, fmt.Errorf("uniform bounds %v > %v", a, b)
		}
		return uniformDist{a, b}, nil
	case "slow":
		if !slowOK {
			return nil, fmt.Errorf("the base of slow: cannot itself be slow:")
		}
		return parseSlow(arg)
	}
	return nil, fmt.Errorf("unknown distribution %q (want D, exp:D, uniform:D1-D2 or slow:D@P%%)", kind)
}

// parseSlow parses "D@P%" or "D@P%:BASE".
func parseSlow(s string) (Dist, error) {
	ds, rest, ok := strings.Cut(s, "@")
	if !ok {
		return nil, fmt.Errorf("want slow:D@P%%")
	}
	d, err := parseDur(ds)
	if err != nil {
		return nil, err
	}
	ps, base, hasBase := strings.Cut(rest, ":")
	p, err := parsePercent(ps)
	if err != nil {
		return nil, err
	}
	sd := &slowDist{slow: d, frac: p}
	if hasBase {
		if sd.base, err = parseDist(base, false); err != nil {
			return nil, err
		}
	}
	return sd, nil
}

// parsePercent parses "P%", 0 to 100, as a fraction.
func parsePercent(ps string) (float64, error) {
	if !strings.HasSuffix(ps, "%") {
		return 0, fmt.Errorf("percentage %q: want a number followed by %%", ps)
	}
	p, err := strconv.ParseFloat(strings.TrimSuffix(ps, "%"), 64)
	if err != nil || !(p >= 0 && p <= 100) {
		return 0, fmt.Errorf("percentage %q: want 0%% to 100%%", ps)
	}
	return p / 100, nil
}

func parseDur(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a Go duration such as 10ms", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q: must not be negative", s)
	}
	return d, nil
}

// parseSpan parses "D1-D2" as two durations; want is the error when s has
// no "-".
func parseSpan(s, want string) (time.Duration, time.Duration, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, fmt.Errorf("%s", want)
	}
	a, err := parseDur(lo)
	if err != nil {
		return 0, 0, err
	}
	b, err := parseDur(hi)
	return a, b, err
}

type constDist time.Duration

func (d constDist) Sample(*rand.Rand) time.Duration { return time.Duration(d) }
func (d constDist) Mean() time.Duration             { return time.Duration(d) }
func (d constDist) String() string                  { return time.Duration(d).String() }

type expDist time.Duration

func (d expDist) Sample(r *rand.Rand) time.Duration {
	return time.Duration(r.ExpFloat64() * float64(d))
}
func (d expDist) Mean() time.Duration { return time.Duration(d) }
func (d expDist) String() string      { return "exp:" + time.Duration(d).String() }

type uniformDist struct{ lo, hi time.Duration }

func (d uniformDist) Sample(r *rand.Rand) time.Duration {
	return d.lo + time.Duration(r.Float64()*float64(d.hi-d.lo))
}
func (d uniformDist) Mean() time.Duration { return (d.lo + d.hi) / 2 }
func (d uniformDist) String() string      { return "uniform:" + d.lo.String() + "-" + d.hi.String() }

// slowDist takes slow with probability frac and base otherwise; a nil base is
// bound to Options.Default by Run.
type slowDist struct {
	slow time.Duration
	frac float64
	base Dist
}

func (d *slowDist) Sample(r *rand.Rand) time.Duration {
	// Draw the coin first, always, so that the sequence of draws does not
	// depend on the base.
	if r.Float64() < d.frac {
		return d.slow
	}
	if d.base == nil {
		return defaultLatency
	}
	return d.base.Sample(r)
}

func (d *slowDist) Mean() time.Duration {
	base := defaultLatency
	if d.base != nil {
		base = d.base.Mean()
	}
	return time.Duration(d.frac*float64(d.slow) + (1-d.frac)*float64(base))
}

func (d *slowDist) String() string {
	s := "slow:" + d.slow.String() + "@" + strconv.FormatFloat(d.frac*100, 'g', -1, 64) + "%"
	if d.base != nil {
		s += ":" + d.base.String()
	}
	return s
}

// withBase returns d with an unset slow base bound to def.
func withBase(d Dist, def Dist) Dist {
	if sd, ok := d.(*slowDist); ok && sd.base == nil {
		c := *sd
		c.base = def
		return &c
	}
	return d
}
