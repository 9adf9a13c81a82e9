package conformance

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNginxCLI checks the command line users and scripts run: for each
// method, "lbsim pick" prints the addresses nginx picked, line for line.
func TestNginxCLI(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 1))
	var ups []*upstream
	for i := 0; i < 4; i++ {
		sp := rrSpec{primaries: 2 + r.IntN(7)}
		if i%2 == 1 {
			sp.primDown = someDown(r, sp.primaries)
		}
		ups = append(ups, randomRR(r, fmt.Sprintf("clismooth%d", i), smoothRR, sp))
	}
	ups = append(ups, randomRR(r, "clileast", leastConn, rrSpec{primaries: 5, primDown: 1}))
	for i := 0; i < 2; i++ {
		n := 3 + r.IntN(6)
		down := i * someDown(r, n)
		ups = append(ups,
			randomHashed(r, fmt.Sprintf("cliiphash%d", i), ipHash, n, down, false, clientIPs(r, 100)),
			randomHashed(r, fmt.Sprintf("cliketama%d", i), hashKetama, n, down, false, argKeys(r, 100)),
			randomHashed(r, fmt.Sprintf("climodulo%d", i), hashModulo, n, down, false, argKeys(r, 100)))
	}
	lbsim := buildLbsim(t)
	n := startNginx(t, ups)
	compared := 0
	for _, u := range ups {
		got, err := n.sequence(u)
		if err != nil {
			t.Fatalf("%v\n%s", err, u.describe(n.addrs))
		}
		args := []string{"pick", "--strategy", u.method.strategy, "--backends", ""}
		var backends, down []string
		for _, s := range u.servers {
			backends = append(backends, n.addrs[s.slot]+"="+strconv.Itoa(s.weight))
			if s.down {
				down = append(down, n.addrs[s.slot])
			}
		}
		args[len(args)-1] = strings.Join(backends, ",")
		if len(down) > 0 {
			args = append(args, "--down", strings.Join(down, ","))
		}
		if u.method.hashMode != "" {
			args = append(args, "--hash-mode", u.method.hashMode)
		}
		var stdin string
		if u.method.keyed == noKey {
			args = append(args, "-n", strconv.Itoa(len(u.keys)))
		} else {
			stdin = strings.Join(u.keys, "\n") + "\n"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, lbsim, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Errorf("%s: lbsim %s: %v: %s", u.name, strings.Join(args, " "), err, stderr.String())
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) != len(got) {
			t.Errorf("%s: lbsim printed %d lines for %d requests", u.name, len(lines), len(got))
			continue
		}
		compared += len(got)
		for i, line := range lines {
			if want := n.addrs[u.servers[got[i]].slot]; line != want {
				t.Errorf("%s: request %d: nginx chose %s, lbsim printed %s\n%s\nlbsim %s",
					u.name, i, want, line, u.describe(n.addrs), strings.Join(args, " "))
				break
			}
		}
	}
	report(t, ups, compared)
}

// buildLbsim builds cmd/lbsim into the test's temporary directory.
func buildLbsim(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build cmd/lbsim: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "lbsim")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, "github.com/lbpack/lbpack/cmd/lbsim").CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/lbsim: %v\n%s", err, out)
	}
	return bin
}
