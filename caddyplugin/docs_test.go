package caddyplugin

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

const docsPath = "../docs/caddy.md"

// sharedSection is the docs' heading of the options every policy takes.
const sharedSection = "## Options every policy takes"

// lbpackPolicies returns this package's selection policy modules by name.
func lbpackPolicies(t *testing.T) map[string]caddy.ModuleInfo {
	t.Helper()
	out := map[string]caddy.ModuleInfo{}
	pkg := reflect.TypeOf(base{}).PkgPath()
	for _, mi := range caddy.GetModules("http.reverse_proxy.selection_policies") {
		if reflect.TypeOf(mi.New()).Elem().PkgPath() == pkg {
			out[mi.ID.Name()] = mi
		}
	}
	if len(out) == 0 {
		t.Fatal("no lbpack selection policies registered")
	}
	return out
}

// sourceWords returns every string literal of this package's code that
// could be an option name: the candidates to ask the unmarshallers about.
func sourceWords(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	word := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && word.MatchString(s) {
					seen[s] = true
				}
			}
			return true
		})
	}
	out := make([]string, 0, len(seen))
	for w := range seen {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

// unmarshal runs a policy's UnmarshalCaddyfile over "lb_policy <policy> { <line> }"
// as the reverse proxy hands it over (from the policy name on).
func unmarshal(mi caddy.ModuleInfo, line string) error {
	d := caddyfile.NewTestDispenser(mi.ID.Name() + " {\n" + line + "\n}")
	return mi.New().(caddyfile.Unmarshaler).UnmarshalCaddyfile(d)
}

// acceptedOptions asks each policy's UnmarshalCaddyfile which of the words
// it takes as a block option: the options as the code has them, whatever
// table or switch holds them.
func acceptedOptions(t *testing.T, policies map[string]caddy.ModuleInfo) map[string][]string {
	t.Helper()
	words := sourceWords(t)
	out := map[string][]string{}
	for name, mi := range policies {
		// The probe must tell an option from an unknown word.
		if err := unmarshal(mi, "lbpack_no_such_option"); err == nil || !strings.Contains(err.Error(), "unknown option") {
			t.Fatalf("lb_policy %s: an unknown option gave %v, not an \"unknown option\" error: the probe below cannot tell options apart any more", name, err)
		}
		for _, w := range words {
			if err := unmarshal(mi, w); err == nil || !strings.Contains(err.Error(), "unknown option") {
				out[name] = append(out[name], w)
			}
		}
		if len(out[name]) == 0 {
			t.Fatalf("lb_policy %s: no option accepted", name)
		}
	}
	return out
}

// section returns the text under heading up to the next heading of the same
// or a higher level, "" when there is no such heading.
func section(doc, heading string) string {
	level := strings.IndexByte(heading, ' ')
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if l != heading {
			continue
		}
		var out []string
		fence := false
		for _, m := range lines[i+1:] {
			if strings.HasPrefix(m, "```") {
				fence = !fence
			}
			if !fence && strings.HasPrefix(m, "#") {
				if n := strings.IndexByte(m, ' '); n > 0 && n <= level && strings.Trim(m[:n], "#") == "" {
					break
				}
			}
			out = append(out, m)
		}
		return strings.Join(out, "\n")
	}
	return ""
}

// documents reports whether a section describes option as Caddy's docs
// do: a list item starting with the option in bold.
func documents(sec, option string) bool {
	return regexp.MustCompile(`(?m)^\s*- \*\*` + regexp.QuoteMeta(option) + `\*\*`).MatchString(sec)
}

// Every Caddyfile option a policy's UnmarshalCaddyfile accepts, and every
// policy, is documented in docs/caddy.md.
func TestDocsCoverCaddyfileOptions(t *testing.T) {
	raw, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	shared := section(doc, sharedSection)
	if shared == "" {
		t.Fatalf("%s has no section %q", docsPath, sharedSection)
	}
	policies := lbpackPolicies(t)
	missing := map[string][]string{} // option -> the policies whose docs lack it
	for name, opts := range acceptedOptions(t, policies) {
		own := section(doc, "### "+name)
		if own == "" {
			t.Errorf("%s has no section \"### %s\" for lb_policy %s", docsPath, name, name)
			continue
		}
		for _, o := range opts {
			if !documents(own, o) && !documents(shared, o) {
				missing[o] = append(missing[o], name)
			}
		}
	}
	for o, names := range missing {
		sort.Strings(names)
		where := "### " + strings.Join(names, ", ### ")
		if len(names) == len(policies) {
			where = sharedSection
		}
		t.Errorf("%s does not document the Caddyfile option %q, which lb_policy %s accepts: add a list item \"- **%s** ...\" (what it does, its default, an example) under %s",
			docsPath, o, strings.Join(names, ", "), o, where)
	}
}

// jsonFields returns the JSON field paths of a module type: "name",
// "upstreams.<address>.weight", ...
func jsonFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type, prefix)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		out = append(out, prefix+name)
		if f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type.Elem(), prefix+name+".<address>.")...)
		}
	}
	return out
}

// Every JSON field of every policy module is in docs/caddy.md's JSON table.
func TestDocsCoverJSONFields(t *testing.T) {
	raw, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	table := section(string(raw), "## JSON")
	if table == "" {
		t.Fatalf("%s has no section \"## JSON\"", docsPath)
	}
	for _, mi := range lbpackPolicies(t) {
		for _, f := range jsonFields(reflect.TypeOf(mi.New()).Elem(), "") {
			if !strings.Contains(table, "| `"+f+"` |") {
				t.Errorf("%s: the JSON table lacks a row \"| `%s` | ...\" for the field %s of %s", docsPath, f, f, mi.ID)
			}
		}
	}
}

// Every complete example in docs/caddy.md adapts and loads: Caddyfile
// blocks (a reverse_proxy, or an lb_policy put into one over three
// upstreams) and the JSON handler.
func TestDocsExamplesLoad(t *testing.T) {
	raw, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(caddyfile|json)\n(.*?)```").FindAllStringSubmatch(string(raw), -1)
	n := 0
	for _, b := range blocks {
		lang, body := b[1], b[2]
		if strings.Contains(body, "<") || strings.Contains(body, "...") {
			continue // a syntax block, or a shortened one
		}
		n++
		var cfg []byte
		switch {
		case lang == "json":
			var handler map[string]any
			if err := json.Unmarshal([]byte(body), &handler); err != nil {
				t.Errorf("JSON example %s: %v", body, err)
				continue
			}
			cfg, _ = json.Marshal(map[string]any{"apps": map[string]any{"http": map[string]any{"servers": map[string]any{
				"docs": map[string]any{"listen": []string{"127.0.0.1:0"}, "routes": []any{map[string]any{"handle": []any{handler}}}},
			}}}})
		default:
			body = strings.TrimSpace(body)
			if strings.HasPrefix(body, "lb_policy") {
				body = "reverse_proxy 10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 {\n" + body + "\n}"
			}
			if !strings.HasPrefix(body, "reverse_proxy") {
				t.Errorf("Caddyfile example neither a reverse_proxy nor an lb_policy:\n%s", body)
				continue
			}
			cfg, err = adapt(t, site(strings.TrimPrefix(body, "reverse_proxy ")))
			if err != nil {
				t.Errorf("example\n%s\ndoes not adapt: %v", body, err)
				continue
			}
		}
		if err := validate(cfg); err != nil {
			t.Errorf("example\n%s\ndoes not load: %v", body, err)
		}
	}
	if n < 10 {
		t.Errorf("only %d complete examples found in %s", n, docsPath)
	}
}
