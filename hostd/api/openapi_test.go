package api_test

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/internal/testutil"
)

// TestOpenAPIListsEveryRoute compares the router's routes with the paths
// and methods docs/api/openapi.yaml describes: neither may have one the
// other lacks.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "docs", "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pathRE := regexp.MustCompile(`^  (/[^:]*):\s*$`)
	methodRE := regexp.MustCompile(`^    (get|put|post|delete|patch|head|options):\s*$`)
	var documented []string
	inPaths, cur := false, ""
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "paths:") {
			inPaths = true
			continue
		}
		if inPaths && line != "" && !strings.HasPrefix(line, " ") {
			inPaths = false
		}
		if !inPaths {
			continue
		}
		if m := pathRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
		} else if m := methodRE.FindStringSubmatch(line); m != nil && cur != "" {
			documented = append(documented, strings.ToUpper(m[1])+" "+cur)
		}
	}
	served := api.New(nil, sha256.Sum256(nil), nil).Routes()
	sort.Strings(documented)
	sort.Strings(served)
	if len(served) < 20 {
		t.Fatalf("only %d routes served: the parse or the router is wrong", len(served))
	}
	if d := cmp.Diff(served, documented); d != "" {
		t.Errorf("router (-) and openapi.yaml (+) differ:\n%s", d)
	}
}
