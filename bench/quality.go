package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
)

// WeightSet is a named set of weights for the smoothness table.
type WeightSet struct {
	Name    string
	Weights []int
}

// SmoothSets are the weight sets of the smoothness table.
var SmoothSets = []WeightSet{
	{"5,3,2", []int{5, 3, 2}},
	{"5,1,1", []int{5, 1, 1}},
	{"1..10", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
}

// Smoothness is how evenly a weighted schedule spreads a backend's picks.
type Smoothness struct {
	First string // the first picks, as letters
	// LongestRun is the longest run of picks of one backend in a row.
	LongestRun int
	// MaxDev is the largest |picks - k*w/W| of any backend in any window of
	// k consecutive picks, k up to two whole periods (2W).
	MaxDev float64
	// ShareErr is the largest |share - w/W| over the whole sequence.
	ShareErr float64
}

// smoothLen is the length of the sequences measured.
const smoothLen = 2000

// Sequence returns count picks of a fresh picker of subject s.
func Sequence(s Subject, weights []int, count int) ([]int, error) {
	addrs := Addrs(len(weights))
	p, err := s.Build(addrs, weights)
	if err != nil {
		return nil, err
	}
	seq := make([]int, count)
	for i := range seq {
		seq[i] = p.PickKey("")
		if seq[i] < 0 {
			return nil, fmt.Errorf("%s: pick %d failed", s.Name, i)
		}
	}
	return seq, nil
}

// MeasureSmoothness computes the smoothness of a sequence of picks among
// backends with the given weights.
func MeasureSmoothness(seq []int, weights []int) Smoothness {
	n, W := len(weights), 0
	for _, w := range weights {
		W += w
	}
	var sm Smoothness
	var b strings.Builder
	for i := 0; i < len(seq) && i < 10; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(letter(seq[i]))
	}
	sm.First = b.String()
	run := 0
	for i, x := range seq {
		if i > 0 && x == seq[i-1] {
			run++
		} else {
			run = 1
		}
		if run > sm.LongestRun {
			sm.LongestRun = run
		}
	}
	// prefix[i][t] = picks of backend i among the first t.
	prefix := make([][]int32, n)
	for i := range prefix {
		prefix[i] = make([]int32, len(seq)+1)
	}
	for t, x := range seq {
		for i := range prefix {
			prefix[i][t+1] = prefix[i][t]
		}
		prefix[x][t+1]++
	}
	maxK := 2 * W
	if maxK > len(seq) {
		maxK = len(seq)
	}
	for i, w := range weights {
		share := float64(w) / float64(W)
		for k := 1; k <= maxK; k++ {
			want := float64(k) * share
			for s := 0; s+k <= len(seq); s++ {
				d := float64(prefix[i][s+k]-prefix[i][s]) - want
				if d < 0 {
					d = -d
				}
				if d > sm.MaxDev {
					sm.MaxDev = d
				}
			}
		}
		e := float64(prefix[i][len(seq)])/float64(len(seq)) - share
		if e < 0 {
			e = -e
		}
		if e > sm.ShareErr {
			sm.ShareErr = e
		}
	}
	return sm
}

// letter names backend i as the docs do: a, b, c, ...
func letter(i int) string {
	if i >= 0 && i < 26 {
		return string(rune('a' + i))
	}
	return fmt.Sprint(i)
}

// SmoothRow is one subject's smoothness for every weight set.
type SmoothRow struct {
	Subject Subject
	BySet   []Smoothness // one per SmoothSets entry
}

