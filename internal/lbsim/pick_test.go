package lbsim

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

// addrs names backends a, b, c, ... as 127.0.0.1:8081, :8082, ...
func addr(name byte) string { return fmt.Sprintf("127.0.0.1:%d", 8081+int(name-'a')) }

// lines turns "a b c" into the addresses lbsim prints, one per line.
func lines(names string) string {
	var b strings.Builder
	for _, n := range strings.Fields(names) {
		b.WriteString(addr(n[0]) + "\n")
	}
	return b.String()
}

func TestPickSequences(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"smooth_wrr 5,3,2", []string{"--strategy", "smooth_wrr", "--backends", "127.0.0.1:8081=5,127.0.0.1:8082=3,127.0.0.1:8083=2"},
			"a b c a a b a c b a"},
		{"smooth_wrr 5,3,2 twice over", []string{"--strategy", "smooth_wrr", "--backends", "127.0.0.1:8081=5,127.0.0.1:8082=3,127.0.0.1:8083=2", "-n", "20"},
			"a b c a a b a c b a a b c a a b a c b a"},
		{"smooth_wrr 5,1,1", []string{"--strategy", "smooth_wrr", "--backends", "127.0.0.1:8081=5,127.0.0.1:8082,127.0.0.1:8083=1", "-n", "7"},
			"a a b a c a a"},
		{"smooth_wrr b down", []string{"--strategy", "smooth_wrr", "--backends", "127.0.0.1:8081=5,127.0.0.1:8082=3,127.0.0.1:8083=2", "--down", "127.0.0.1:8082", "-n", "7"},
			"a c a a a c a"},
		{"gcd_wrr 6,3,1", []string{"--strategy", "gcd_wrr", "--backends", "127.0.0.1:8081=6,127.0.0.1:8082=3,127.0.0.1:8083=1"},
			"a a a a b a b a b c"},
		{"smooth_wrr backup unused while a primary is up", []string{"--strategy", "smooth_wrr", "--backends", "127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083", "--backup", "127.0.0.1:8083", "-n", "4"},
			"a b a b"},
		{"smooth_wrr backup when every primary is down", []string{"--strategy", "smooth_wrr", "--backends", "127.0.0.1:8081,127.0.0.1:8082=2,127.0.0.1:8083", "--backup", "127.0.0.1:8082,127.0.0.1:8083", "--down", "127.0.0.1:8081", "-n", "3"},
			"b c b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := lbsim(t, "", append([]string{"pick"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit status %d: %s", code, stderr)
			}
			if want := lines(tt.want); stdout != want {
				t.Errorf("got\n%swant\n%s", stdout, want)
			}
		})
	}
}

// A down backend is never picked, whatever the strategy.
func TestPickDownExcluded(t *testing.T) {
	const backends = "127.0.0.1:8081=5,127.0.0.1:8082=3,127.0.0.1:8083=2"
	var keys string
	for i := range 200 {
		keys += fmt.Sprintf("10.%d.%d.7\n", i%251, i/7)
	}
	for _, s := range core.Strategies() {
		t.Run(s, func(t *testing.T) {
			code, stdout, stderr := lbsim(t, keys, "pick", "--strategy", s, "--backends", backends, "--down", "127.0.0.1:8082", "-n", "200", "--seed", "7")
			if code != 0 {
				t.Fatalf("exit status %d: %s", code, stderr)
			}
			got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if len(got) != 200 {
				t.Fatalf("%d lines, want 200", len(got))
			}
			seen := map[string]int{}
			for _, a := range got {
				seen[a]++
			}
			if seen[addr('b')] != 0 {
				t.Errorf("down backend picked %d times", seen[addr('b')])
			}
			if seen[addr('a')]+seen[addr('c')] != 200 {
				t.Errorf("picks %v: want only %s and %s", seen, addr('a'), addr('c'))
			}
		})
	}
}

