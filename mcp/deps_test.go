package mcp

import (
	"strings"
	"testing"

	"paddock.dev/paddock/internal/testutil/deps"
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
	all := deps.List(t)
	deps.Forbid(t, "mcp", all, forbiddenDeps)
	for _, dep := range all {
		if strings.HasPrefix(dep, "paddock.dev/paddock/") && !allowedPaddock[dep] {
			t.Errorf("mcp imports %s: it may use only client, api, errdefs and guest/api of this module", dep)
		}
	}
}
