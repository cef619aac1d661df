package mcp

import (
	"os/exec"
	"strings"
	"testing"
)

// The MCP server is a client of the public API: it must never build the
// daemon or reach its internals, only the Go SDK (client), the wire types
// and the error kinds.
var allowedPaddock = map[string]bool{
	"paddock.dev/paddock/mcp":       true,
	"paddock.dev/paddock/client":    true,
	"paddock.dev/paddock/api":       true,
	"paddock.dev/paddock/errdefs":   true,
	"paddock.dev/paddock/guest/api": true,
}

var forbiddenDeps = []string{
	"paddock.dev/paddock/hostd",
	"paddock.dev/paddock/hypervisor",
	"paddock.dev/paddock/policy",
	"paddock.dev/paddock/gateway",
	"github.com/open-policy-agent/",
	"github.com/caddyserver/",
	"modernc.org/",
}

func TestMCPDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed no packages")
	}
	for _, dep := range deps {
		for _, bad := range forbiddenDeps {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("mcp imports %s", dep)
			}
		}
		if strings.HasPrefix(dep, "paddock.dev/paddock/") && !allowedPaddock[dep] {
			t.Errorf("mcp imports %s: it may use only client, api, errdefs and guest/api of this module", dep)
		}
	}
}
