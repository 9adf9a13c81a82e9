// Package yaegitest runs lbpack's core and Traefik plugin under yaegi, the
// interpreter Traefik loads plugins with, set up the way Traefik sets it up:
// a GOPATH holding the sources and the standard library's symbols only.
//
// It is a module of its own because the plugin catalog refuses a plugin
// module that requires yaegi.
package yaegitest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
)

// modulePath is lbpack's module path; sources go under it in the GOPATH.
const modulePath = "github.com/lbpack/lbpack"

// goPath builds a GOPATH in a temporary directory holding the non-test Go
// files of the given directories of the repository (relative to its root),
// at src/github.com/lbpack/lbpack/DIR, as Traefik lays out a local plugin.
func goPath(tb testing.TB, dirs ...string) string {
	tb.Helper()
	root := tb.TempDir()
	for _, dir := range dirs {
		src := filepath.Join("..", filepath.FromSlash(dir))
		if strings.HasPrefix(dir, "yaegitest/") {
			src = filepath.FromSlash(strings.TrimPrefix(dir, "yaegitest/"))
		}
		dst := filepath.Join(root, "src", filepath.FromSlash(modulePath), filepath.FromSlash(dir))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			tb.Fatal(err)
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			tb.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(src, name))
			if err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
				tb.Fatal(err)
			}
			n++
		}
		if n == 0 {
			tb.Fatalf("no Go files in %s", src)
		}
	}
	return root
}

// newInterp returns an interpreter over a fresh GOPATH with dirs, with only
// the standard library's symbols, that has imported each path in imports.
func newInterp(tb testing.TB, dirs []string, imports ...string) *interp.Interpreter {
	tb.Helper()
	i := interp.New(interp.Options{GoPath: goPath(tb, dirs...)})
	if err := i.Use(stdlib.Symbols); err != nil {
		tb.Fatal(err)
	}
	for _, imp := range imports {
		if _, err := i.Eval(`import "` + imp + `"`); err != nil {
			tb.Fatalf("yaegi: import %s: %v", imp, err)
		}
	}
	return i
}

// eval evaluates src and returns its value as an interface, failing the test
// on error.
func eval(tb testing.TB, i *interp.Interpreter, src string) any {
	tb.Helper()
	v, err := i.Eval(src)
	if err != nil {
		tb.Fatalf("yaegi: %s: %v", src, err)
	}
	if !v.IsValid() {
		tb.Fatalf("yaegi: %s: no value", src)
	}
	return v.Interface()
}

// cpuNanos is the CPU time this process has used, user and system.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchCPU runs body(b.N) and reports, besides wall time, the process's CPU
// time per operation: on a machine shared with other work the wall time
// includes waiting for a core, the CPU time does not.
func benchCPU(b *testing.B, body func(n int)) {
	b.ReportAllocs()
	start := cpuNanos()
	b.ResetTimer()
	body(b.N)
	b.StopTimer()
	b.ReportMetric(float64(cpuNanos()-start)/float64(b.N), "cpu-ns/op")
}