// ip_hash and url_hash read one key per line and print one address per key:
// the address core's Pick chooses for that key, the same on every run.
func TestPickKeys(t *testing.T) {
	const backends = "127.0.0.1:8081=1,127.0.0.1:8082=2,127.0.0.1:8083=1,[::1]:8084=3"
	var ips, urls []string
	for i := range 300 {
		ips = append(ips, fmt.Sprintf("%d.%d.%d.%d", 1+i%200, i*7%256, i*13%256, i%256))
		urls = append(urls, fmt.Sprintf("/item/%d?x=%d", i, i*i))
	}
	ips = append(ips, "2001:db8::1", "::1", "192.168.1.10")
	urls = append(urls, "", " spaced key ", "ü")
	tests := []struct {
		strategy, mode string
		keys           []string
	}{
		{"ip_hash", "", ips},
		{"url_hash", "", urls},
		{"url_hash", "ketama", urls},
		{"url_hash", "modulo", urls},
		{"url_hash", "maglev", urls},
		{"url_hash", "bounded", urls},
	}
	for _, tt := range tests {
		t.Run(tt.strategy+" "+tt.mode, func(t *testing.T) {
			entries, addrs, err := addresses(backends)
			if err != nil {
				t.Fatal(err)
			}
			var c common
			c.hashMode = tt.mode
			cfg, err := c.config(tt.strategy, entries, addrs)
			if err != nil {
				t.Fatal(err)
			}
			b, err := core.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			for _, k := range tt.keys {
				i, tk := core.Pick(b, k, core.Filter{})
				if i < 0 {
					t.Fatalf("core Pick(%q): none", k)
				}
				if tk != 0 {
					core.Done(b, i, tk, 0, false)
				}
				want.WriteString(b.Backend(i).Address + "\n")
			}
			args := []string{"pick", "--strategy", tt.strategy, "--backends", backends}
			if tt.mode != "" {
				args = append(args, "--hash-mode", tt.mode)
			}
			input := strings.Join(tt.keys, "\n") + "\n"
			for run := range 2 {
				code, stdout, stderr := lbsim(t, input, args...)
				if code != 0 {
					t.Fatalf("exit status %d: %s", code, stderr)
				}
				if stdout != want.String() {
					t.Errorf("run %d: lbsim and core disagree:\n%s\nwant\n%s", run, stdout, want.String())
				}
			}
		})
	}
}

// Lines end at "\n" or "\r\n", and a last line without a newline is a key.
func TestPickKeyLines(t *testing.T) {
	const backends = "127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083"
	one := func(input string) string {
		t.Helper()
		code, stdout, stderr := lbsim(t, input, "pick", "--strategy", "url_hash", "--hash-mode", "modulo", "--backends", backends)
		if code != 0 {
			t.Fatalf("exit status %d: %s", code, stderr)
		}
		return stdout
	}
	want := one("k1\nk2\nk3\n")
	if n := strings.Count(want, "\n"); n != 3 {
		t.Fatalf("%d lines for 3 keys", n)
	}
	for _, in := range []string{"k1\r\nk2\r\nk3\r\n", "k1\nk2\nk3"} {
		if got := one(in); got != want {
			t.Errorf("input %q: got %q, want %q", in, got, want)
		}
	}
	if got := one(""); got != "" {
		t.Errorf("no keys: got %q", got)
	}
}

// nginx's ip_hash worked by hand for 192.168.1.10 over three backends of
// weight 1: hash = 89, then (hash*113 + octet) % 6271 over 192, 168, 1 gives
// 3978, 4441, 154; 154 % 3 = 1 picks the second backend. IPs sharing the
// first three octets share the backend.
func TestPickIPHashByHand(t *testing.T) {
	code, stdout, stderr := lbsim(t, "192.168.1.10\n192.168.1.200\n", "pick", "--strategy", "ip_hash", "--backends", "127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083")
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	if want := lines("b b"); stdout != want {
		t.Errorf("got %q, want %q", stdout, want)
	}
}

// With a seed, the random strategies repeat their picks.
func TestPickSeeded(t *testing.T) {
	for _, s := range []string{"random", "weighted_random"} {
		args := []string{"pick", "--strategy", s, "--backends", "127.0.0.1:8081=5,127.0.0.1:8082=3,127.0.0.1:8083=2", "-n", "50", "--seed", "42"}
		_, first, _ := lbsim(t, "", args...)
		code, second, stderr := lbsim(t, "", args...)
		if code != 0 {
			t.Fatalf("%s: exit status %d: %s", s, code, stderr)
		}
		if first != second || strings.Count(first, "\n") != 50 {
			t.Errorf("%s: seeded runs differ or wrong length:\n%s\n%s", s, first, second)
		}
	}
}

// A script may send one key and wait for its answer before sending the next:
// pick answers every key it has read before it waits for more input.
func TestPickKeysInteractive(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Run([]string{"pick", "--strategy", "ip_hash", "--backends", "127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083"}, inR, outW, io.Discard)
		outW.Close()
	}()
	answers := bufio.NewReader(outR)
	for _, key := range []string{"192.168.1.10", "10.0.0.1", "192.168.1.99"} {
		if _, err := io.WriteString(inW, key+"\n"); err != nil {
			t.Fatal(err)
		}
		line := make(chan string, 1)
		go func() {
			l, _ := answers.ReadString('\n')
			line <- l
		}()
		select {
		case l := <-line:
			if !strings.HasPrefix(l, "127.0.0.1:808") {
				t.Fatalf("key %s: answer %q", key, l)
			}
		case <-time.After(5 * time.Second):
			inW.Close()
			outR.Close()
			t.Fatalf("key %s: no answer within 5s", key)
		}
	}
	inW.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit status %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pick did not end after its input ended")
	}
}

