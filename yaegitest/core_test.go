package yaegitest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lbpack/lbpack/core"
	"github.com/lbpack/lbpack/yaegitest/driver"
	"github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
)

// coreDirs is what the interpreter needs to run the driver over core and
// package sticky.
var coreDirs = []string{"core", "sticky", "yaegitest/driver"}

type runFunc = func(strategy, mode, opts, backends string, steps int, update bool) ([]int, string)

// interpDriver returns an interpreter that has imported core and the driver,
// and the interpreted driver.Run.
func interpDriver(tb testing.TB) (*interp.Interpreter, runFunc) {
	tb.Helper()
	i := newInterp(tb, coreDirs, modulePath+"/core", modulePath+"/yaegitest/driver")
	run, ok := eval(tb, i, "driver.Run").(runFunc)
	if !ok {
		tb.Fatalf("driver.Run has type %T", eval(tb, i, "driver.Run"))
	}
	return i, run
}

// variant is a strategy with one choice of mode and options.
type variant struct{ strategy, mode, opts string }

func (v variant) String() string {
	s := v.strategy
	if v.mode != "" {
		s += "/" + v.mode
	}
	if v.opts != "" {
		s += "/" + v.opts
	}
	return s
}

// variants lists every registered strategy with each of its modes and
// options worth telling apart.
func variants() []variant {
	var out []variant
	for _, s := range core.Strategies() {
		switch s {
		case core.URLHash:
			for _, m := range []string{"", core.HashKetama, core.HashModulo, core.HashMaglev, core.HashBounded} {
				out = append(out, variant{s, m, ""})
			}
			out = append(out, variant{s, core.HashBounded, "lf=1.5"})
		case core.SmoothWRR, core.GCDWRR:
			out = append(out, variant{s, "", ""}, variant{s, "", "stagger"})
		case core.LeastConn:
			out = append(out, variant{s, "", ""}, variant{s, "", "two"})
		case core.Fair:
			out = append(out, variant{s, "", ""}, variant{s, "", "decay=5s"})
		default:
			out = append(out, variant{s, "", ""})
		}
	}
	return out
}

// backendSets exercise weights, down, backup, max_conns, max_fails with
// fail_timeout, slow start, one backend, and IPv6 addresses.
var backendSets = []struct {
	name, spec string
	update     bool
}{
	{"5-3-2", "10.0.0.1:80=5,10.0.0.2:80=3,10.0.0.3:80=2", false},
	{"ten-one-down", "10.0.0.1:80=1,10.0.0.2:80=2,10.0.0.3:80=3/d,10.0.0.4:80=4,10.0.0.5:80=5," +
		"10.0.0.6:80=1,10.0.0.7:80=7,10.0.0.8:80=2,10.0.0.9:80=3,10.0.0.10:80=1", false},
	{"fails-and-backup", "10.0.0.1:80=3/f1/t40,10.0.0.2:80=2/f2/t60,10.0.0.3:80=1/b", false},
	{"fails-no-backup", "10.0.0.1:80=3/f1/t40,10.0.0.2:80=2/f2/t60,10.0.0.3:80=1/f1", false},
	{"max-conns", "10.0.0.1:80=1/c1,10.0.0.2:80=1/c2,10.0.0.3:80=4/c3,[::1]:8080=2", false},
	{"single", "backend.example:443=1", false},
	{"slow-start-update", "10.0.0.1:80=2/s100,10.0.0.2:80=2/s100,10.0.0.3:80=1/s50,10.0.0.4:80=1/s100", true},
}

// TestCoreStrategiesInterpreted checks that registration from init into a
// package map works under yaegi: the interpreter sees the compiled list.
func TestCoreStrategiesInterpreted(t *testing.T) {
	i, _ := interpDriver(t)
	got := eval(t, i, "core.Strategies()").([]string)
	if want := core.Strategies(); !reflect.DeepEqual(got, want) {
		t.Fatalf("interpreted core.Strategies() = %v, compiled %v", got, want)
	}
}

