package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lbpack/lbpack/core"
)

// fleetChildEnv makes the test binary act as one member of the fleet.
const fleetChildEnv = "LBPACK_BENCH_FLEET_CHILD"

// fleetChildKeys is how many keys each process maps.
const fleetChildKeys = 5000

// TestMain lets the test binary serve as a fleet member: it prints, per
// url_hash mode, a digest of its mapping and exits.
func TestMain(m *testing.M) {
	if os.Getenv(fleetChildEnv) == "1" {
		for _, mode := range FleetMappingModes {
			got, err := FleetDigest(mode, fleetChildKeys)
			if err != nil {
				fmt.Println(mode, "error", err)
				os.Exit(1)
			}
			fmt.Printf("%s %x %s\n", mode, sha256.Sum256([]byte(strings.Join(got, "\n"))), got[0])
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestFleetAcrossProcesses runs FleetSize separate processes, each building
// its own url_hash balancers from one configuration, and requires that every
// process maps every key identically in every mode: no per-process seed.
func TestFleetAcrossProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for f := 0; f < FleetSize; f++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, exe)
		// Each process has its own runtime hash seed and address layout;
		// only the configuration is shared.
		cmd.Env = append(os.Environ(), fleetChildEnv+"=1", fmt.Sprintf("LBPACK_FLEET_MEMBER=%d", f))
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("fleet member %d: %v\n%s", f, err, out)
		}
		lines := 0
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			lines++
		}
		if lines != len(FleetMappingModes) {
			t.Fatalf("fleet member %d printed %d lines, want %d:\n%s", f, lines, len(FleetMappingModes), out)
		}
		if f == 0 {
			first = string(out)
			continue
		}
		if string(out) != first {
			t.Fatalf("fleet member %d maps differently:\n%s\nmember 0:\n%s", f, out, first)
		}
	}
}

// TestFleetMappingInProcess builds FleetSize balancers per mode in one
// process: no key may map differently.
func TestFleetMappingInProcess(t *testing.T) {
	diff, err := FleetMapping(2000)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range FleetMappingModes {
		d, ok := diff[mode]
		if !ok {
			t.Fatalf("mode %s not measured", mode)
		}
		if d != 0 {
			t.Errorf("mode %s: %d keys map differently across the fleet", mode, d)
		}
	}
}

// TestFleetStagger checks the burst table: without stagger all balancers
// move in step; with stagger no step sends them all to one backend when the
// weights allow better, and the overall shares stay exact over whole periods.
func TestFleetStagger(t *testing.T) {
	for _, strategy := range []string{core.SmoothWRR, core.GCDWRR} {
		for _, w := range BurstWeightSets {
			off, err := FleetBursts(strategy, w, false, 1)
			if err != nil {
				t.Fatal(err)
			}
			if off.MeanPeak != FleetSize || off.AllSame != 1 {
				t.Errorf("%s %v without stagger: mean peak %.2f, all-same %.2f; want %d and 1 (lockstep)",
					strategy, w, off.MeanPeak, off.AllSame, FleetSize)
			}
			on, err := FleetBursts(strategy, w, true, 1)
			if err != nil {
				t.Fatal(err)
			}
			// 8 random starting points in a period of at least 10 picks:
			// all eight on one backend at every step would mean no stagger.
			if on.MeanPeak > float64(FleetSize)*0.75 || on.AllSame > 0.05 {
				t.Errorf("%s %v with stagger: mean peak %.2f, all-same %.2f: bursts still in step",
					strategy, w, on.MeanPeak, on.AllSame)
			}
			if on.MeanPeak < on.Ideal-1e-9 {
				t.Errorf("%s %v with stagger: mean peak %.2f below the ideal %.2f: impossible", strategy, w, on.MeanPeak, on.Ideal)
			}
		}
	}
}
