package bench

import (
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/lbpack/lbpack/core"
)

// FleetSize is the number of independent balancers in the fleet.
const FleetSize = 8

// FleetMappingModes are the url_hash modes whose mappings the fleet compares.
var FleetMappingModes = []string{core.HashKetama, core.HashModulo, core.HashMaglev, core.HashBounded}

// fleetBackends is the fleet's one configuration.
func fleetBackends(weights []int) []core.Backend {
	addrs := Addrs(len(weights))
	be := make([]core.Backend, len(weights))
	for i := range be {
		be[i] = core.Backend{Address: addrs[i], Weight: weights[i]}
	}
	return be
}

// FleetDigest maps count keys with a fresh url_hash balancer in the given
// mode over 20 backends of weights 1..5 and returns the chosen addresses.
// Every balancer built from the same configuration, in any process, must
// return the same list.
func FleetDigest(mode string, count int) ([]string, error) {
	b, err := core.New(core.Config{Strategy: core.URLHash, HashMode: mode, Backends: fleetBackends(Weights(20))})
	if err != nil {
		return nil, err
	}
	keys := URLKeys(count)
	out := make([]string, count)
	for i, k := range keys {
		j, _ := core.Pick(b, k, core.Filter{}) // url_hash: nothing to end
		if j < 0 {
			return nil, core.ErrNoBackend
		}
		out[i] = b.Backend(j).Address
	}
	return out, nil
}

// FleetMapping builds FleetSize balancers per mode and counts the keys on
// which any of them disagrees with the first.
func FleetMapping(count int) (map[string]int, error) {
	diff := map[string]int{}
	for _, mode := range FleetMappingModes {
		var first []string
		for f := 0; f < FleetSize; f++ {
			got, err := FleetDigest(mode, count)
			if err != nil {
				return nil, err
			}
			if f == 0 {
				first = got
				diff[mode] = 0
				continue
			}
			for i := range got {
				if got[i] != first[i] {
					diff[mode]++
				}
			}
		}
	}
	return diff, nil
}

// BurstStats describes a fleet receiving synchronized bursts: at every step
// each of the FleetSize balancers makes one pick.
type BurstStats struct {
	Strategy string
	Weights  string
	Stagger  bool
	// MeanPeak is the mean over steps of the largest number of balancers
	// that sent to one backend in that step; Ideal is what an even spread
	// gives (FleetSize times the largest weight share, at least 1).
	MeanPeak, Ideal float64
	// WorstPeak is the largest such number in any step.
	WorstPeak int
	// AllSame is the fraction of steps in which all balancers chose the same backend.
	AllSame float64
	// ShareErr is the largest error of a backend's overall share.
	ShareErr float64
}

// burstSteps is how many synchronized steps the fleet runs.
const burstSteps = 1000

// FleetBursts runs FleetSize balancers of one configuration in lockstep.
// With stagger each gets its own random source (as separate processes do).
func FleetBursts(strategy string, weights []int, stagger bool, seed uint64) (BurstStats, error) {
	st := BurstStats{Strategy: strategy, Weights: weightsName(weights), Stagger: stagger}
	fleet := make([]*core.Balancer, FleetSize)
	for f := range fleet {
		cfg := core.Config{Strategy: strategy, Backends: fleetBackends(weights), Stagger: stagger}
		if stagger {
			cfg.Rand = rand.New(rand.NewPCG(seed, uint64(f))).Uint64
		}
		b, err := core.New(cfg)
		if err != nil {
			return st, err
		}
		fleet[f] = b
	}
	W, wmax := 0, 0
	for _, w := range weights {
		W += w
		if w > wmax {
			wmax = w
		}
	}
	st.Ideal = float64(FleetSize) * float64(wmax) / float64(W)
	if st.Ideal < 1 {
		st.Ideal = 1
	}
	total := make([]int, len(weights))
	step := make([]int, len(weights))
	sum, same := 0, 0
	for t := 0; t < burstSteps; t++ {
		for i := range step {
			step[i] = 0
		}
		for _, b := range fleet {
			i, _ := core.Pick(b, "", core.Filter{}) // smooth_wrr: nothing to end
			if i < 0 {
				return st, core.ErrNoBackend
			}
			step[i]++
			total[i]++
		}
		peak := 0
		for _, c := range step {
			if c > peak {
				peak = c
			}
		}
		sum += peak
		if peak > st.WorstPeak {
			st.WorstPeak = peak
		}
		if peak == FleetSize {
			same++
		}
	}
	st.MeanPeak = float64(sum) / burstSteps
	st.AllSame = float64(same) / burstSteps
	for i, w := range weights {
		e := float64(total[i])/float64(FleetSize*burstSteps) - float64(w)/float64(W)
		if e < 0 {
			e = -e
		}
		if e > st.ShareErr {
			st.ShareErr = e
		}
	}
	return st, nil
}

