// Package driver runs one fixed scenario against a core.Balancer. The same
// source is compiled into the tests and interpreted by yaegi, so the two runs
// can be compared pick for pick; it therefore keeps to what yaegi runs (no
// generics, no min/max, no closures over loop variables).
//
// Inputs and outputs are plain strings and ints: a value of an interpreted
// type cannot cross into compiled code as the compiled type.
package driver

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lbpack/lbpack/core"
)

// NoBackend is what a trace records where a pick found no backend.
const NoBackend = -1

// clock is a fake clock that the scenario advances by hand.
type clock struct{ ns int64 }

func (c *clock) now() time.Time { return time.Unix(0, c.ns) }

// splitmix is SplitMix64, a tiny deterministic generator both runs share.
type splitmix struct{ s uint64 }

func (g *splitmix) next() uint64 {
	g.s += 0x9e3779b97f4a7c15
	z := g.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// ParseBackends parses "addr=weight[/flag...]" items separated by commas.
// Flags: d (down), b (backup), cN (max conns), fN (max fails), tN (fail
// timeout, ms), sN (slow start, ms).
func ParseBackends(spec string) ([]core.Backend, error) {
	var out []core.Backend
	if spec == "" {
		return out, nil
	}
	for _, item := range strings.Split(spec, ",") {
		parts := strings.Split(item, "/")
		addr, w, ok := strings.Cut(parts[0], "=")
		if !ok {
			return nil, fmt.Errorf("backend %q: want addr=weight", item)
		}
		weight, err := strconv.Atoi(w)
		if err != nil {
			return nil, fmt.Errorf("backend %q: %v", item, err)
		}
		be := core.Backend{Address: addr, Weight: weight}
		for _, f := range parts[1:] {
			if f == "" {
				continue
			}
			n := 0
			if len(f) > 1 {
				if n, err = strconv.Atoi(f[1:]); err != nil {
					return nil, fmt.Errorf("backend %q flag %q: %v", item, f, err)
				}
			}
			switch f[0] {
			case 'd':
				be.Down = true
			case 'b':
				be.Backup = true
			case 'c':
				be.MaxConns = n
			case 'f':
				be.MaxFails = n
			case 't':
				be.FailTimeout = time.Duration(n) * time.Millisecond
			case 's':
				be.SlowStart = time.Duration(n) * time.Millisecond
			default:
				return nil, fmt.Errorf("backend %q: unknown flag %q", item, f)
			}
		}
		out = append(out, be)
	}
	return out, nil
}

// config builds a core.Config from the scenario's strings. opts is a comma
// list of "stagger", "two", "lf=F", "decay=D" and "busy".
func config(strategy, mode, opts, backends string, clk *clock, rnd *splitmix) (core.Config, error) {
	bs, err := ParseBackends(backends)
	if err != nil {
		return core.Config{}, err
	}
	c := core.Config{
		Strategy: strategy,
		HashMode: mode,
		Backends: bs,
		Now:      clk.now,  // a method value, on purpose: yaegi must bind it
		Rand:     rnd.next, // likewise
	}
	if opts == "" {
		return c, nil
	}
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "stagger":
			c.Stagger = true
		case "two":
			c.TwoChoices = true
		case "lf":
			if c.LoadFactor, err = strconv.ParseFloat(v, 64); err != nil {
				return c, err
			}
		case "decay":
			if c.DecayTime, err = time.ParseDuration(v); err != nil {
				return c, err
			}
		case "busy": // PickerOver's: a request in flight to backend 0
		default:
			return c, fmt.Errorf("unknown option %q", o)
		}
	}
	return c, nil
}

// oddAddresses are ip_hash keys the parsers must agree to refuse as IPv4
// (the interpreted and the compiled core read addresses differently).
var oddAddresses = []string{"01.2.3.4", "1.2.3.256", "1.2.3", "1.2.3.4%eth0", "::ffff:1.2.3.4", "::1.2.3.4", "", "unknown", "1.2.3.4 "}

// Keys returns the scenario's i-th request key: client addresses (IPv4 and
// IPv6, and every seventh one of oddAddresses, each of which the first 64
// keys hold) for ip_hash, URL paths otherwise.
func Keys(strategy string, n int) []string {
	keys := make([]string, n)
	for i := 0; i < n; i++ {
		switch {
		case strategy == core.IPHash && i%7 == 5:
			keys[i] = oddAddresses[(i/7)%len(oddAddresses)]
		case strategy == core.IPHash && i%4 == 3:
			keys[i] = fmt.Sprintf("2001:db8::%x:%x", i*7, i*131)
		case strategy == core.IPHash:
			keys[i] = fmt.Sprintf("10.%d.%d.%d", i%3, (i*37)%256, (i*11)%256)
		default:
			keys[i] = fmt.Sprintf("/item/%d?q=%d", i*7919, i%13)
		}
	}
	return keys
}

// excluder refuses one backend index; built in a function so that each
// closure has its own variable.
func excluder(skip int) func(int) bool {
	return func(i int) bool { return i != skip }
}

