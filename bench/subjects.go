package bench

import (
	"net"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/cespare/xxhash/v2"
	jump "github.com/dgryski/go-jump"
	"github.com/lbpack/lbpack/core"
	"github.com/serialx/hashring"
	"github.com/stathat/consistent"
)

// Kind says which quality table a subject belongs to.
type Kind int

// Kinds of subject.
const (
	Plain    Kind = iota // unweighted, unhashed: cost only
	Weighted             // a weighted schedule: smoothness table
	Hashed               // a key-to-backend mapping: balance and disruption table
)

// Family groups the subjects in the tables.
const (
	FamLbpack   = "lbpack"
	FamCaddy    = "Caddy 2.11.9"
	FamPeer     = "library"
	FamTextbook = "textbook"
)

// A Picker chooses a backend for a key and returns its index in the address
// list it was built from, or -1. Subjects that do not hash ignore the key.
type Picker interface {
	PickKey(key string) int
}

// rawPicker is implemented by pickers whose native API takes or returns
// something else (an *http.Request, an *Upstream, a node name): benchmarks
// time the native call on benchmark key number k alone, without the
// translation to and from indexes.
type rawPicker interface {
	raw(k int) int
}

// Subject is one implementation under comparison.
type Subject struct {
	Name   string // as shown in the tables
	Family string
	Kind   Kind
	// IPKeys: the subject hashes client IPs rather than URIs.
	IPKeys bool
	// Versus names the lbpack subject this one's ratio is taken against;
	// empty for lbpack's own rows.
	Versus string
	// CostOnly: the subject is measured for its cost alone (its picks
	// depend on a load the quality tables do not model).
	CostOnly bool
	// Build makes a picker over the given backends.
	Build func(addrs []string, weights []int) (Picker, error)
}

