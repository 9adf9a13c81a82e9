package yaegitest

import (
	"testing"

	"github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
)

func BenchmarkMicro(b *testing.B) {
	i := interp.New(interp.Options{})
	i.Use(stdlib.Symbols)
	_, err := i.Eval(`import "sync/atomic"
type req struct { key string; f func(int) bool; p *T; n int64 }
type T struct { a atomic.Int64; x []int; c atomic.Uint64 }
type I interface { pick(t *T, r req) int }
type I0 interface { pick0() int }
type IE interface { Pick(t *T, r req) int }
type S struct{}
func (S) pick(t *T, r req) int { return 1 }
type SP struct{ v int }
func (*SP) pick(t *T, r req) int { return 1 }
func (*SP) pick0() int { return 1 }
func (*SP) Pick(t *T, r req) int { return 1 }
var t = &T{x: make([]int, 10)}
var iv I = &SP{}
var iv0 I0 = &SP{}
var ive IE = &SP{}
var sp = &SP{}
var ivS I = S{}
func loopIface(n int) int { s := 0; for k := 0; k < n; k++ { s += iv.pick(t, req{key: "x", p: t}) }; return s }
func loopIfaceVal(n int) int { s := 0; for k := 0; k < n; k++ { s += ivS.pick(t, req{key: "x", p: t}) }; return s }
func loopIface0(n int) int { s := 0; for k := 0; k < n; k++ { s += iv0.pick0() }; return s }
func loopIfaceExp(n int) int { s := 0; for k := 0; k < n; k++ { s += ive.Pick(t, req{key: "x", p: t}) }; return s }
func loopDirect(n int) int { s := 0; for k := 0; k < n; k++ { s += sp.pick(t, req{key: "x", p: t}) }; return s }
type holder struct { f func(t *T, r req) int }
var h = &holder{f: sp.pick}
func loopFuncField(n int) int { s := 0; for k := 0; k < n; k++ { s += h.f(t, req{key: "x", p: t}) }; return s }
func mk(p *SP) func(t *T, r req) int { return func(t *T, r req) int { return p.pick(t, r) } }
var h2 = &holder{f: mk(sp)}
func loopClosureField(n int) int { s := 0; for k := 0; k < n; k++ { s += h2.f(t, req{key: "x", p: t}) }; return s }
func loopSwitch(n int) int { s := 0; for k := 0; k < n; k++ { 
	switch x := iv.(type) { case *SP: s += x.pick(t, req{key: "x", p: t}) } }; return s }
`)
	if err != nil { b.Fatal(err) }
	for _, name := range []string{"loopIface", "loopIfaceVal", "loopIface0", "loopIfaceExp", "loopDirect", "loopFuncField", "loopClosureField", "loopSwitch"} {
		v, err := i.Eval(name)
		if err != nil { b.Fatal(err) }
		f := v.Interface().(func(int) int)
		b.Run(name, func(b *testing.B) { b.ReportAllocs(); f(b.N) })
	}
}