// Run builds a balancer and plays steps requests against it: a pick (every
// fifth through a Filter refusing one backend, every tenth of those with a
// Version, the refused index plus one, every fifth through Take), and Done for the
// request four picks back, failing every seventh, with the clock moving 1ms
// a step. With update set, the last backend is removed halfway through and
// added back (so that it ramps up, with a slow start) at three quarters. The
// trace is the picked indexes followed by each backend's in-flight count.
// A construction error comes back as its text.
func Run(strategy, mode, opts, backends string, steps int, update bool) ([]int, string) {
	clk := &clock{ns: 1700000000000000000}
	rnd := &splitmix{s: 1}
	cfg, err := config(strategy, mode, opts, backends, clk, rnd)
	if err != nil {
		return nil, "driver: " + err.Error()
	}
	b, err := core.New(cfg)
	if err != nil {
		return nil, err.Error()
	}
	keys := Keys(strategy, 64)
	var trace []int
	var queue []ended
	for k := 0; k < steps; k++ {
		clk.ns += int64(time.Millisecond)
		if update && (k == steps/2 || k == steps*3/4) && len(cfg.Backends) > 1 {
			bs := cfg.Backends
			if k == steps/2 {
				bs = bs[:len(bs)-1]
			}
			nb, err := b.Update(bs)
			if err != nil {
				return trace, "update: " + err.Error()
			}
			b = nb
			queue = queue[:0] // indexes of the old balancer no longer apply
		}
		var i int
		var t core.Ticket
		if k%50 == 49 {
			i, t = core.Pick(b, keys[k%len(keys)], core.Filter{Allow: excluder(k % b.Len()), Version: uint64(k%b.Len()) + 1})
		} else if k%5 == 4 {
			i, t = core.Pick(b, keys[k%len(keys)], core.Filter{Allow: excluder(k % b.Len())})
		} else if k%5 == 3 {
			var n *atomic.Int64
			if i, n, t = core.Take(b, keys[k%len(keys)]); n != nil {
				n.Add(-1) // ended at once, as a deferred count-down would
				if t != 0 {
					core.Done(b, i, t, time.Millisecond, false)
				}
				if i >= 0 {
					trace = append(trace, i)
				} else {
					trace = append(trace, NoBackend)
				}
				continue
			}
		} else {
			i, t = core.Pick(b, keys[k%len(keys)], core.Filter{})
		}
		if i < 0 {
			trace = append(trace, NoBackend)
			continue
		}
		trace = append(trace, i)
		queue = append(queue, ended{i, t})
		if len(queue) > 3 {
			j := queue[0]
			queue = queue[1:]
			lat := time.Duration((k*37)%20+1) * time.Millisecond
			core.Done(b, j.i, j.t, lat, k%7 == 3)
		}
	}
	for i := 0; i < b.Len(); i++ {
		trace = append(trace, int(b.InFlight(i)))
	}
	return trace, ""
}

// ended is a request in flight in Play: its backend and ticket.
type ended struct {
	i int
	t core.Ticket
}

// Outage plays a stable outage against a balancer: steps picks through
// a Filter refusing backend out (smooth_wrr learns its schedule over the
// others), then steps with the Filter at one Version (the learnt
// schedule adopts it), then steps with every backend back. The trace is the
// picked indexes, NoBackend where there was none.
func Outage(strategy, backends string, out, steps int) ([]int, string) {
	cfg, err := config(strategy, "", "", backends, &clock{ns: 1700000000000000000}, &splitmix{s: 1})
	if err != nil {
		return nil, "driver: " + err.Error()
	}
	b, err := core.New(cfg)
	if err != nil {
		return nil, err.Error()
	}
	refuse := excluder(out)
	var trace []int
	for k := 0; k < 3*steps; k++ {
		var i int
		var t core.Ticket
		switch {
		case k < steps:
			i, t = core.Pick(b, "", core.Filter{Allow: refuse})
		case k < 2*steps:
			i, t = core.Pick(b, "", core.Filter{Allow: refuse, Version: 7})
		default:
			i, t = core.Pick(b, "", core.Filter{})
		}
		if i < 0 {
			i = NoBackend
		} else {
			core.Done(b, i, t, time.Millisecond, false)
		}
		trace = append(trace, i)
	}
	return trace, ""
}

// Picker builds a balancer and returns a function that makes n picks and
// returns the sum of the picked indexes (so that nothing is optimised away),
// for benchmarks. It picks with core.Take, as the Traefik plugin does, and
// ends each request at once.
func Picker(strategy, mode, opts, backends string) (func(n int) int, string) {
	return PickerOver(strategy, mode, opts, backends, Keys(strategy, 64))
}

// PickerOver is Picker with the caller's 64 keys. With opts "busy" one
// request to backend 0 stays in flight.
func PickerOver(strategy, mode, opts, backends string, keys []string) (func(n int) int, string) {
	cfg, err := config(strategy, mode, opts, backends, &clock{ns: 1}, &splitmix{s: 1})
	if err != nil {
		return nil, "driver: " + err.Error()
	}
	cfg.Now = nil // the real clock and random source, as in production
	cfg.Rand = nil
	b, err := core.New(cfg)
	if err != nil {
		return nil, err.Error()
	}
	for _, o := range strings.Split(opts, ",") {
		if o == "busy" {
			// Never done: least_conn scans on every pick.
			core.Pick(b, "", core.Filter{Allow: func(i int) bool { return i == 0 }})
		}
	}
	return picker(b, keys), ""
}

func picker(b *core.Balancer, keys []string) func(n int) int {
	return func(n int) int {
		sum := 0
		for k := 0; k < n; k++ {
			i, c, t := core.Take(b, keys[k&63])
			if c != nil {
				c.Add(-1)
			}
			if t != 0 {
				core.Done(b, i, t, 0, false)
			}
			sum += i
		}
		return sum
	}
}
