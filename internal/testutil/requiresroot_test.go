package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// requiresRootChild marks this test binary as run by
// TestRequiresRootInTheNonrootRun, to call RequiresRoot and nothing else.
const requiresRootChild = "PADDOCK_TESTUTIL_REQUIRES_ROOT_CHILD"

// TestRequiresRootInTheNonrootRun: RequiresRoot lets root through, skips
// an ordinary user, and fails an ordinary user in the non-root run
// (NonrootRunEnv), so a test on that run's list that asks for root fails
// rather than skipping. It runs itself in a child process to see the
// child's verdict; `make test-nonroot` runs it as uid 65534, where the
// two ordinary-user cases are the ones checked, and `make test` as root.
func TestRequiresRootInTheNonrootRun(t *testing.T) {
	if os.Getenv(requiresRootChild) == "1" {
		RequiresRoot(t)
		t.Log("went past RequiresRoot")
		return
	}
	child := func(nonroot bool) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRequiresRootInTheNonrootRun$", "-test.v", "-test.count=1")
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, NonrootRunEnv+"=") {
				env = append(env, kv)
			}
		}
		env = append(env, requiresRootChild+"=1")
		if nonroot {
			env = append(env, NonrootRunEnv+"=1")
		}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, nonroot := range []bool{false, true} {
		out, err := child(nonroot)
		switch {
		case os.Geteuid() == 0:
			if err != nil || !strings.Contains(out, "went past RequiresRoot") {
				t.Errorf("as root (non-root run %v): %v\n%s", nonroot, err, out)
			}
		case !nonroot:
			if err != nil || !strings.Contains(out, "--- SKIP") || !strings.Contains(out, "needs root") {
				t.Errorf("as an ordinary user: want a skip saying it needs root: %v\n%s", err, out)
			}
		default:
			if err == nil || !strings.Contains(out, "--- FAIL") || strings.Contains(out, "went past RequiresRoot") ||
				!strings.Contains(out, "in the non-root run") {
				t.Errorf("as an ordinary user in the non-root run: want a failure that says why: %v\n%s", err, out)
			}
		}
	}
}
