package main

import (
	"os/exec"
	"strings"
	"testing"
)

// forbiddenDeps must never reach the guest binary: it runs in every
// sandbox and stays small (the host-side policy engine, proxy and
// gateway live in other binaries).
var forbiddenDeps = []string{
	"github.com/open-policy-agent/",
	"github.com/caddyserver/",
	"github.com/elazarl/goproxy",
	"github.com/spf13/cobra",
	"paddock.dev/paddock/policy",
	"paddock.dev/paddock/egress",
	"paddock.dev/paddock/gateway",
	"paddock.dev/paddock/hostd",
	"paddock.dev/paddock/hypervisor",
}

func TestGuestDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range forbiddenDeps {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("paddock-guest imports %s", dep)
			}
		}
	}
}
