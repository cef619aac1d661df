package rego

import (
	"slices"
	"strings"
	"testing"
)

func TestModules(t *testing.T) {
	names := Names()
	for _, want := range []string{"process.rego", "http.rego", "approval.rego", "lib.rego"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not embedded (have %v)", want, names)
		}
		if !slices.Contains(names, strings.TrimSuffix(want, ".rego")+"_test.rego") {
			t.Errorf("%s has no test module beside it", want)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("Names is not sorted: %v", names)
	}
	m := Modules()
	if !strings.HasPrefix(strings.TrimLeft(m["approval.rego"], "# \n"), "Decides") || !strings.Contains(m["process.rego"], "package paddock.process\n") {
		t.Error("module text is not the file's")
	}
	m["process.rego"] = "changed"
	if Modules()["process.rego"] == "changed" {
		t.Error("Modules shares its map")
	}
	if !IsTest("x_test.rego") || IsTest("x.rego") {
		t.Error("IsTest")
	}
}
