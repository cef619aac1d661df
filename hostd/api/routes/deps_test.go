package routes

import (
	"strings"
	"testing"

	"paddock.dev/paddock/internal/testutil/deps"
)

// TestDependencies keeps the table a leaf the gateway can import: it
// holds data, not the server, so it links none of hostd's packages but
// hostd/auth (the access classes), none of the daemon's other parts, and
// no module outside this one. Paddock's wire packages (api, errdefs,
// guest/api) import nothing of the server and may come along.
func TestDependencies(t *testing.T) {
	const mod = "paddock.dev/paddock/"
	allowed := map[string]bool{mod + "hostd/api/routes": true, mod + "hostd/auth": true}
	forbidden := []string{mod + "hostd/", mod + "policy", mod + "egress", mod + "gateway", mod + "hypervisor", mod + "client", mod + "cmd/"}
	for _, dep := range deps.List(t) {
		first, _, _ := strings.Cut(dep, "/")
		if !strings.HasPrefix(dep, mod) {
			if strings.Contains(first, ".") {
				t.Errorf("hostd/api/routes imports %s, from another module", dep)
			}
			continue
		}
		for _, bad := range forbidden {
			if strings.HasPrefix(dep, bad) && !allowed[dep] {
				t.Errorf("hostd/api/routes imports %s", dep)
			}
		}
	}
}
