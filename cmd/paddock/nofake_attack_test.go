package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAttackServeHasNoFake: the fake backend (hypervisor/fake) runs
// every command on the host with no isolation, and the test daemon
// (daemontest) builds daemons for tests; neither may be linked into the
// paddock binary, so no flag, config or request of `paddock serve` can
// choose the fake backend or turn on the guest agent's Unprivileged or
// CwdInRoot (only the fake sets them). The guest binary has its own
// dependency test (cmd/paddock-guest), which keeps out all of hypervisor.
func TestAttackServeHasNoFake(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go tool not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"paddock.dev/paddock/hypervisor/fake", "paddock.dev/paddock/hostd/daemon/daemontest", "paddock.dev/paddock/hostd/session/sessiontest", "paddock.dev/paddock/internal/testutil"} {
			if dep == bad {
				t.Errorf("paddock imports %s", dep)
			}
		}
	}
}
