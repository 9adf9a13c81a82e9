package conformance

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// rrSpec describes a random upstream for the round robin methods.
type rrSpec struct {
	primaries, primDown int // primDown == primaries: every primary down
	backups, backupDown int
	equal               bool // one weight for all
}

// randomRR builds an upstream of spec's shape with weights 1..10, servers in
// random order (backups interleaved with primaries), and 2 or 3 periods of
// requests: the sum of the weights of the group nginx will use.
func randomRR(r *rand.Rand, name string, m method, sp rrSpec) *upstream {
	n := sp.primaries + sp.backups
	slots := r.Perm(poolSize)[:n]
	w := weights(r, n, sp.equal)
	servers := make([]server, n)
	for i := range servers {
		servers[i] = server{slot: slots[i], weight: w[i], backup: i >= sp.primaries}
	}
	for _, i := range r.Perm(sp.primaries)[:sp.primDown] {
		servers[i].down = true
	}
	for _, i := range r.Perm(sp.backups)[:sp.backupDown] {
		servers[sp.primaries+i].down = true
	}
	r.Shuffle(n, func(i, j int) { servers[i], servers[j] = servers[j], servers[i] })
	period := 0
	for _, s := range servers {
		if !s.down && !s.backup {
			period += s.weight
		}
	}
	if period == 0 {
		for _, s := range servers {
			if !s.down {
				period += s.weight
			}
		}
	}
	return &upstream{name: name, method: m, servers: servers, keys: make([]string, (2+r.IntN(2))*period)}
}

// randomHashed builds a hash upstream of n servers, down of them down, with
// the given request keys.
func randomHashed(r *rand.Rand, name string, m method, n, down int, equal bool, keys []string) *upstream {
	slots := r.Perm(poolSize)[:n]
	w := weights(r, n, equal)
	servers := make([]server, n)
	for i := range servers {
		servers[i] = server{slot: slots[i], weight: w[i]}
	}
	for _, i := range r.Perm(n)[:down] {
		servers[i].down = true
	}
	return &upstream{name: name, method: m, servers: servers, keys: keys}
}

// mostlyDown builds an upstream of 8 servers where six heavy ones are down
// and two light ones (weights 1 and 2) are up: a key finds a live server
// within 20 tries only about two times in three, and the rest fall back to
// round robin, whose state then matters.
func mostlyDown(r *rand.Rand, name string, m method, keys []string) *upstream {
	slots := r.Perm(poolSize)[:8]
	servers := make([]server, 8)
	for i := range servers {
		servers[i] = server{slot: slots[i], weight: 10, down: true}
	}
	servers[0] = server{slot: slots[0], weight: 1}
	servers[1] = server{slot: slots[1], weight: 2}
	r.Shuffle(8, func(i, j int) { servers[i], servers[j] = servers[j], servers[i] })
	return &upstream{name: name, method: m, servers: servers, keys: keys}
}

func weights(r *rand.Rand, n int, equal bool) []int {
	w := make([]int, n)
	same := 1 + r.IntN(10)
	for i := range w {
		w[i] = same
		if !equal {
			w[i] = 1 + r.IntN(10)
		}
	}
	return w
}

func fixedRR(name string, m method, w []int, requests int) *upstream {
	u := &upstream{name: name, method: m, keys: make([]string, requests)}
	for i, x := range w {
		u.servers = append(u.servers, server{slot: i, weight: x})
	}
	return u
}

// clientIPs returns random client addresses: IPv4 (some sharing their first
// three octets, which alone count for nginx), IPv6 in compressed form,
// IPv4-mapped IPv6, and IPv6 written out in full.
func clientIPs(r *rand.Rand, count int) []string {
	var keys []string
	var v4 [][4]byte
	for len(keys) < count {
		switch x := r.IntN(20); {
		case x < 9:
			a := [4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}
			v4 = append(v4, a)
			keys = append(keys, netip.AddrFrom4(a).String())
		case x < 11 && len(v4) > 0:
			a := v4[r.IntN(len(v4))]
			a[3] = byte(r.IntN(256))
			keys = append(keys, netip.AddrFrom4(a).String())
		case x < 18:
			keys = append(keys, randomIPv6(r).String())
		case x < 19:
			// IPv4-mapped IPv6 is IPv6 to nginx: all sixteen bytes count.
			a := [4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}
			keys = append(keys, "::ffff:"+netip.AddrFrom4(a).String())
		default:
			b := randomIPv6(r).As16()
			var groups []string
			for i := 0; i < 16; i += 2 {
				groups = append(groups, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
			}
			keys = append(keys, strings.Join(groups, ":"))
		}
	}
	return keys
}

// randomIPv6 returns a global-looking IPv6 address with some zero groups, so
// that its text form has "::" runs of several lengths.
func randomIPv6(r *rand.Rand) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0x20, byte(r.IntN(256))
	for i := 2; i < 16; i += 2 {
		if r.IntN(3) == 0 {
			continue
		}
		b[i], b[i+1] = byte(r.IntN(256)), byte(r.IntN(256))
	}
	return netip.AddrFrom16(b)
}