func weightsName(w []int) string {
	allOne := true
	for _, x := range w {
		if x != 1 {
			allOne = false
		}
	}
	if allOne {
		return fmt.Sprintf("%d × 1", len(w))
	}
	s := ""
	for i, x := range w {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(x)
	}
	return s
}

// BurstWeightSets are the configurations of the stagger table.
var BurstWeightSets = [][]int{{5, 3, 2}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}

// RunFleet measures the mapping agreement and the burst table.
func RunFleet() (map[string]int, []BurstStats, error) {
	diff, err := FleetMapping(fleetKeys)
	if err != nil {
		return nil, nil, err
	}
	var bursts []BurstStats
	for _, strategy := range []string{core.SmoothWRR, core.GCDWRR} {
		if !registered(strategy) {
			continue
		}
		for _, w := range BurstWeightSets {
			for _, stagger := range []bool{false, true} {
				st, err := FleetBursts(strategy, w, stagger, 42)
				if err != nil {
					return nil, nil, err
				}
				bursts = append(bursts, st)
			}
		}
	}
	return diff, bursts, nil
}

// fleetKeys is how many keys the fleet's mapping comparison uses.
const fleetKeys = 20000

// WriteFleet writes docs/fleet.md.
func WriteFleet(w io.Writer, diff map[string]int, bursts []BurstStats, cmd string) {
	fmt.Fprintf(w, "# A fleet of balancers with one configuration\n\nRegenerate with `%s`; `go test ./...` in bench/ asserts the first table across separate processes.\n\n", cmd)
	fmt.Fprintf(w, "## url_hash maps every key identically everywhere\n\n")
	fmt.Fprintf(w, "%d balancers built independently from one configuration (20 backends, weights 1..5) map %d keys. ", FleetSize, fleetKeys)
	fmt.Fprintf(w, "No mode uses a per-process seed, so any number of proxies send a key to the same backend. ")
	fmt.Fprintf(w, "The bench test `TestFleetAcrossProcesses` runs %d separate processes (each with its own runtime hash seed and address layout) and compares their mappings.\n\n", FleetSize)
	fmt.Fprintf(w, "| mode | keys on which any balancer disagrees |\n|---|---:|\n")
	for _, mode := range FleetMappingModes {
		if d, ok := diff[mode]; ok {
			fmt.Fprintf(w, "| %s | %d of %d |\n", mode, d, fleetKeys)
		}
	}
	fmt.Fprintf(w, "\n## Stagger and synchronized bursts\n\n")
	fmt.Fprintf(w, "%d balancers receive a request at the same moment, %d times (a synchronized burst: a cron job, a retry storm, a health check flap). ", FleetSize, burstSteps)
	fmt.Fprintf(w, "Without `stagger` every balancer walks the same period from the same start, so all of them send to the same backend at the same step. ")
	fmt.Fprintf(w, "With `stagger` each starts at its own random point of the period (here from its own seeded source, as separate processes would), and the step's requests spread out. ")
	fmt.Fprintf(w, "\"peak\" is the largest number of the %d balancers that chose one backend in a step; \"ideal\" is %d times the largest share (at least 1). ", FleetSize, FleetSize)
	fmt.Fprintf(w, "Overall shares stay exact either way.\n\n")
	fmt.Fprintf(w, "| strategy | weights | stagger | mean peak | ideal | worst peak | steps with all %d on one backend | share error |\n|---|---|---|---:|---:|---:|---:|---:|\n", FleetSize)
	for _, b := range bursts {
		fmt.Fprintf(w, "| %s | %s | %v | %.2f | %.2f | %d | %.1f%% | %.2f%% |\n", b.Strategy, b.Weights, onOff(b.Stagger),
			b.MeanPeak, b.Ideal, b.WorstPeak, 100*b.AllSame, 100*b.ShareErr)
	}
	fmt.Fprintln(w)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
