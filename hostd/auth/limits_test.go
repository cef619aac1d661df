package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/hostd/auth"
)

// TestTenantLimits: the tenants file's default_limits and per-tenant
// limits, a tenant's own over the defaults field by field, bounds refused
// naming the entry, and limits kept by a rewrite (paddock tenant add).
func TestTenantLimits(t *testing.T) {
	h1, h2, h3 := strings.Repeat("ab", 32), strings.Repeat("cd", 32), strings.Repeat("ef", 32)
	body := `{"default_limits": {"disk_mb": 4096, "cpus": 4},
	  "tenants": [
	    {"name": "a", "token_sha256": "` + h1 + `", "limits": {"disk_mb": 10240, "memory_mb": 8192}},
	    {"name": "b", "token_sha256": "` + h2 + `"},
	    {"name": "c", "token_sha256": "` + h3 + `", "limits": {"cpus": 0.5}}]}`
	tf, err := auth.ParseTenantsFile([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tf.Check()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]auth.Limits{
		"a":       {DiskMB: 10240, MemoryMB: 8192, CPUs: 4},
		"b":       {DiskMB: 4096, CPUs: 4},
		"c":       {DiskMB: 4096, CPUs: 0.5},
		"unknown": {},
	} {
		if d := cmp.Diff(want, ts.LimitsOf(name)); d != "" {
			t.Errorf("limits of %s (-want +got):\n%s", name, d)
		}
	}
	var none *auth.Tenants
	if (none.LimitsOf("a") != auth.Limits{}) {
		t.Error("a nil set has limits")
	}
	for _, tc := range []struct{ body, want string }{
		{`{"default_limits": {"disk_mb": -1}, "tenants": []}`, "default_limits.disk_mb -1"},
		{`{"default_limits": {"memory_mb": 1073741825}, "tenants": []}`, "default_limits.memory_mb 1073741825"},
		{`{"tenants": [{"name": "a", "token_sha256": "` + h1 + `", "limits": {"cpus": -2}}]}`, "tenants[0] (a).limits.cpus -2"},
		{`{"tenants": [{"name": "a", "token_sha256": "` + h1 + `", "limits": {"cpus": 0.001}}]}`, "at least 0.01"},
		{`{"tenants": [{"name": "a", "token_sha256": "` + h1 + `", "limits": {"cpus": 70000}}]}`, "limits.cpus 70000"},
		{`{"tenants": [{"name": "a", "token_sha256": "` + h1 + `", "limits": {"disk": 1}}]}`, `unknown field "disk"`},
	} {
		tf, err := auth.ParseTenantsFile([]byte(tc.body))
		if err == nil {
			_, err = tf.Check()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
	// A rewrite keeps them.
	p := filepath.Join(t.TempDir(), "tenants.json")
	if err := auth.WriteTenantsFile(p, tf); err != nil {
		t.Fatal(err)
	}
	back, err := auth.LoadTenants(p)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ts.LimitsOf("a"), back.LimitsOf("a")); d != "" {
		raw, _ := os.ReadFile(p)
		t.Errorf("limits lost in a rewrite (-want +got):\n%s\n%s", d, raw)
	}
}
