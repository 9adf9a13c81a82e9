package yaegitest

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/mitchellh/mapstructure"
	"github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
	"gopkg.in/yaml.v3"
)

// pluginDirs is what Traefik's GOPATH holds for the plugin.
var pluginDirs = []string{"core", "sticky", "traefikplugin"}

const pluginImport = modulePath + "/traefikplugin"

// loader loads the plugin as Traefik's yaegi middleware builder does:
// CreateConfig, the settings decoded over its result by mapstructure with
// weak typing and comma-split slices, then New.
type loader struct {
	i            *interp.Interpreter
	fnNew        reflect.Value
	createConfig reflect.Value
	// What the plugin writes to the interpreter's standard output and
	// error, which Traefik logs at DEBUG and at ERROR.
	stdout, stderr *testWriter
}

// loadPlugin interprets the plugin from a fresh GOPATH. extra files, by
// name, are added to the interpreted plugin package (benchmarks use one to
// stub the proxies out).
func loadPlugin(tb testing.TB, extra map[string]string) *loader {
	tb.Helper()
	dir := goPath(tb, pluginDirs...)
	for name, src := range extra {
		if err := os.WriteFile(filepath.Join(dir, "src", modulePath, "traefikplugin", name), []byte(src), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	stdout, stderr := &testWriter{tb: tb, name: "stdout"}, &testWriter{tb: tb, name: "stderr"}
	tb.Cleanup(stdout.close)
	tb.Cleanup(stderr.close)
	i := interp.New(interp.Options{GoPath: dir, Stdout: stdout, Stderr: stderr})
	if err := i.Use(stdlib.Symbols); err != nil {
		tb.Fatal(err)
	}
	if _, err := i.Eval(`import "` + pluginImport + `"`); err != nil {
		tb.Fatalf("yaegi: import %s: %v", pluginImport, err)
	}
	l := &loader{i: i, stdout: stdout, stderr: stderr}
	var err error
	if l.fnNew, err = i.Eval("traefikplugin.New"); err != nil {
		tb.Fatal(err)
	}
	if l.createConfig, err = i.Eval("traefikplugin.CreateConfig"); err != nil {
		tb.Fatal(err)
	}
	return l
}

// testWriter sends the interpreted program's output to the test log, as
// Traefik sends it to its own log (each write one entry), and keeps each
// write; output after the test is dropped (a health checker may still be
// finishing a probe).
type testWriter struct {
	tb     testing.TB
	name   string
	mu     sync.Mutex
	closed bool
	writes []string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.tb.Logf("plugin %s: %s", w.name, p)
		w.writes = append(w.writes, string(p))
	}
	return len(p), nil
}

// lines returns the writes so far.
func (w *testWriter) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// newHandler decodes the YAML settings document and builds the middleware.
func (l *loader) newHandler(ctx context.Context, doc, name string) (http.Handler, error) {
	settings, err := settingsMap(doc)
	if err != nil {
		return nil, err
	}
	return l.newHandlerMap(ctx, settings, name)
}

// newHandlerMap builds the middleware from settings shaped as Traefik's
// dynamic configuration hands them over, in front of noop@internal.
func (l *loader) newHandlerMap(ctx context.Context, settings map[string]any, name string) (http.Handler, error) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot) // noop@internal's answer
	})
	return l.newHandlerNext(ctx, settings, name, next)
}

// newHandlerNext is newHandlerMap in front of the handler next.
func (l *loader) newHandlerNext(ctx context.Context, settings map[string]any, name string, next http.Handler) (http.Handler, error) {
	cfg := l.createConfig.Call(nil)[0]
	if len(settings) > 0 {
		dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
			DecodeHook:       mapstructure.StringToSliceHookFunc(","),
			WeaklyTypedInput: true,
			Result:           cfg.Interface(),
		})
		if err != nil {
			return nil, err
		}
		if err := dec.Decode(settings); err != nil {
			return nil, err
		}
	}
	out := l.fnNew.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(next), cfg, reflect.ValueOf(name)})
	if e := out[1].Interface(); e != nil {
		return nil, e.(error)
	}
	return out[0].Interface().(http.Handler), nil
}

// settingsMap parses a YAML mapping into what Traefik's configuration
// loader produces: maps and lists as they are, every scalar a string.
func settingsMap(doc string) (map[string]any, error) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		return nil, err
	}
	if len(n.Content) == 0 {
		return map[string]any{}, nil
	}
	m, _ := stringly(n.Content[0]).(map[string]any)
	return m, nil
}

func stringly(n *yaml.Node) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for k := 0; k+1 < len(n.Content); k += 2 {
			m[n.Content[k].Value] = stringly(n.Content[k+1])
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			l = append(l, stringly(c))
		}
		return l
	case yaml.AliasNode:
		return stringly(n.Alias)
	default:
		return n.Value
	}
}