// argKeys returns random raw query values: unreserved characters, the
// punctuation a query may hold, percent escapes (nginx hashes them
// undecoded), a few long keys and a few empty ones.
func argKeys(r *rand.Rand, count int) []string {
	const plain = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
	const punct = "!$'()*+,;:@/?="
	escapes := []string{"%2F", "%20", "%E2%82%AC", "%25", "%26", "%3d", "%00"}
	keys := make([]string, 0, count)
	for len(keys) < count {
		length := 1 + r.IntN(24)
		switch r.IntN(25) {
		case 0:
			length = 0
		case 1:
			length = 100 + r.IntN(100)
		}
		var b strings.Builder
		for b.Len() < length {
			switch x := r.IntN(20); {
			case x < 14:
				b.WriteByte(plain[r.IntN(len(plain))])
			case x < 17:
				b.WriteByte(punct[r.IntN(len(punct))])
			default:
				b.WriteString(escapes[r.IntN(len(escapes))])
			}
		}
		keys = append(keys, b.String())
	}
	return keys
}

// TestNginxHarness checks the harness against nginx alone: the worked
// examples of nginx's smooth round robin come back in order, the X-Real-IP
// header sets the client address, and the query argument arrives raw.
func TestNginxHarness(t *testing.T) {
	examples := []struct {
		w    []int
		want string
	}{
		{[]int{5, 3, 2}, "a b c a a b a c b a a b c a a b a c b a"},
		{[]int{5, 1, 1}, "a a b a c a a a a b a c a a"},
		// Worked by hand this is also what the algorithm gives: the tie at
		// request 6 (6 against 6) goes to the earlier server.
		{[]int{7, 5}, "a b a b a a b a b a b a"},
	}
	var ups []*upstream
	for i, ex := range examples {
		ups = append(ups, fixedRR(fmt.Sprintf("example%d", i), smoothRR, ex.w, len(strings.Fields(ex.want))))
	}
	n := startNginx(t, ups)
	for i, ex := range examples {
		seq, err := n.sequence(ups[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(strings.Fields(letters(seq)), " "); got != ex.want {
			t.Errorf("weights %v: nginx gave %s, want %s", ex.w, got, ex.want)
		}
	}

	r := rand.New(rand.NewPCG(7, 7))
	for _, ip := range append([]string{"192.0.2.1", "2001:db8::1", "::ffff:198.51.100.7"}, clientIPs(r, 20)...) {
		body, _, err := n.get("/remote_addr", "", ip)
		if err != nil {
			t.Fatal(err)
		}
		got, err1 := netip.ParseAddr(body)
		want, err2 := netip.ParseAddr(ip)
		if err1 != nil || err2 != nil || got != want {
			t.Errorf("X-Real-IP %q: nginx saw client %q", ip, body)
		}
	}
	for _, key := range append([]string{"", "a%2Fb", "x+y", "%E2%82%AC=1"}, argKeys(r, 20)...) {
		body, _, err := n.get("/arg_k", "k="+key, "")
		if err != nil {
			t.Fatal(err)
		}
		if body != key {
			t.Errorf("k=%s: nginx's $arg_k is %q", key, body)
		}
	}
}

// TestNginxIPv6Backends compares the methods whose choice depends on the
// backends' addresses with backends on [::1] among those on 127.0.0.1:
// ketama hashes a server's name as written, "[::1]:PORT" with its brackets.
func TestNginxIPv6Backends(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 1))
	var ups []*upstream
	for i := 0; i < 6; i++ {
		n := 2 + r.IntN(7)
		ups = append(ups,
			randomHashed(r, fmt.Sprintf("v6ketama%d", i), hashKetama, n, i%2*someDown(r, n), false, argKeys(r, 100)),
			randomHashed(r, fmt.Sprintf("v6modulo%d", i), hashModulo, n, i%2*someDown(r, n), false, argKeys(r, 100)),
			randomRR(r, fmt.Sprintf("v6smooth%d", i), smoothRR, rrSpec{primaries: n}))
	}
	for _, u := range ups {
		// About half of each case's servers move to their [::1] twins.
		for i := range u.servers {
			if r.IntN(2) == 0 {
				u.servers[i].slot += poolSize
			}
		}
	}
	report(t, ups, conform(t, ups))
}

