package daemontest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"paddock.dev/paddock/hostd/auth"
)

// TenantTokens writes a tenants file (in a test temp dir) with one tenant
// of each name, each with a new token, and returns the option that gives
// New that file and the tokens, in the order of names.
func TenantTokens(t testing.TB, names ...string) (Option, []string) {
	t.Helper()
	type tenant struct {
		Name        string `json:"name"`
		TokenSHA256 string `json:"token_sha256"`
	}
	var file struct {
		Tenants []tenant `json:"tenants"`
	}
	toks := make([]string, len(names))
	for i, n := range names {
		tok, sum := auth.NewTenantToken()
		toks[i] = tok
		file.Tenants = append(file.Tenants, tenant{Name: n, TokenSHA256: sum})
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tenants.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return WithTenants(path), toks
}
