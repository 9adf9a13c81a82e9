package caddyplugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// xcaddySh runs a copy of ../xcaddy.sh in dir with XCADDY_SH_DRY_RUN set,
// so that it prints the xcaddy command instead of building.
func xcaddySh(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	src, err := os.ReadFile("../xcaddy.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "xcaddy.sh"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{filepath.Join(dir, "xcaddy.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "XCADDY_SH_DRY_RUN=1")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// xcaddy.sh build passes --with plugins to xcaddy after lbpack, refuses what
// it does not know, and says what it builds; the automatic rebuild of run
// keeps the plugins of the last build.
func TestXcaddyShWith(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("xcaddy.sh needs bash")
	}
	dir := t.TempDir()
	code, out, errOut := xcaddySh(t, dir, "build", "--with", "github.com/caddy-dns/cloudflare@v0.2.1", "--with=example.com/local=../local")
	if code != 0 {
		t.Fatalf("build --with: exit %d: %s", code, errOut)
	}
	want := "--with github.com/lbpack/lbpack/caddyplugin --replace github.com/lbpack/lbpack=" + dir +
		" --with github.com/caddy-dns/cloudflare@v0.2.1 --with example.com/local=../local\n"
	if !strings.HasPrefix(out, "go run github.com/caddyserver/xcaddy/cmd/xcaddy@") || !strings.HasSuffix(out, want) {
		t.Errorf("build --with ran\n%s\nwant it to end with\n%s", out, want)
	}
	for _, w := range []string{"plus github.com/caddy-dns/cloudflare@v0.2.1, example.com/local=../local", "several minutes"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("build --with said %q, nothing of %q", errOut, w)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--with"}, "--with needs a module"},
		{[]string{"build", "--with", "--with", "x"}, "--with needs a module"},
		{[]string{"build", "--with="}, `unknown argument "--with="`},
		{[]string{"build", "--output", "x"}, `unknown argument "--output"`},
		{nil, "usage:"},
	} {
		code, out, errOut := xcaddySh(t, dir, tt.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("xcaddy.sh %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
	// No ./caddy here: run rebuilds it with the plugins the last build saved.
	if err := os.WriteFile(filepath.Join(dir, ".xcaddy-with"), []byte("example.com/saved@v1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out, _ = xcaddySh(t, dir, "version")
	if !strings.Contains(out, " --with example.com/saved@v1.0.0\n") {
		t.Errorf("the rebuild before `version` ran %q, without the saved plugin", out)
	}
}
