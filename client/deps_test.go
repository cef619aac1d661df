package client

import (
	"strings"
	"testing"

	"paddock.dev/paddock/internal/testutil/deps"
)

// forbiddenDeps must never reach the SDK: a program that only talks to a
// daemon should not build the daemon (its policy engine, database,
// firewall and netlink code, proxy and gateway), and those do not build
// on macOS or Windows anyway.
var forbiddenDeps = []string{
	"github.com/open-policy-agent/",
	"github.com/caddyserver/",
	"modernc.org/",
	"github.com/google/nftables",
	"github.com/vishvananda/",
	"github.com/mdlayher/netlink",
	"github.com/elazarl/goproxy",
	"paddock.dev/paddock/hostd",
	"paddock.dev/paddock/hypervisor",
	"paddock.dev/paddock/policy",
	"paddock.dev/paddock/egress",
	"paddock.dev/paddock/gateway",
}

// allowedPaddock are the only packages of this module the SDK may reach:
// the wire types, the error kinds and the guest's wire types that api
// carries.
var allowedPaddock = map[string]bool{
	"paddock.dev/paddock/client":    true,
	"paddock.dev/paddock/api":       true,
	"paddock.dev/paddock/errdefs":   true,
	"paddock.dev/paddock/guest/api": true,
}

func TestClientDependencies(t *testing.T) {
	all := deps.List(t)
	deps.Forbid(t, "client", all, forbiddenDeps)
	for _, dep := range all {
		if strings.HasPrefix(dep, "paddock.dev/paddock/") && !allowedPaddock[dep] {
			t.Errorf("client imports %s: the SDK may use only api, errdefs and guest/api of this module", dep)
		}
	}
}
