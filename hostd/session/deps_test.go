package session

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCoreImportsNoSibling holds the split's rule (docs/ARCHITECTURE.md,
// "The session core and its siblings"): the siblings (hostd/grants and
// the others) import the core, and the core never imports one of them,
// directly or through another package. Of hostd's own packages the core
// may link only the store, the ledger and auth; the siblings, the HTTP
// server (hostd/api), the daemon and the egress host are all refused.
func TestCoreImportsNoSibling(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const hostd = "paddock.dev/paddock/hostd/"
	allowed := map[string]bool{
		hostd + "session": true,
		hostd + "store":   true,
		hostd + "ledger":  true,
		hostd + "auth":    true,
	}
	seen := 0
	for _, dep := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dep, hostd) {
			continue
		}
		seen++
		if !allowed[dep] {
			t.Errorf("the session core (hostd/session) imports %s: siblings import the core, never the other way; "+
				"declare a hook or an interface in the core and have the sibling register on it in hostd/daemon", dep)
		}
	}
	if seen == 0 {
		t.Fatalf("go list named none of hostd's packages; the test reads nothing:\n%s", out)
	}
}
