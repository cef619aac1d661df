package main

import (
	"testing"

	"paddock.dev/paddock/internal/testutil/deps"
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
	deps.Forbid(t, "paddock-guest", deps.List(t), forbiddenDeps)
}