// TestCoreAllStrategiesRegistered pins the strategy list the project ships.
func TestCoreAllStrategiesRegistered(t *testing.T) {
	want := []string{"fair", "gcd_wrr", "ip_hash", "least_conn", "random", "round_robin",
		"smooth_wrr", "url_hash", "weighted_random"}
	if got := core.Strategies(); !reflect.DeepEqual(got, want) {
		t.Fatalf("core.Strategies() = %v, want %v", got, want)
	}
}

// TestCorePicksInterpreted plays the same scenario compiled and interpreted
// for every strategy, mode and option and every backend set, and requires the
// same trace: picks, "none available" outcomes and in-flight counts, or the
// same construction error.
func TestCorePicksInterpreted(t *testing.T) {
	_, run := interpDriver(t)
	const steps = 300
	built := map[string]int{}
	for _, v := range variants() {
		for _, set := range backendSets {
			name := v.String() + "/" + set.name
			want, wantErr := driver.Run(v.strategy, v.mode, v.opts, set.spec, steps, set.update)
			got, gotErr := run(v.strategy, v.mode, v.opts, set.spec, steps, set.update)
			if gotErr != wantErr {
				t.Errorf("%s: interpreted error %q, compiled %q", name, gotErr, wantErr)
				continue
			}
			if wantErr != "" {
				continue
			}
			built[v.String()]++
			if distinct := distinctPicks(want, steps); distinct < 2 && set.name != "single" {
				t.Errorf("%s: the scenario reached only %d backend(s): it tests nothing", name, distinct)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: interpreted trace differs from compiled at step %d\ninterpreted %v\ncompiled    %v",
					name, firstDiff(got, want), got, want)
			}
		}
	}
	for _, v := range variants() {
		if built[v.String()] == 0 {
			t.Errorf("%s: no backend set built a balancer", v)
		}
	}
	t.Logf("compared %d variants: %v", len(built), built)
}

// TestCoreOutageInterpreted plays a stable outage (driver.Outage) compiled
// and interpreted, for every strategy: smooth_wrr's learnt schedule over the
// available backends, its adoption of a version and the return of every
// backend give the same picks under yaegi.
func TestCoreOutageInterpreted(t *testing.T) {
	i := newInterp(t, coreDirs, modulePath+"/core", modulePath+"/yaegitest/driver")
	run, ok := eval(t, i, "driver.Outage").(func(string, string, int, int) ([]int, string))
	if !ok {
		t.Fatalf("driver.Outage has type %T", eval(t, i, "driver.Outage"))
	}
	const backends = "10.0.0.1:80=5,10.0.0.2:80=3,10.0.0.3:80=2,10.0.0.4:80=4"
	for _, s := range []string{core.SmoothWRR, core.GCDWRR, core.RoundRobin, core.LeastConn} {
		want, wantErr := driver.Outage(s, backends, 1, 60)
		got, gotErr := run(s, backends, 1, 60)
		if gotErr != wantErr || wantErr != "" {
			t.Fatalf("%s: interpreted error %q, compiled %q", s, gotErr, wantErr)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: interpreted trace differs from compiled at step %d\ninterpreted %v\ncompiled    %v",
				s, firstDiff(got, want), got, want)
		}
		for k, p := range want[:120] {
			if p == 1 {
				t.Fatalf("%s: pick %d went to the refused backend", s, k)
			}
		}
	}
}

// distinctPicks counts the backends among the first steps entries of a trace.
func distinctPicks(trace []int, steps int) int {
	seen := map[int]bool{}
	for _, i := range trace[:steps] {
		if i >= 0 {
			seen[i] = true
		}
	}
	return len(seen)
}

func firstDiff(a, b []int) int {
	for k := 0; k < len(a) && k < len(b); k++ {
		if a[k] != b[k] {
			return k
		}
	}
	if len(a) < len(b) {
		return len(a)
	}
	return len(b)
}

