//go:build race

package faultsuite

// raceEnabled: under the race detector every host runs several times
// slower, so the suite sends half the load.
const raceEnabled = true
