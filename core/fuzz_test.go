package core

import (
	"strings"
	"testing"
	"time"
)

// FuzzNew builds balancers from arbitrary input for every strategy: New
// either fails with an error naming a field or returns a balancer whose picks
// do not panic.
func FuzzNew(f *testing.F) {
	f.Add(uint8(0), "10.0.0.1:80", 5, uint8(3), uint8(0), "", 0.0, false, int64(0))
	f.Add(uint8(1), "[::1]:8080", 0, uint8(1), uint8(1), "maglev", 1.5, true, int64(-1))
	f.Add(uint8(2), "host", -3, uint8(2), uint8(2), "bounded", 1.25, false, int64(time.Second))
	f.Add(uint8(3), ":0", MaxWeight+1, uint8(0), uint8(4), "ketama", 0.5, true, int64(0))
	f.Add(uint8(7), "a b:80", 1, uint8(9), uint8(7), "nope", -1.0, false, int64(0))
	f.Add(uint8(8), "x:65535", MaxWeight, uint8(200), uint8(255), "modulo", 0.0, true, int64(5))
	f.Fuzz(func(t *testing.T, strategy uint8, addr string, weight int, n, flags uint8, hashMode string, loadFactor float64, stagger bool, decay int64) {
		names := append(Strategies(), "", "unknown")
		cfg := Config{
			Strategy:   names[int(strategy)%len(names)],
			HashMode:   hashMode,
			LoadFactor: loadFactor,
			Stagger:    stagger,
			TwoChoices: flags&64 != 0,
			DecayTime:  time.Duration(decay),
			Rand:       seededRandFunc(int64(strategy)),
		}
		count := int(n) % 40
		for i := 0; i < count; i++ {
			be := Backend{Address: testAddr(i), Weight: 1 + (weight+i)%7, Down: (int(flags)+i)%5 == 0, Backup: flags&128 != 0 && i%3 == 2}
			if be.Weight < 1 {
				be.Weight = 1
			}
			if i == int(flags)%(count) {
				// One backend takes the fuzzed address and weight as given.
				be.Address, be.Weight = addr, weight
			}
			cfg.Backends = append(cfg.Backends, be)
		}
		b, err := New(cfg)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "lbpack: ") {
				t.Fatalf("error without the package prefix: %v", err)
			}
			return
		}
		for i := 0; i < 20; i++ {
			p, err := b.choose(addr)
			if (p < 0) != (err == ErrNoBackend) || p >= b.Len() {
				t.Fatalf("%s: pick %d, %v", cfg.Strategy, p, err)
			}
		}
	})
}

// FuzzPick drives the strategies of this file's set with arbitrary weights,
// down and backup flags and availability: every pick returns a backend that
// is up and available, from the primaries while one of them is, or
// ErrNoBackend exactly when none is.
func FuzzPick(f *testing.F) {
	f.Add(uint8(0), []byte{5, 3, 2}, uint64(0), uint64(0), uint64(0), uint8(10), int64(1))
	f.Add(uint8(1), []byte{6, 3, 1}, uint64(1), uint64(4), uint64(3), uint8(30), int64(2))
	f.Add(uint8(2), []byte{1, 1, 1, 1}, uint64(15), uint64(0), uint64(0), uint8(5), int64(3))
	f.Add(uint8(3), []byte{9, 0, 200, 7, 7}, uint64(2), uint64(24), uint64(7), uint8(50), int64(4))
	f.Add(uint8(4), []byte{255, 254, 1}, uint64(0), uint64(0), uint64(6), uint8(40), int64(5))
	f.Add(uint8(0), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, uint64(0xaaa), uint64(0x800), uint64(0x555), uint8(99), int64(6))
	f.Fuzz(func(t *testing.T, strategy uint8, weights []byte, down, backup, refuse uint64, n uint8, seed int64) {
		mine := []string{SmoothWRR, GCDWRR, RoundRobin, Random, WeightedRandom}
		if len(weights) == 0 || len(weights) > 64 {
			return
		}
		cfg := Config{Strategy: mine[int(strategy)%len(mine)], Rand: seededRandFunc(seed), Stagger: seed%2 == 0}
		if cfg.Strategy != SmoothWRR && cfg.Strategy != GCDWRR {
			cfg.Stagger = false
		}
		for i, w := range weights {
			cfg.Backends = append(cfg.Backends, Backend{
				Address: testAddr(i),
				Weight:  int(w)*int(w)%(MaxWeight/1000) + 1,
				Down:    down>>uint(i)&1 == 1,
				Backup:  backup>>uint(i)&1 == 1 && i > 0,
			})
		}
		b, err := New(cfg)
		if err != nil {
			if strings.Contains(err.Error(), "every backend is a backup") {
				return
			}
			t.Fatalf("New: %v", err)
		}
		for i := 0; i < int(n); i++ {
			// The refusal pattern rotates so that picks see changing sets.
			mask := refuse>>uint(i%8) | refuse<<uint(64-i%8)
			avail := func(j int) bool { return mask>>uint(j)&1 == 0 }
			usable := func(j int) bool { return !cfg.Backends[j].Down && avail(j) }
			p, err := b.chooseFunc("", avail)
			primaryUp, anyUp := false, false
			for j, be := range cfg.Backends {
				if usable(j) {
					anyUp = true
					primaryUp = primaryUp || !be.Backup
				}
			}
			if err != nil {
				if err != ErrNoBackend || p != -1 || anyUp {
					t.Fatalf("%s pick %d: %d, %v with a backend usable", cfg.Strategy, i, p, err)
				}
				continue
			}
			if p < 0 || p >= len(cfg.Backends) {
				t.Fatalf("%s pick %d: index %d of %d", cfg.Strategy, i, p, len(cfg.Backends))
			}
			if !usable(p) || (primaryUp && cfg.Backends[p].Backup) {
				t.Fatalf("%s pick %d: %d (down %v backup %v available %v), primary up %v", cfg.Strategy, i, p, cfg.Backends[p].Down, cfg.Backends[p].Backup, avail(p), primaryUp)
			}
		}
	})
}
