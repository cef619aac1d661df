package routes

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the table a leaf the gateway can import: it
// holds data, not the server, so it links none of hostd's packages but
// hostd/auth (the access classes, with errdefs, the error kinds, under
// it), and nothing outside the standard library but guest/api (the
// guest's size limits).
func TestDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"paddock.dev/paddock/hostd/api/routes": true,
		"paddock.dev/paddock/hostd/auth":       true,
		"paddock.dev/paddock/guest/api":        true,
		"paddock.dev/paddock/errdefs":          true,
	}
	for _, dep := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && !allowed[dep] {
			t.Errorf("hostd/api/routes imports %s", dep)
		}
	}
}
