package yaegitest

import (
	"strings"
	"testing"

	"github.com/lbpack/lbpack/yaegitest/driver"
)

// TestStickyInterpreted runs package sticky and core's bound picks under
// yaegi, as the Traefik plugin does, and requires the compiled run's
// output line for line.
func TestStickyInterpreted(t *testing.T) {
	i := newInterp(t, coreDirs, modulePath+"/yaegitest/driver")
	run, ok := eval(t, i, "driver.Sticky").(func() string)
	if !ok {
		t.Fatalf("driver.Sticky has type %T", eval(t, i, "driver.Sticky"))
	}
	want := driver.Sticky()
	got := run()
	if got != want {
		t.Errorf("interpreted:\n%s\ncompiled:\n%s", got, want)
	}
	for _, line := range []string{
		"srv=id; expires=Thu, 03-Dec-26 11:15:44 GMT; max-age=129600; httponly; samesite=Lax; path=/ <nil>",
		`parameter "expires" is duplicate`,
		"Mon, 02-Jan-2040 03:04:05 GMT",
		"query:route a%31", "cookie:srv b1", "upstream_cookie:sess S1",
		"2b", // S1 pushed out by S3 (max 2), S2 found at 2 s, expired at 3 s
		"0 2 1 0 2 0 1 0",
	} {
		if !strings.Contains(want, line) {
			t.Errorf("compiled output lacks %q:\n%s", line, want)
		}
	}
}
