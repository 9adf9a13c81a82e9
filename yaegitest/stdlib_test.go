package yaegitest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/traefik/yaegi/stdlib"
)

// newerSymbols returns each standard-library package and package-level
// symbol that the Go files of dir (tests aside) use and that yaegi
// v0.16.1's symbol table, Go 1.22's standard library, lacks: Traefik's
// interpreter cannot load such code. (Methods and fields are not checked:
// the interpreter reaches them through the host binary's reflection, which
// has them.)
func newerSymbols(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The table's key of each standard package, by the name the file
		// gives it.
		keys := map[string]string{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
				continue // not the standard library
			}
			pkg := path.Base(p)
			if strings.HasPrefix(pkg, "v") && strings.Count(p, "/") > 0 {
				if _, err := strconv.Atoi(pkg[1:]); err == nil {
					pkg = path.Base(path.Dir(p)) // math/rand/v2 is package rand
				}
			}
			key := p + "/" + pkg
			if _, ok := stdlib.Symbols[key]; !ok {
				bad = append(bad, filepath.Base(name)+": package "+p)
			}
			local := pkg
			if imp.Name != nil {
				local = imp.Name.Name
			}
			keys[local] = key
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || x.Obj != nil { // x.Obj: a local name, not the package
				return true
			}
			if key, ok := keys[x.Name]; ok {
				if syms, known := stdlib.Symbols[key]; known {
					if _, ok := syms[sel.Sel.Name]; !ok {
						bad = append(bad, fset.Position(sel.Pos()).String()[len(dir)+1:]+": "+x.Name+"."+sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	return bad
}

// TestPluginStdlibGo122 fails when core or traefikplugin use a package or
// symbol of the standard library that Traefik's yaegi v0.16.1 does not know.
func TestPluginStdlibGo122(t *testing.T) {
	for _, dir := range pluginDirs {
		if bad := newerSymbols(t, filepath.Join("..", dir)); len(bad) > 0 {
			t.Errorf("%s uses what yaegi v0.16.1 (Go 1.22's standard library) lacks:\n%s", dir, strings.Join(bad, "\n"))
		}
	}
}

// TestNewerSymbolsFound checks the check on code that uses Go 1.23 and
// 1.24 additions and a generic function (which yaegi's table never has),
// next to Go 1.22 additions and a local name that shadows a package.
func TestNewerSymbolsFound(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import (
	"iter"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
)

func f(m map[string]int, s string) {
	_ = maps.Keys(m)
	_ = strings.Lines(s)
	_ = strings.Cut
	_ = reflect.TypeFor[int]()
	_ = http.FileServerFS
	_ = rand.Uint64()
	var _ iter.Seq[int]
	strings := []string{}
	_ = strings.Lines
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(newerSymbols(t, dir), "; ")
	want := "p.go: package iter; p.go:13:6: maps.Keys; p.go:14:6: strings.Lines; p.go:16:6: reflect.TypeFor"
	if got != want {
		t.Errorf("found %q, want %q", got, want)
	}
}
