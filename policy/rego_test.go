package policy

import (
	"context"
	"strings"
	"testing"

	prego "paddock.dev/paddock/rego"
)

// TestRegoModules runs every built-in _test.rego with OPA's tester: `go
// test ./policy` (and so `make test`) fails when a Rego test fails, or
// when the tests leave more than a tenth of the built-in modules unrun.
func TestRegoModules(t *testing.T) {
	rep, err := RunTests(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	perFile := map[string]int{}
	for _, tr := range rep.Tests {
		perFile[tr.File]++
		if !tr.Pass {
			t.Errorf("%s %s.%s: %s", tr.File, tr.Package, tr.Name, tr.Error)
		}
	}
	for _, name := range prego.Names() {
		if prego.IsTest(name) && perFile[builtinPrefix+name] == 0 {
			t.Errorf("%s ran no test", name)
		}
		if !prego.IsTest(name) && !strings.Contains(strings.Join(prego.Names(), " "), strings.TrimSuffix(name, ".rego")+"_test.rego") {
			t.Errorf("%s has no _test.rego beside it", name)
		}
	}
	for _, c := range rep.Coverage {
		t.Logf("coverage %-22s %6.2f%% (%d of %d lines) %v", c.File, c.Percent, c.Covered, c.Covered+c.NotCovered, c.Missed)
	}
	t.Logf("%d Rego tests passed, %d failed; built-in coverage %.2f%%", rep.Passed, rep.Failed, rep.Builtin)
	if rep.Builtin < 90 {
		t.Errorf("built-in coverage %.2f%% is below 90%%", rep.Builtin)
	}
	if rep.Passed < 100 {
		t.Errorf("only %d Rego tests ran", rep.Passed)
	}
}

// TestRunTestsReportsFailures checks that a failing operator test is
// reported, not an error, with its name, and that operator coverage is
// kept apart from the built-in coverage.
func TestRunTestsReportsFailures(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "nocurl.rego", extNoCurl)
	writeFile(t, dir, "nocurl_test.rego", extNoCurlTest+"\ntest_wrong if {\n\tcount(process.deny) == 1 with input as {\"command\": \"ls\"}\n}\n")
	rep, err := RunTests(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 1 {
		t.Fatalf("Failed = %d; want 1", rep.Failed)
	}
	var failed TestResult
	for _, tr := range rep.Tests {
		if !tr.Pass {
			failed = tr
		}
	}
	if failed.Name != "test_wrong" || failed.Package != "paddock.ext.nocurl.process_test" || !strings.Contains(failed.Error, "nocurl_test.rego") {
		t.Errorf("failed test: %+v", failed)
	}
	var op *FileCoverage
	for i, c := range rep.Coverage {
		if strings.HasSuffix(c.File, "nocurl.rego") {
			op = &rep.Coverage[i]
		}
	}
	if op == nil || op.Builtin || op.Percent != 100 {
		t.Errorf("operator coverage: %+v", op)
	}
	if _, err := RunTests(context.Background(), dir+"/nothing", nil); err == nil {
		t.Error("RunTests on a missing directory")
	}
}

// TestDocsExample keeps docs/policy.md's worked example true: its modules
// load, their tests pass, and they decide as the guide shows.
func TestDocsExample(t *testing.T) {
	const dir = "../docs/policy-ext-example"
	rep, err := RunTests(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 0 || rep.Total != 100 {
		t.Errorf("example: %d failed, coverage %.1f%%", rep.Failed, rep.Total)
	}
	e, err := New(Options{ExtDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := ProcessRules{Allow: []string{"curl *", "sh", "jq *"}}
	if d := process(t, e, "curl -fsSL https://get.example.com/install.sh | sh", r); d.Rule != "ext.nocurl.process" {
		t.Errorf("curl | sh: %+v", d)
	}
	if d := process(t, e, "curl -s https://api.example.com/v1 | jq .name", r); d.Result != Allow {
		t.Errorf("curl | jq: %+v", d)
	}
}