// RunSmoothness measures every weighted subject.
func RunSmoothness(subjects []Subject) ([]SmoothRow, error) {
	var rows []SmoothRow
	for _, s := range subjects {
		if s.Kind != Weighted || s.CostOnly {
			continue
		}
		row := SmoothRow{Subject: s}
		for _, set := range SmoothSets {
			seq, err := Sequence(s, set.Weights, smoothLen)
			if err != nil {
				return nil, err
			}
			row.BySet = append(row.BySet, MeasureSmoothness(seq, set.Weights))
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// HashQuality is one hashed subject's balance, disruption and memory.
type HashQuality struct {
	Subject Subject
	// Balance is max/mean keys per backend, by n.
	Balance map[int]float64
	// Leave and Join are the fractions of keys that change backend when
	// the last backend leaves, and when a new one joins, by n.
	Leave, Join map[int]float64
	// Memory is the heap the built picker retains, in bytes, by n.
	Memory map[int]uint64
	// HotLoad is max/mean requests in flight per backend when SkewRequests
	// requests with Zipf-distributed keys are in flight at once over
	// SkewBackends backends: how well a scheme copes with hot keys.
	HotLoad float64
}

// The hot-key experiment's parameters.
const (
	SkewBackends = 10
	SkewRequests = 1000
	skewKeys     = 10000
	skewS        = 1.1 // Zipf exponent: a few keys carry much of the traffic
)

// hotLoad starts SkewRequests requests with Zipf-distributed keys and none
// finishing, and returns the busiest backend's in-flight count over the mean.
// lbpack's balancers are told each start, so the bounded mode can cap load.
func hotLoad(s Subject, keys []string) (float64, error) {
	p, err := s.Build(Addrs(SkewBackends), weightsFor(Hashed, SkewBackends))
	if err != nil {
		return 0, err
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(7, 7)), skewS, 1, uint64(len(keys)-1))
	load := make([]int, SkewBackends)
	for r := 0; r < SkewRequests; r++ {
		var i int
		if lb, ok := p.(*lbpackPicker); ok {
			i = lb.pickHeld(keys[z.Uint64()]) // in flight: bounded's caps see the load
		} else {
			i = p.PickKey(keys[z.Uint64()])
		}
		if i < 0 {
			return 0, fmt.Errorf("%s: hot key not mapped", s.Name)
		}
		load[i]++
	}
	most := 0
	for _, l := range load {
		if l > most {
			most = l
		}
	}
	return float64(most) / (float64(SkewRequests) / SkewBackends), nil
}

// Quality sizes: balance and disruption at these n, memory at MemSizes.
var (
	QualitySizes = []int{10, 100}
	MemSizes     = []int{100, 1000}
)

// QualityKeys is how many keys the published balance and disruption figures map.
const QualityKeys = 1 << 17

// mapKeys maps every key to a backend address with a fresh picker.
func mapKeys(s Subject, addrs []string, keys []string) ([]string, error) {
	p, err := s.Build(addrs, weightsFor(Hashed, len(addrs)))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(keys))
	for k, key := range keys {
		i := p.PickKey(key)
		if i < 0 {
			return nil, fmt.Errorf("%s: key %q not mapped", s.Name, key)
		}
		out[k] = addrs[i]
	}
	return out, nil
}

func moved(a, b []string) float64 {
	m := 0
	for i := range a {
		if a[i] != b[i] {
			m++
		}
	}
	return float64(m) / float64(len(a))
}

// heapRetained returns the heap bytes that build's result keeps alive.
func heapRetained(build func() (Picker, error)) (uint64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p, err := build()
	if err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(p)
	if after.HeapAlloc < before.HeapAlloc {
		return 0, nil
	}
	return after.HeapAlloc - before.HeapAlloc, nil
}

// RunHashQuality measures every hashed subject, mapping count keys.
func RunHashQuality(subjects []Subject, count int) ([]HashQuality, error) {
	urls, ips := URLKeys(count), ClientIPs(count)
	var rows []HashQuality
	for _, s := range subjects {
		if s.Kind != Hashed {
			continue
		}
		keys := urls
		if s.IPKeys {
			keys = ips
		}
		q := HashQuality{Subject: s, Balance: map[int]float64{}, Leave: map[int]float64{}, Join: map[int]float64{}, Memory: map[int]uint64{}}
		var err error
		for _, n := range QualitySizes {
			addrs := Addrs(n + 1)
			var base []string
			base, err = mapKeys(s, addrs[:n], keys)
			if err != nil {
				return nil, err
			}
			count := map[string]int{}
			for _, a := range base {
				count[a]++
			}
			most := 0
			for _, c := range count {
				if c > most {
					most = c
				}
			}
			q.Balance[n] = float64(most) / (float64(len(keys)) / float64(n))
			left, err := mapKeys(s, addrs[:n-1], keys)
			if err != nil {
				return nil, err
			}
			q.Leave[n] = moved(base, left)
			joined, err := mapKeys(s, addrs, keys)
			if err != nil {
				return nil, err
			}
			q.Join[n] = moved(base, joined)
		}
		hot := urls[:skewKeys]
		if s.IPKeys {
			hot = ips[:skewKeys]
		}
		if q.HotLoad, err = hotLoad(s, hot); err != nil {
			return nil, err
		}
		for _, n := range MemSizes {
			addrs, w := Addrs(n), weightsFor(Hashed, n)
			m, err := heapRetained(func() (Picker, error) { return s.Build(addrs, w) })
			if err != nil {
				return nil, err
			}
			q.Memory[n] = m
		}
		rows = append(rows, q)
	}
	return rows, nil
}

func fmtBytes(b uint64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	default:
		return fmt.Sprintf("%d B", b)
	}
}

