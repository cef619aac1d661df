//go:build race

package policy

// raceEnabled: the race detector slows decisions some tenfold, so the
// long table tests sample their inputs.
const raceEnabled = true
