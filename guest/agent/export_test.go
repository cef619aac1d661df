package agent

import (
	"testing"
	"time"
)

// SetForwardDrainTimeout shortens forwardDrainTimeout for the length of
// one test.
func SetForwardDrainTimeout(t testing.TB, d time.Duration) {
	old := forwardDrainTimeout.Swap(int64(d))
	t.Cleanup(func() { forwardDrainTimeout.Store(old) })
}

// ReadOOMKills is readOOMKills for the tests.
var ReadOOMKills = readOOMKills
