// Package rego holds Paddock's built-in Rego policy modules, embedded in
// the binary, with their tests beside them:
//
//   - process.rego (package paddock.process): whether a session may run a
//     command, from its process.allow, deny and ask patterns.
//   - http.rego (package paddock.http): the egress decisions of
//     egress/rules (name, tunnel, request) and whether a credential grant
//     applies to a request.
//   - approval.rego (package paddock.approval): who may decide a held
//     command, and how long an approval request lives.
//   - lib.rego (package paddock.lib): the matching helpers they share.
//
// Each has a _test.rego that `paddock policy test` and policy's Go tests
// run with OPA's tester. The engine that compiles and evaluates them is
// package policy; this package only carries the text, so importing it
// costs nothing.
package rego

import (
	"embed"
	"io/fs"
	"maps"
	"slices"
	"strings"
)

//go:embed *.rego
var files embed.FS

var modules = func() map[string]string {
	out := map[string]string{}
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	for _, e := range entries {
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			panic(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}()

// Modules returns every embedded module, tests included, by file name
// ("process.rego", "process_test.rego", …). The map is the caller's.
func Modules() map[string]string { return maps.Clone(modules) }

// Names returns the file names of the embedded modules, sorted.
func Names() []string { return slices.Sorted(maps.Keys(modules)) }

// IsTest reports whether a module file name is a test module
// ("…_test.rego").
func IsTest(name string) bool { return strings.HasSuffix(name, "_test.rego") }
