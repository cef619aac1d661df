// Package doccheck keeps the docs' pointers into the code true: every
// path the architecture page and the docs name in backquotes (a folder,
// a file, or a package and one of its declarations such as
// `hostd/api.writeError`) must exist in the tree. A rename or a package
// split that leaves the docs behind fails here, not in a reader's hands.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// roots are the tree's top folders; a backquoted token starting with one
// of them is a pointer into the code. Others (/proc/…, /v1/…, a
// sandbox's paths) are not.
var roots = []string{"api", "client", "cmd", "docs", "errdefs", "egress", "gateway", "guest", "hostd", "hypervisor", "internal", "policy", "rego", "scripts"}

var quoted = regexp.MustCompile("`([A-Za-z0-9_./-]+)`")

func repoRoot(t *testing.T) string {
	dir, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repo root not found from %s: %v", dir, err)
	}
	return dir
}

// pointer reports whether tok names something in the tree.
func pointer(tok string) bool {
	for _, r := range roots {
		if tok == r+"/" || strings.HasPrefix(tok, r+"/") {
			return true
		}
	}
	return false
}

// declared reports whether the Go package in dir declares name (a
// function, type, variable or constant, or Type.Method).
func declared(t *testing.T, dir, name string) bool {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", dir, err)
	}
	recv, meth, isMethod := strings.Cut(name, ".")
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					// A bare name may be a function or a method of
					// any type (`guest/client.DialPort`).
					if !isMethod && d.Name.Name == name {
						return true
					}
					if d.Recv != nil && isMethod && d.Name.Name == meth && recvName(d.Recv.List[0].Type) == recv {
						return true
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.Name == name {
								return true
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.Name == name {
									return true
								}
							}
						}
					}
				}
			}
		}
	}
	return false
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	}
	return ""
}

// check returns what tok names that does not exist, or "".
func check(t *testing.T, root, tok string) string {
	clean := strings.TrimSuffix(tok, "/")
	// pkg.TestName/subtest names a test's subtest: check the test.
	if i := strings.Index(clean, ".Test"); i > 0 {
		if j := strings.Index(clean[i:], "/"); j > 0 {
			clean = clean[:i+j]
		}
	}
	if _, err := os.Stat(filepath.Join(root, clean)); err == nil {
		return ""
	}
	// pkg/path.Name or pkg/path.Type.Method: the part before the first
	// dot after the last slash is the package folder.
	slash := strings.LastIndex(clean, "/")
	dot := strings.Index(clean[slash+1:], ".")
	if dot < 0 {
		return "no such file or folder"
	}
	dir := clean[:slash+1+dot]
	name := clean[slash+1+dot+1:]
	if st, err := os.Stat(filepath.Join(root, dir)); err != nil || !st.IsDir() {
		return "no such file, folder or package"
	}
	if name == "" || !declared(t, filepath.Join(root, dir), name) {
		return "package " + dir + " declares no " + name
	}
	return ""
}

func TestDocPointers(t *testing.T) {
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs found: %v", err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	checked := 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range quoted.FindAllStringSubmatch(line, -1) {
				tok := m[1]
				if !pointer(tok) {
					continue
				}
				checked++
				if why := check(t, root, tok); why != "" {
					t.Errorf("%s:%d: `%s`: %s", filepath.Base(doc), i+1, tok, why)
				}
			}
		}
	}
	// The architecture page alone names well over a hundred places; a
	// pattern that stopped matching would pass vacuously.
	if checked < 100 {
		t.Fatalf("only %d pointers checked: the pattern no longer finds the docs' paths", checked)
	}
	t.Logf("%d pointers checked", checked)
}

func TestCheckCatchesStalePointers(t *testing.T) {
	root := repoRoot(t)
	for _, tok := range []string{"hostd/nosuch/", "hostd/api/nosuch.go", "errdefs.NoSuchKind", "errdefs.StatusError.NoSuch", "errdefs.TestNoSuch/sub"} {
		if check(t, root, tok) == "" {
			t.Errorf("%s passed", tok)
		}
	}
	for _, tok := range []string{"errdefs/", "errdefs/errdefs.go", "errdefs.HTTPStatus", "errdefs.StatusError.Unwrap", "errdefs.ErrConflict", "errdefs.CodedError", "errdefs.Unwrap", "errdefs.TestNoKind/sub"} {
		if why := check(t, root, tok); why != "" {
			t.Errorf("%s: %s", tok, why)
		}
	}
}
