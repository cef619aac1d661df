package hypervisor_test

import (
	"testing"

	"paddock.dev/paddock/hypervisor/fake"
)

// TestFakeConformance runs the parts of the conformance suite that hold
// for a backend without isolation against hypervisor/fake, which is never
// registered (so the suite's own backend list stays the real backends).
// Left out: what needs the machine's own root, hostname, PID space, user
// or network (the fake's commands see the host's), and what its own tests
// cover through the files API instead (checkpoint, restore, fork, stop).
// It needs no root: `make test-nonroot` runs it as an ordinary user.
func TestFakeConformance(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, backendEnv)
	}{
		{"ExitCodes", conformanceExitCodes},
		{"OutputCap", conformanceOutputCap},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := fake.New(dir)
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			c.fn(t, backendEnv{name: fake.Name, b: b, stateDir: dir})
		})
	}
}