// weightsFor returns the weights a subject of kind k is measured with.
func weightsFor(k Kind, n int) []int {
	if k == Weighted {
		return Weights(n)
	}
	w := make([]int, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

// Benchmark key sets: every picker cycles through the same keys.
var (
	urlKeys  = URLKeys(numKeys)
	ipKeys   = ClientIPs(numKeys)
	caddyReq = requests(urlKeys, ipKeys)
)

// benchKeys returns the key set subject s hashes in benchmarks.
func (s Subject) benchKeys() []string {
	if s.IPKeys {
		return ipKeys
	}
	return urlKeys
}

// lbpackSpec is one lbpack configuration under test.
type lbpackSpec struct {
	name     string // row name after "lbpack "
	strategy string
	mode     string
	twoC     bool
	kind     Kind
	busy     bool // one request in flight to backend 0 throughout
}

// lbpackSpecs lists lbpack's configurations in table order. Strategies not
// registered in core (yet) are left out of the tables by Subjects.
var lbpackSpecs = []lbpackSpec{
	{"round_robin", core.RoundRobin, "", false, Plain, false},
	{"random", core.Random, "", false, Plain, false},
	{"weighted_random", core.WeightedRandom, "", false, Weighted, false},
	{"smooth_wrr", core.SmoothWRR, "", false, Weighted, false},
	{"gcd_wrr", core.GCDWRR, "", false, Weighted, false},
	{"least_conn", core.LeastConn, "", false, Weighted, false},
	{"least_conn, 1 in flight", core.LeastConn, "", false, Weighted, true},
	{"least_conn two_choices", core.LeastConn, "", true, Weighted, false},
	{"fair", core.Fair, "", false, Weighted, false},
	{"ip_hash", core.IPHash, "", false, Hashed, false},
	{"url_hash ketama", core.URLHash, core.HashKetama, false, Hashed, false},
	{"url_hash modulo", core.URLHash, core.HashModulo, false, Hashed, false},
	{"url_hash maglev", core.URLHash, core.HashMaglev, false, Hashed, false},
	{"url_hash bounded", core.URLHash, core.HashBounded, false, Hashed, false},
}

// registered reports whether core has the strategy.
func registered(name string) bool {
	for _, s := range core.Strategies() {
		if s == name {
			return true
		}
	}
	return false
}

// Subjects returns every subject, lbpack's registered strategies first.
func Subjects() []Subject {
	var out []Subject
	for _, sp := range lbpackSpecs {
		if !registered(sp.strategy) {
			continue
		}
		out = append(out, Subject{Name: "lbpack " + sp.name, Family: FamLbpack, Kind: sp.kind,
			IPKeys: sp.strategy == core.IPHash, CostOnly: sp.busy, Build: lbpackBuilder(sp)})
	}
	out = append(out,
		caddySubject("weighted_round_robin", Weighted, "lbpack smooth_wrr", nil),
		caddySubject("round_robin", Plain, "lbpack round_robin", func([]int) reverseproxy.Selector { return new(reverseproxy.RoundRobinSelection) }),
		caddySubject("least_conn", Plain, "lbpack least_conn", func([]int) reverseproxy.Selector { return reverseproxy.LeastConnSelection{} }),
		caddySubject("random", Plain, "lbpack random", func([]int) reverseproxy.Selector { return reverseproxy.RandomSelection{} }),
		caddySubject("ip_hash", Hashed, "lbpack ip_hash", func([]int) reverseproxy.Selector { return reverseproxy.IPHashSelection{} }),
		caddySubject("uri_hash", Hashed, "lbpack url_hash maglev", func([]int) reverseproxy.Selector { return reverseproxy.URIHashSelection{} }),
		Subject{Name: "stathat/consistent", Family: FamPeer, Kind: Hashed, Versus: "lbpack url_hash ketama", Build: buildStathat},
		Subject{Name: "serialx/hashring", Family: FamPeer, Kind: Hashed, Versus: "lbpack url_hash ketama", Build: buildSerialx},
		Subject{Name: "dgryski/go-jump", Family: FamPeer, Kind: Hashed, Versus: "lbpack url_hash maglev", Build: buildJump},
		Subject{Name: "O(n) smooth WRR, one mutex", Family: FamTextbook, Kind: Weighted, Versus: "lbpack smooth_wrr",
			Build: func(_ []string, w []int) (Picker, error) { return newNaiveSmooth(w), nil }},
		Subject{Name: "expanded-list WRR", Family: FamTextbook, Kind: Weighted, Versus: "lbpack smooth_wrr",
			Build: func(_ []string, w []int) (Picker, error) { return newExpandedWRR(w), nil }},
		Subject{Name: "sorted ring, 16 replicas", Family: FamTextbook, Kind: Hashed, Versus: "lbpack url_hash ketama",
			Build: func(a []string, _ []int) (Picker, error) { return newSortedRing(a), nil }},
	)
	return out
}

// FindSubject returns the subject with the given name.
func FindSubject(name string) (Subject, bool) {
	for _, s := range Subjects() {
		if s.Name == name {
			return s, true
		}
	}
	return Subject{}, false
}

// lbpackPicker picks with a core.Balancer.
type lbpackPicker struct {
	b *core.Balancer
}

// PickKey picks for key; the request is not sent (core.NotSent), so that
// nothing stays in flight.
func (p *lbpackPicker) PickKey(key string) int {
	i, t := core.Pick(p.b, key, core.Filter{})
	if t != 0 {
		core.Done(p.b, i, t, core.NotSent, false)
	}
	return i
}

// pickHeld picks for key and leaves the request in flight, never ended.
func (p *lbpackPicker) pickHeld(key string) int {
	i, _ := core.Pick(p.b, key, core.Filter{})
	return i
}

// lbpackConfig is the core.Config for a spec over the given backends.
func lbpackConfig(sp lbpackSpec, addrs []string, weights []int) core.Config {
	be := make([]core.Backend, len(addrs))
	for i, a := range addrs {
		be[i] = core.Backend{Address: a, Weight: weights[i]}
	}
	return core.Config{Strategy: sp.strategy, HashMode: sp.mode, TwoChoices: sp.twoC, Backends: be}
}

func lbpackBuilder(sp lbpackSpec) func([]string, []int) (Picker, error) {
	return func(addrs []string, weights []int) (Picker, error) {
		b, err := core.New(lbpackConfig(sp, addrs, weights))
		if err != nil {
			return nil, err
		}
		if sp.busy {
			// Never done: every pick scans, and the others tie.
			core.Pick(b, "", core.Filter{Allow: func(i int) bool { return i == 0 }})
		}
		return &lbpackPicker{b: b}, nil
	}
}

// caddyPicker calls a Caddy selection policy's Select on a fixed pool, as
// Caddy's handler does for static upstreams.
type caddyPicker struct {
	sel   reverseproxy.Selector
	pool  reverseproxy.UpstreamPool
	index map[*reverseproxy.Upstream]int
}

func (p *caddyPicker) PickKey(key string) int {
	req := &http.Request{Method: http.MethodGet, RequestURI: key, RemoteAddr: net.JoinHostPort(key, "40000")}
	u := p.sel.Select(p.pool, req, nil)
	if u == nil {
		return -1
	}
	return p.index[u]
}

func (p *caddyPicker) raw(k int) int {
	if p.sel.Select(p.pool, caddyReq[k], nil) == nil {
		return -1
	}
	return 0
}

// caddyPool builds a pool of upstreams with Dial addresses, as Caddy
// provisions static upstreams.
func caddyPool(addrs []string) (reverseproxy.UpstreamPool, map[*reverseproxy.Upstream]int) {
	pool := make(reverseproxy.UpstreamPool, len(addrs))
	index := make(map[*reverseproxy.Upstream]int, len(addrs))
	for i, a := range addrs {
		pool[i] = &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: a}
		index[pool[i]] = i
	}
	return pool, index
}

// caddySubject wraps one of Caddy's built-in policies; mk nil means
// weighted_round_robin, which is provisioned with positional weights.
func caddySubject(policy string, kind Kind, versus string, mk func([]int) reverseproxy.Selector) Subject {
	return Subject{
		Name: "Caddy " + policy, Family: FamCaddy, Kind: kind, Versus: versus, IPKeys: policy == "ip_hash",
		Build: func(addrs []string, weights []int) (Picker, error) {
			var sel reverseproxy.Selector
			if mk == nil {
				w := &reverseproxy.WeightedRoundRobinSelection{Weights: append([]int(nil), weights...)}
				if err := w.Provision(caddy.Context{}); err != nil {
					return nil, err
				}
				if err := w.Validate(); err != nil {
					return nil, err
				}
				sel = w
			} else {
				sel = mk(weights)
			}
			pool, index := caddyPool(addrs)
			return &caddyPicker{sel: sel, pool: pool, index: index}, nil
		},
	}
}

// namePicker translates a library's node name back to an index.
type namePicker struct {
	get   func(key string) string
	index map[string]int
}

func (p *namePicker) PickKey(key string) int {
	if i, ok := p.index[p.get(key)]; ok {
		return i
	}
	return -1
}

func (p *namePicker) raw(k int) int { return len(p.get(urlKeys[k])) }

func indexOf(addrs []string) map[string]int {
	m := make(map[string]int, len(addrs))
	for i, a := range addrs {
		m[a] = i
	}
	return m
}

func buildStathat(addrs []string, _ []int) (Picker, error) {
	c := consistent.New() // 20 replicas, crc32, as the package ships
	c.Set(addrs)
	return &namePicker{index: indexOf(addrs), get: func(key string) string {
		s, _ := c.Get(key)
		return s
	}}, nil
}

func buildSerialx(addrs []string, _ []int) (Picker, error) {
	// As the package ships: md5, and one ring point per node per unit of
	// weight, so with equal weights one point per node.
	r := hashring.New(addrs)
	return &namePicker{index: indexOf(addrs), get: func(key string) string {
		s, _ := r.GetNode(key)
		return s
	}}, nil
}

// jumpPicker hashes the key with xxhash (what Caddy uses) and jumps.
type jumpPicker struct{ n int }

func (p jumpPicker) PickKey(key string) int { return int(jump.Hash(xxhash.Sum64String(key), p.n)) }

func buildJump(addrs []string, _ []int) (Picker, error) { return jumpPicker{n: len(addrs)}, nil }