// TestCoreErrorsInterpreted checks that bad configurations fail under yaegi
// with the compiled error text, for each kind of mistake core rejects.
func TestCoreErrorsInterpreted(t *testing.T) {
	_, run := interpDriver(t)
	ok3 := "10.0.0.1:80=5,10.0.0.2:80=3,10.0.0.3:80=2"
	cases := []struct {
		name, strategy, mode, opts, backends, contains string
	}{
		{"unknown strategy", "nope", "", "", ok3, `strategy "nope"`},
		{"empty list", core.RoundRobin, "", "", "", "backends"},
		{"zero weight", core.RoundRobin, "", "", "10.0.0.1:80=0", "weight 0"},
		{"negative weight", core.RoundRobin, "", "", "10.0.0.1:80=-2", "weight -2"},
		{"duplicate", core.RoundRobin, "", "", "10.0.0.1:80=1,10.0.0.1:80=2", "duplicate"},
		{"no port", core.RoundRobin, "", "", "10.0.0.1=1", `"10.0.0.1"`},
		{"bad port", core.RoundRobin, "", "", "10.0.0.1:99999=1", "99999"},
		{"negative max conns", core.RoundRobin, "", "", "10.0.0.1:80=1/c-1", "-1"},
		{"all backups", core.RoundRobin, "", "", "10.0.0.1:80=1/b", "backup"},
		{"backup with ip_hash", core.IPHash, "", "", "10.0.0.1:80=1,10.0.0.2:80=1/b", "backup"},
		{"backup with url_hash", core.URLHash, "", "", "10.0.0.1:80=1,10.0.0.2:80=1/b", "backup"},
		{"mode without url_hash", core.SmoothWRR, core.HashMaglev, "", ok3, "maglev"},
		{"unknown mode", core.URLHash, "zigzag", "", ok3, "zigzag"},
		{"load factor below 1", core.URLHash, core.HashBounded, "lf=0.5", ok3, "0.5"},
		{"load factor without bounded", core.URLHash, core.HashKetama, "lf=1.5", ok3, "1.5"},
		{"stagger with random", core.Random, "", "stagger", ok3, "stagger"},
		{"two choices with round robin", core.RoundRobin, "", "two", ok3, "two_choices"},
		{"decay without fair", core.LeastConn, "", "decay=5s", ok3, "decay_time"},
	}
	for _, c := range cases {
		_, want := driver.Run(c.strategy, c.mode, c.opts, c.backends, 1, false)
		_, got := run(c.strategy, c.mode, c.opts, c.backends, 1, false)
		if want == "" || !strings.Contains(want, c.contains) {
			t.Errorf("%s: compiled error %q, want one containing %q", c.name, want, c.contains)
		}
		if got != want {
			t.Errorf("%s: interpreted error %q, compiled %q", c.name, got, want)
		}
	}
}

// BenchmarkPick measures one pick at 10 backends for every strategy variant,
// interpreted and compiled in the same run. The interpreted figure includes
// the interpreted loop around the pick, as a plugin's request path has.
func BenchmarkPick(b *testing.B) {
	i := newInterp(b, coreDirs, modulePath+"/core", modulePath+"/yaegitest/driver")
	ipicker := eval(b, i, "driver.PickerOver").(func(strategy, mode, opts, backends string, keys []string) (func(int) int, string))
	var ten []string
	for k := 1; k <= 10; k++ {
		ten = append(ten, fmt.Sprintf("10.0.0.%d:80=%d", k, k%4+1))
	}
	spec := strings.Join(ten, ",")
	// least_conn is also measured with a request in flight, when its pick
	// is nginx's scan rather than the idle schedule.
	for _, v := range append(variants(), variant{core.LeastConn, "", "busy"}) {
		// ip_hash's keys mix IPv4 and IPv6 clients with now and then a key
		// that is no address; IPv4 and IPv6 clients are also measured
		// alone, since they take different paths.
		type keySet struct {
			name string
			keys []string
		}
		keySets := []keySet{{"", driver.Keys(v.strategy, 64)}}
		if v.strategy == core.IPHash {
			var v4, v6 []string
			for _, k := range driver.Keys(v.strategy, 512) {
				switch {
				case net.ParseIP(k) == nil:
				case strings.Contains(k, ":"):
					v6 = append(v6, k)
				default:
					v4 = append(v4, k)
				}
			}
			keySets = append(keySets, keySet{"_ipv4", v4[:64]}, keySet{"_ipv6", v6[:64]})
		}
		for _, ks := range keySets {
			for _, mode := range []string{"interpreted", "compiled"} {
				var pick func(int) int
				var err string
				if mode == "interpreted" {
					pick, err = ipicker(v.strategy, v.mode, v.opts, spec, ks.keys)
				} else {
					pick, err = driver.PickerOver(v.strategy, v.mode, v.opts, spec, ks.keys)
				}
				if err != "" {
					b.Fatalf("%s: %s", v, err)
				}
				b.Run(strings.ReplaceAll(v.String(), "/", "_")+ks.name+"/"+mode, func(b *testing.B) {
					benchCPU(b, func(n int) { pick(n) })
				})
			}
		}
	}
}