// TestNginxSmoothWRR compares smooth_wrr with nginx's default method: the
// worked examples and 36 random weight sets, a third of them with servers
// down and some with backups that must stay unused.
func TestNginxSmoothWRR(t *testing.T) {
	ups := []*upstream{
		fixedRR("smooth_532", smoothRR, []int{5, 3, 2}, 30),
		fixedRR("smooth_511", smoothRR, []int{5, 1, 1}, 21),
		fixedRR("smooth_75", smoothRR, []int{7, 5}, 36),
		// Weights with a common factor, and a period longer than a few.
		fixedRR("smooth_203050", smoothRR, []int{20, 30, 50}, 200),
		fixedRR("smooth_12618624", smoothRR, []int{12, 6, 18, 6, 24}, 132),
		fixedRR("smooth_1001", smoothRR, []int{100, 1}, 202),
		fixedRR("smooth_equal", smoothRR, []int{4, 4, 4, 4, 4, 4, 4, 4}, 64),
	}
	r := rand.New(rand.NewPCG(2, 1))
	for i := 0; i < 36; i++ {
		sp := rrSpec{primaries: 2 + r.IntN(7), equal: i%7 == 3}
		if i%3 == 1 {
			sp.primDown = someDown(r, sp.primaries)
		}
		if i%6 == 5 {
			sp.backups = 1 + r.IntN(2)
		}
		ups = append(ups, randomRR(r, fmt.Sprintf("smooth%02d", i), smoothRR, sp))
	}
	report(t, ups, conform(t, ups))
}

// TestNginxBackup compares picks when every primary server is down: nginx
// shares out among the live backups with the smooth algorithm.
func TestNginxBackup(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	var ups []*upstream
	for i := 0; i < 8; i++ {
		sp := rrSpec{primaries: 1 + r.IntN(3), backups: 2 + r.IntN(4)}
		sp.primDown = sp.primaries
		if i%2 == 1 {
			sp.backupDown = 1
		}
		ups = append(ups, randomRR(r, fmt.Sprintf("backup%02d", i), smoothRR, sp))
	}
	report(t, ups, conform(t, ups))
}

// TestNginxLeastConn compares least_conn with nginx's least_conn under
// sequential requests: every server has zero connections at each pick, so
// all tie and nginx shares out by smooth round robin among them.
func TestNginxLeastConn(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	var ups []*upstream
	for i := 0; i < 12; i++ {
		sp := rrSpec{primaries: 2 + r.IntN(7)}
		switch i % 4 {
		case 1:
			sp.primDown = someDown(r, sp.primaries)
		case 2:
			sp.backups = 1 + r.IntN(2)
		case 3:
			sp.primDown, sp.backups = sp.primaries, 2+r.IntN(3)
		}
		ups = append(ups, randomRR(r, fmt.Sprintf("leastconn%02d", i), leastConn, sp))
	}
	report(t, ups, conform(t, ups))
}

// TestNginxIPHash compares ip_hash with nginx's ip_hash for random IPv4 and
// IPv6 clients, with equal and random weights, down servers, and mostly-down
// sets where clients fall back to round robin.
func TestNginxIPHash(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	ups := hashedCases(r, "iphash", ipHash, func(count int) []string { return clientIPs(r, count) })
	report(t, ups, conform(t, ups))
}

// TestNginxHashConsistent compares url_hash's ketama mode with nginx's
// "hash $arg_k consistent" for random raw keys.
func TestNginxHashConsistent(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 1))
	ups := hashedCases(r, "ketama", hashKetama, func(count int) []string { return argKeys(r, count) })
	report(t, ups, conform(t, ups))
}

// TestNginxHash compares url_hash's modulo mode with nginx's plain
// "hash $arg_k" for random raw keys.
func TestNginxHash(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	ups := hashedCases(r, "modulo", hashModulo, func(count int) []string { return argKeys(r, count) })
	report(t, ups, conform(t, ups))
}

// TestNginxLeastConnBusy compares least_conn with nginx's least_conn while
// requests are held in flight, so that connection counts differ: the fewest
// connections per weight wins, the first in order among equals unless
// several tie, when smooth round robin runs among the tied.
func TestNginxLeastConnBusy(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	var ups []*upstream
	for i := 0; i < 10; i++ {
		sp := rrSpec{primaries: 2 + r.IntN(7), equal: i%4 == 0}
		switch i % 5 {
		case 1:
			sp.primDown = someDown(r, sp.primaries)
		case 2:
			sp.backups = 1 + r.IntN(2)
		case 3:
			sp.primDown, sp.backups = sp.primaries, 2+r.IntN(3)
		}
		u := randomRR(r, fmt.Sprintf("lcbusy%02d", i), leastConn, sp)
		busy(r, u, 2+r.IntN(5))
		ups = append(ups, u)
	}
	report(t, ups, conform(t, ups))
}

