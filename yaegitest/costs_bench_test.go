package yaegitest

import (
	"testing"

	"github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
)

// costsSource holds loops that each repeat one construct n times, for
// BenchmarkInterpreterCosts. Each is measured against Loop, which does
// nothing but count.
const costsSource = `package costs

import (
	"net"
	"strings"
	"sync/atomic"
	"time"
)

type box struct {
	n    atomic.Int64
	kind int
}

type picker interface{ pick(key string) int }

type one struct{}

func (one) pick(key string) int { return 1 }

var (
	b           = &box{kind: 6}
	key         = "192.0.2.10"
	fn          = small
	iface picker = one{}
)

func small(k int) int { return k + 1 }

// large is small with values it never reaches: the interpreter allocates
// them on every call all the same.
func large(k int) int {
	if k < 0 {
		x := k * 2
		y := x + 3
		z := y * y
		w := z - x
		v := w + y + z
		u := v * 7
		return u + x + y + z + w + v
	}
	return k + 1
}

func dispatch(k int) int {
	switch b.kind {
	case 0:
		return small(k)
	case 1:
		return small(k)
	case 2:
		return small(k)
	case 3:
		return small(k)
	case 4:
		return small(k)
	case 5:
		return small(k)
	case 6:
		return small(k)
	}
	return small(k)
}

func deferred(k int) int {
	defer small(k)
	return k
}

func Loop(n int) int       { s := 0; for k := 0; k < n; k++ { s += k }; return s }
func Call(n int) int       { s := 0; for k := 0; k < n; k++ { s += small(k) }; return s }
func CallLarge(n int) int  { s := 0; for k := 0; k < n; k++ { s += large(k) }; return s }
func CallSwitch(n int) int { s := 0; for k := 0; k < n; k++ { s += dispatch(k) }; return s }
func CallFuncValue(n int) int { s := 0; for k := 0; k < n; k++ { s += fn(k) }; return s }
func CallInterface(n int) int { s := 0; for k := 0; k < n; k++ { s += iface.pick(key) }; return s }
func CallDefer(n int) int  { s := 0; for k := 0; k < n; k++ { s += deferred(k) }; return s }
func AtomicLoad(n int) int { s := 0; for k := 0; k < n; k++ { s += int(b.n.Load()) }; return s }
func ParseIP(n int) int    { s := 0; for k := 0; k < n; k++ { s += int(net.ParseIP(key)[15]) }; return s }
func IndexByte(n int) int  { s := 0; for k := 0; k < n; k++ { s += strings.IndexByte(key, ':') }; return s }
func TimeNow(n int) int    { s := 0; for k := 0; k < n; k++ { s += int(time.Now().UnixNano() & 1) }; return s }
func CharLoop(n int) int {
	s := 0
	for k := 0; k < n; k++ {
		for j := 0; j < len(key); j++ {
			s += int(key[j])
		}
	}
	return s
}
`

// BenchmarkInterpreterCosts measures what yaegi charges for the constructs
// core's quick paths and the plugin's request path are written around: a
// call (with few values and with many, which the callee's frame allocates
// whichever branch runs), a switch's cases, a call through a function value
// and through an interface, a defer, an atomic load, standard-library calls,
// and a loop over a key's characters (CharLoop: ten per op). Subtract Loop's
// figure for the construct alone.
func BenchmarkInterpreterCosts(b *testing.B) {
	i := interp.New(interp.Options{GoPath: b.TempDir()})
	if err := i.Use(stdlib.Symbols); err != nil {
		b.Fatal(err)
	}
	if _, err := i.Eval(costsSource); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"Loop", "Call", "CallLarge", "CallSwitch", "CallFuncValue", "CallInterface",
		"CallDefer", "AtomicLoad", "ParseIP", "IndexByte", "TimeNow", "CharLoop"} {
		f := eval(b, i, "costs."+name).(func(int) int)
		b.Run(name, func(b *testing.B) { benchCPU(b, func(n int) { f(n) }) })
	}
}