// probeSource is a strategy added to the interpreted copy of core only: it
// checks, before the real strategies exist and independently of them, the
// constructs core's design leans on under yaegi: registration from init into
// a package map, an interpreted type satisfying an interface with an
// unexported method, a struct passed by value through that method, atomic
// fields inside structs, and nginx's smooth pass reached through a pointer to
// the by-value request.
const probeSource = `package core

func init() {
	register("yaegi_probe", strategyInfo{build: func(g *group, c *Config) (strategy, error) { return &probe{}, nil }})
}

type probe struct{ calls int }

func (p *probe) pick(g *group, r request) int {
	p.calls++
	return g.smooth.next(g, &r, nil)
}
`

func TestCoreFoundationInterpreted(t *testing.T) {
	dir := goPath(t, coreDirs...)
	if err := os.WriteFile(filepath.Join(dir, "src", modulePath, "core", "yaegiprobe.go"), []byte(probeSource), 0o644); err != nil {
		t.Fatal(err)
	}
	i := interp.New(interp.Options{GoPath: dir})
	if err := i.Use(stdlib.Symbols); err != nil {
		t.Fatal(err)
	}
	if _, err := i.Eval(`import "` + modulePath + `/core"`); err != nil {
		t.Fatal(err)
	}
	if _, err := i.Eval(`func probeSeq(down bool, maxConns int) []int {
		b, err := core.New(core.Config{Strategy: "yaegi_probe", Backends: []core.Backend{
			{Address: "a:1", Weight: 5, Down: down}, {Address: "b:1", Weight: 3}, {Address: "c:1", Weight: 2, MaxConns: maxConns}}})
		if err != nil {
			panic(err)
		}
		var out []int
		for k := 0; k < 10; k++ {
			i, _ := core.Pick(b, "", core.Filter{}) // begun, never ended: c fills up
			if i < 0 {
				out = append(out, -1)
				continue
			}
			out = append(out, i)
		}
		return out
	}`); err != nil {
		t.Fatal(err)
	}
	seq := eval(t, i, "probeSeq").(func(bool, int) []int)
	for _, c := range []struct {
		down     bool
		maxConns int
		want     []int
	}{
		{false, 0, []int{0, 1, 2, 0, 0, 1, 0, 2, 1, 0}}, // nginx: a b c a a b a c b a
		{true, 0, []int{1, 2, 1, 2, 1, 1, 2, 1, 2, 1}},  // a down: 3,2 smooth
		{true, 1, []int{1, 2, 1, 1, 1, 1, 1, 1, 1, 1}},  // c full after one request
	} {
		if got := seq(c.down, c.maxConns); !slices.Equal(got, c.want) {
			t.Errorf("down=%v maxConns=%d: interpreted smooth sequence %v, want %v", c.down, c.maxConns, got, c.want)
		}
	}
	names := eval(t, i, "core.Strategies()").([]string)
	if !slices.Contains(names, "yaegi_probe") {
		t.Errorf("interpreted core.Strategies() = %v: the probe registered in init is missing", names)
	}
}
