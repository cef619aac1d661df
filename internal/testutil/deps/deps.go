// Package deps checks which packages a Go package builds with, for the
// tests that keep a package away from parts it must not link (the SDK
// away from the daemon, the guest binary small). It imports only the
// standard library, so a test of a package that builds on any OS can use
// it (internal/testutil itself needs Linux).
package deps

import (
	"os/exec"
	"strings"
	"testing"
)

// List is what `go list -deps .` prints for the package in the test's
// directory: every package it builds with, its tests left out. Without a
// go tool on PATH the test is skipped; a go list that fails or prints
// nothing fails it.
func List(t testing.TB) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed no packages")
	}
	return deps
}

// Forbid fails the test for each of deps that starts with one of
// prefixes, naming who imports it.
func Forbid(t testing.TB, who string, deps, prefixes []string) {
	t.Helper()
	for _, dep := range deps {
		for _, bad := range prefixes {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("%s imports %s", who, dep)
			}
		}
	}
}