// WriteQuality writes docs/quality.md.
func WriteQuality(w io.Writer, smooth []SmoothRow, hash []HashQuality, cmd string) {
	fmt.Fprintf(w, "# Quality of the choices\n\nRegenerate with `%s`. Every figure is deterministic except for the random strategies'.\n\n", cmd)
	fmt.Fprintf(w, "## Smoothness of the weighted schedules\n\n")
	fmt.Fprintf(w, "%d picks of a fresh balancer per weight set (backends a, b, c, ... in order). ", smoothLen)
	fmt.Fprintf(w, "\"run\" is the longest run of one backend in a row; \"dev\" is the largest |picks − k·w/W| of any backend in any window of k consecutive picks, ")
	fmt.Fprintf(w, "k up to two periods (2W): nginx's smooth order keeps it below 1, a bursty order reaches about w·(1 − w/W). ")
	fmt.Fprintf(w, "\"share\" is the largest error of a backend's share over all %d picks. least_conn runs idle here (nothing in flight), so its ties decide every pick.\n\n", smoothLen)
	fmt.Fprintf(w, "| subject | first 10 picks, 5,3,2 |")
	for _, set := range SmoothSets {
		fmt.Fprintf(w, " %s run | %s dev |", set.Name, set.Name)
	}
	fmt.Fprintf(w, " share error (1..10) |\n|---|---|")
	for range SmoothSets {
		fmt.Fprintf(w, "---:|---:|")
	}
	fmt.Fprintf(w, "---:|\n")
	for _, r := range smooth {
		fmt.Fprintf(w, "| %s | `%s` |", boldIf(r.Subject), r.BySet[0].First)
		for _, sm := range r.BySet {
			fmt.Fprintf(w, " %d | %.2f |", sm.LongestRun, sm.MaxDev)
		}
		fmt.Fprintf(w, " %.2f%% |\n", 100*r.BySet[len(r.BySet)-1].ShareErr)
	}
	fmt.Fprintf(w, "\n## Hashing: balance, disruption, memory\n\n")
	fmt.Fprintf(w, "%d keys (~32-byte URIs; client IPs for the ip_hash rows). \"max/mean\" is the busiest backend's keys over the mean: ", QualityKeys)
	fmt.Fprintf(w, "with this many keys a perfectly uniform random mapping shows about 1.01 at n=10 and 1.07 at n=100 from sampling alone. ")
	fmt.Fprintf(w, "\"leave\" is the fraction of keys that move when the last backend is removed (ideal 1/n; the last, because jump hash can only remove the last bucket), ")
	fmt.Fprintf(w, "\"join\" when one is added (ideal 1/(n+1)). Memory is the heap the built picker retains (Caddy's row is its UpstreamPool, which Caddy holds anyway: its policy keeps no table). ")
	fmt.Fprintf(w, "\"hot keys\" is the busiest backend's requests in flight over the mean when %d requests whose keys follow a Zipf law (s = %.1f over %d keys) are in flight at once on %d backends: ", SkewRequests, skewS, skewKeys, SkewBackends)
	fmt.Fprintf(w, "a hot key lands wholly on one backend, except in the bounded mode, which is told of every start and caps each backend at ceil(1.25 × mean). ")
	fmt.Fprintf(w, "Everywhere else the bounded mode has nothing in flight and maps like its ring. ")
	fmt.Fprintf(w, "The libraries run as they ship: stathat/consistent with its 20 replicas per node, serialx/hashring built with `New(nodes)`, which gives each node one ring point per unit of weight (so one point here).\n\n")
	fmt.Fprintf(w, "| subject |")
	for _, n := range QualitySizes {
		fmt.Fprintf(w, " max/mean n=%d |", n)
	}
	for _, n := range QualitySizes {
		fmt.Fprintf(w, " leave n=%d (ideal %.1f%%) |", n, 100/float64(n))
	}
	for _, n := range QualitySizes {
		fmt.Fprintf(w, " join n=%d (ideal %.2f%%) |", n, 100/float64(n+1))
	}
	for _, n := range MemSizes {
		fmt.Fprintf(w, " memory n=%d |", n)
	}
	fmt.Fprintf(w, " hot keys n=%d |", SkewBackends)
	fmt.Fprintf(w, "\n|---|")
	for i := 0; i < 3*len(QualitySizes)+len(MemSizes)+1; i++ {
		fmt.Fprintf(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, q := range hash {
		fmt.Fprintf(w, "| %s |", boldIf(q.Subject))
		for _, n := range QualitySizes {
			fmt.Fprintf(w, " %.3f |", q.Balance[n])
		}
		for _, n := range QualitySizes {
			fmt.Fprintf(w, " %.2f%% |", 100*q.Leave[n])
		}
		for _, n := range QualitySizes {
			fmt.Fprintf(w, " %.2f%% |", 100*q.Join[n])
		}
		for _, n := range MemSizes {
			fmt.Fprintf(w, " %s |", fmtBytes(q.Memory[n]))
		}
		fmt.Fprintf(w, " %.2f |\n", q.HotLoad)
	}
	fmt.Fprintln(w)
}

func boldIf(s Subject) string {
	if s.Family == FamLbpack {
		return "**" + s.Name + "**"
	}
	return s.Name
}