// TestNginxMaxConns compares picks while servers with max_conns are full:
// every method skips a full server as it skips a down one (round robin and
// least_conn share out among the rest or turn to the backups; the hash
// methods try the next candidate).
func TestNginxMaxConns(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 1))
	var ups []*upstream
	add := func(u *upstream, spare bool) {
		limit(r, u, spare)
		busy(r, u, 2+r.IntN(4))
		ups = append(ups, u)
	}
	for i := 0; i < 6; i++ {
		sp := rrSpec{primaries: 2 + r.IntN(5)}
		if i%2 == 1 {
			sp.backups = 1 + r.IntN(2)
		}
		add(randomRR(r, fmt.Sprintf("mcsmooth%02d", i), smoothRR, sp), sp.backups == 0)
	}
	for i := 0; i < 3; i++ {
		sp := rrSpec{primaries: 2 + r.IntN(5), backups: i % 2}
		add(randomRR(r, fmt.Sprintf("mcleast%02d", i), leastConn, sp), sp.backups == 0)
	}
	for i := 0; i < 3; i++ {
		n := 3 + r.IntN(6)
		add(randomHashed(r, fmt.Sprintf("mciphash%02d", i), ipHash, n, someDown(r, n)/2, false, clientIPs(r, 120)), true)
		add(randomHashed(r, fmt.Sprintf("mcketama%02d", i), hashKetama, n, someDown(r, n)/2, false, argKeys(r, 120)), true)
		add(randomHashed(r, fmt.Sprintf("mcmodulo%02d", i), hashModulo, n, someDown(r, n)/2, false, argKeys(r, 120)), true)
	}
	report(t, ups, conform(t, ups))
}

// busy makes about two requests in five of u stay in flight, up to maxHeld
// at once, each released at a random later point.
func busy(r *rand.Rand, u *upstream, maxHeld int) {
	u.holds = make([]bool, len(u.keys))
	u.releases = map[int][]int{}
	var held []int
	for i := range u.keys {
		for len(held) > 0 && (len(held) >= maxHeld || r.IntN(3) == 0) {
			k := r.IntN(len(held))
			u.releases[i] = append(u.releases[i], held[k])
			held = append(held[:k], held[k+1:]...)
		}
		if r.IntN(5) < 2 {
			u.holds[i] = true
			held = append(held, i)
		}
	}
}

// limit gives max_conns of 1 or 2 to the live primary servers of u: to all
// but one when spare is set (so that nginx always has a server to pick),
// to all of them otherwise (the live backups then take the overflow).
func limit(r *rand.Rand, u *upstream, spare bool) {
	var live []int
	for i, s := range u.servers {
		if !s.down && !s.backup {
			live = append(live, i)
		}
	}
	if spare {
		k := r.IntN(len(live))
		live = append(live[:k], live[k+1:]...)
	}
	for _, i := range live {
		u.servers[i].maxConns = 1 + r.IntN(2)
	}
}

// hashedCases returns 12 upstreams of a hash method: 10 random sets of 2..8
// servers (equal weights in some, servers down in some) and 2 mostly-down
// sets, 150 keys each.
func hashedCases(r *rand.Rand, prefix string, m method, keys func(int) []string) []*upstream {
	var ups []*upstream
	for i := 0; i < 10; i++ {
		n := 2 + r.IntN(7)
		down := 0
		if i%3 == 2 {
			down = someDown(r, n)
		}
		ups = append(ups, randomHashed(r, fmt.Sprintf("%s%02d", prefix, i), m, n, down, i%4 == 0, keys(150)))
	}
	for i := 10; i < 12; i++ {
		ups = append(ups, mostlyDown(r, fmt.Sprintf("%s%02d", prefix, i), m, keys(150)))
	}
	return ups
}

// someDown returns how many of n servers to mark down: at least one, and
// few enough that two stay up, so that the choice among the rest still
// means something (none when n is 2).
func someDown(r *rand.Rand, n int) int {
	if n < 3 {
		return 0
	}
	return 1 + r.IntN(n-2)
}

func report(t *testing.T, ups []*upstream, compared int) {
	t.Helper()
	t.Logf("%d upstreams, %d requests compared", len(ups), compared)
}
