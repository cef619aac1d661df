package api_test

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
)

// wireSpellings are pieces of the sandbox's wire constants (sandbox.go)
// that no string literal outside guest/api may hold: the rest of the tree
// takes them from this package, so the host, the backends and the guest
// cannot drift apart. Tests may spell them, to check the values.
var wireSpellings = []string{
	"proxy.sock", "dns.sock", "redirect.sock",
	"127.0.0.1:3128", "PADDOCK-REDIRECT",
	"/etc/ssl/certs/ca-certificates.crt", "paddock-extra.pem",
	"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
	"http_proxy=", "https_proxy=", "no_proxy=", "HTTP_PROXY=", "HTTPS_PROXY=", "NO_PROXY=",
	"90paddock-proxy", "nameserver 127.0.0.1",
}

// TestWireConstantsSpelledOnce walks the module's non-test Go files and
// fails on a string literal outside guest/api that holds one of
// wireSpellings.
func TestWireConstantsSpelledOnce(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no module at %s: %v", root, err)
	}
	fset := token.NewFileSet()
	scanned := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.ToSlash(filepath.Dir(rel)) == "guest/api" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		scanned++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, w := range wireSpellings {
				if strings.Contains(v, w) {
					t.Errorf("%s: %q spells %q: use the constant in guest/api", fset.Position(lit.Pos()), v, w)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 50 {
		t.Fatalf("scanned only %d files", scanned)
	}
}