// --stagger starts the schedule at a point of its period chosen by the
// random source: the picks are a rotation of the unstaggered period.
func TestPickStagger(t *testing.T) {
	period := strings.Fields("a b c a a b a c b a")
	starts := map[int]bool{}
	for seed := range 8 {
		code, stdout, stderr := lbsim(t, "", "pick", "--strategy", "smooth_wrr", "--stagger", "--seed", fmt.Sprint(seed),
			"--backends", "127.0.0.1:8081=5,127.0.0.1:8082=3,127.0.0.1:8083=2")
		if code != 0 {
			t.Fatalf("exit status %d: %s", code, stderr)
		}
		found := -1
		for s := range period {
			rotated := append(append([]string{}, period[s:]...), period[:s]...)
			if stdout == lines(strings.Join(rotated, " ")) {
				found = s
				break
			}
		}
		if found < 0 {
			t.Fatalf("seed %d: %q is no rotation of %v", seed, stdout, period)
		}
		starts[found] = true
	}
	if len(starts) < 2 {
		t.Errorf("8 seeds all started at the same point %v", starts)
	}
}

// pick takes bare names as trace does, and prints them back; a bare name
// is the address NAME:80 to the hash strategies.
func TestPickBareNames(t *testing.T) {
	tests := []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"--strategy", "smooth_wrr", "--backends", "a=5,b=3,c=2"}, "", "a b c a a b a c b a"},
		{[]string{"--strategy", "smooth_wrr", "--backends", "a=5,b=3,c=2", "--down", "b", "-n", "7"}, "", "a c a a a c a"},
		{[]string{"--strategy", "gcd_wrr", "--backends", "web-1=6,10.0.0.2:80=3,web_3=1"}, "", "web-1 web-1 web-1 web-1 10.0.0.2:80 web-1 10.0.0.2:80 web-1 10.0.0.2:80 web_3"},
		{[]string{"--strategy", "smooth_wrr", "--backends", "a,b,c", "--backup", "c", "--down", "a", "-n", "3"}, "", "b b b"},
	}
	for _, tt := range tests {
		code, stdout, stderr := lbsim(t, tt.stdin, append([]string{"pick"}, tt.args...)...)
		if code != 0 {
			t.Fatalf("pick %v: exit status %d: %s", tt.args, code, stderr)
		}
		if got := strings.Join(strings.Fields(stdout), " "); got != tt.want {
			t.Errorf("pick %v: got %s, want %s", tt.args, got, tt.want)
		}
	}
	// The hash strategies map keys for "a" exactly as for "a:80".
	var keys strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&keys, "/k/%d\n", i)
	}
	for _, mode := range []string{"ketama", "maglev", "modulo"} {
		_, named, _ := lbsim(t, keys.String(), "pick", "--strategy", "url_hash", "--hash-mode", mode, "--backends", "a=2,b,c")
		_, addressed, _ := lbsim(t, keys.String(), "pick", "--strategy", "url_hash", "--hash-mode", mode, "--backends", "a:80=2,b:80,c:80")
		if want := strings.NewReplacer(":80", "").Replace(addressed); named != want || strings.Count(named, "\n") != 200 {
			t.Errorf("url_hash %s: by names\n%.60s...\nby addresses\n%.60s...", mode, named, want)
		}
	}
}

// Caddy's policy names pick exactly as core's names do.
func TestPickCaddyNames(t *testing.T) {
	for _, tt := range []struct{ caddy, core, stdin string }{
		{"weighted_least_conn", "least_conn", ""},
		{"nginx_ip_hash", "ip_hash", "192.0.2.1\n198.51.100.7\n203.0.113.9\n10.1.2.3\n2001:db8::1\n"},
	} {
		args := []string{"--backends", "a=5,b=3,c=2", "-n", "10"}
		code, byCaddy, stderr := lbsim(t, tt.stdin, append([]string{"pick", "--strategy", tt.caddy}, args...)...)
		if code != 0 {
			t.Fatalf("%s: exit status %d: %s", tt.caddy, code, stderr)
		}
		_, byCore, _ := lbsim(t, tt.stdin, append([]string{"pick", "--strategy", tt.core}, args...)...)
		if byCaddy != byCore || byCaddy == "" {
			t.Errorf("%s picked\n%s%s picked\n%s", tt.caddy, byCaddy, tt.core, byCore)
		}
	}
}
