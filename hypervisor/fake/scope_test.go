package fake_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"paddock.dev/paddock/hypervisor"
	_ "paddock.dev/paddock/hypervisor/all"
	"paddock.dev/paddock/hypervisor/fake"
)

// moduleRoot is the directory holding go.mod, found upwards from here.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// isTestHelper says whether dir (relative to the module) is a package
// made for tests only, named as the standard library's httptest is
// (hostd/daemon/daemontest, hostd/session/sessiontest): such a package may
// import the fake, and only tests, other helpers and the bench binary
// (cmd/paddock-bench, which starts daemons the way tests do) may import
// it; cmd/paddock's TestAttackServeHasNoFake holds the daemon's binary.
func isTestHelper(dir string) bool {
	base := dir[strings.LastIndex(dir, "/")+1:]
	return strings.HasSuffix(base, "test") && base != "test"
}

// TestOnlyTestsReachTheFake: outside tests, no package but hypervisor/fake
// names agent.Config's Unprivileged or CwdInRoot (so no real backend, paddock-guest
// flag or VM init can turn it on) and none imports hypervisor/fake (so
// `paddock serve` cannot select it); hypervisor/all does not register it.
func TestOnlyTestsReachTheFake(t *testing.T) {
	if _, err := hypervisor.Lookup(fake.Name); err == nil {
		t.Errorf("backend %q is registered by hypervisor/all", fake.Name)
	}
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var scanned int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		if dir == "hypervisor/fake" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		scanned++
		helper := isTestHelper(dir)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "paddock.dev/paddock/hypervisor/fake" && !helper {
				t.Errorf("%s imports hypervisor/fake: only tests and test helpers (a package named *test) may", rel)
			}
			if strings.HasPrefix(p, "paddock.dev/paddock/") && isTestHelper(strings.TrimPrefix(p, "paddock.dev/paddock/")) && !helper && dir != "cmd/paddock-bench" {
				t.Errorf("%s imports the test helper %s: only tests may", rel, p)
			}
		}
		if dir == "guest/agent" {
			return nil // where the field is defined and read
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && (id.Name == "Unprivileged" || id.Name == "CwdInRoot") {
				t.Errorf("%s: %s names %s: only hypervisor/fake may turn it on", rel, fset.Position(id.Pos()), id.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 50 {
		t.Fatalf("scanned only %d files: is %s the module?", scanned, root)
	}
}
