package policy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestReport is what a run of the Rego tests found.
type TestReport struct {
	Tests    []TestResult   `json:"tests"`
	Passed   int            `json:"passed"`
	Failed   int            `json:"failed"`
	Coverage []FileCoverage `json:"coverage,omitempty"` // per module file (tests left out), sorted by file
	// Total is the coverage of every module file together; Builtin of the
	// built-in ones alone (percent).
	Total   float64 `json:"total_coverage"`
	Builtin float64 `json:"builtin_coverage"`
}

// TestResult is one test rule.
type TestResult struct {
	Package  string        `json:"package"` // paddock.process_test
	Name     string        `json:"name"`    // test_deny_pattern_denies
	File     string        `json:"file"`
	Pass     bool          `json:"pass"`
	Error    string        `json:"error,omitempty"` // why it failed: an evaluation error, or "false" / "undefined"
	Duration time.Duration `json:"duration_ns"`
}

// FileCoverage is the share of one module's lines that the tests ran.
type FileCoverage struct {
	File       string  `json:"file"`
	Builtin    bool    `json:"builtin"`
	Covered    int     `json:"covered_lines"`
	NotCovered int     `json:"not_covered_lines"`
	Percent    float64 `json:"percent"`
	// Missed lists the line ranges no test ran ("12", "30-33").
	Missed []string `json:"missed,omitempty"`
}

// RunTests runs every test rule ("test_…") of the built-in modules and,
// when extDir is not empty, the operator's (a directory or a bundle, read
// as the engine reads it: a bundle's signature checked with key, when
// set), with coverage. A failing test is in the report,
// not an error; the error is for modules that cannot be read or compiled.
func RunTests(ctx context.Context, extDir string, key *BundleKey) (*TestReport, error) {
	builtin, operator, err := sources(extDir, key)
	if err != nil {
		return nil, err
	}
	all := make(map[string]*ast.Module, len(builtin)+len(operator))
	for _, set := range []map[string]*ast.Module{builtin, operator} {
		for n, m := range set {
			all[n] = m
		}
	}
	return runTests(ctx, all, true)
}

func runTests(ctx context.Context, mods map[string]*ast.Module, coverage bool) (*TestReport, error) {
	var cov *cover.Cover
	r := tester.NewRunner().
		SetCompiler(newCompiler()).
		SetModules(copyModules(mods)).
		CapturePrintOutput(true).
		RaiseBuiltinErrors(true).
		SetTimeout(10 * time.Second)
	if coverage {
		cov = cover.New()
		r = r.SetCoverageQueryTracer(cov).SetCoverageRuns(nil)
	}
	ch, err := r.RunTests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("compiling the modules for their tests: %w", err)
	}
	rep := &TestReport{}
	for res := range ch {
		if res.Skip {
			continue
		}
		tr := TestResult{Package: strings.TrimPrefix(res.Package, "data."), Name: res.Name, Pass: res.Pass(), Duration: res.Duration}
		if res.Location != nil {
			tr.File = res.Location.File
		}
		switch {
		case res.Error != nil:
			tr.Error = res.Error.Error()
		case res.Fail:
			tr.Error = "the test's body is false or undefined"
			if res.Location != nil {
				tr.Error = fmt.Sprintf("%s:%d: %s", res.Location.File, res.Location.Row, tr.Error)
			}
		}
		if tr.Pass {
			rep.Passed++
		} else {
			rep.Failed++
		}
		rep.Tests = append(rep.Tests, tr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sort.Slice(rep.Tests, func(i, j int) bool {
		a, b := rep.Tests[i], rep.Tests[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Name < b.Name
	})
	if coverage {
		rep.coverage(cov, mods)
	}
	return rep, nil
}

// copyModules gives the tester modules of its own: compiling rewrites
// them.
func copyModules(mods map[string]*ast.Module) map[string]*ast.Module {
	out := make(map[string]*ast.Module, len(mods))
	for n, m := range mods {
		out[n] = m.Copy()
	}
	return out
}

func (rep *TestReport) coverage(cov *cover.Cover, mods map[string]*ast.Module) {
	decide := map[string]*ast.Module{}
	for n, m := range mods {
		if !strings.HasSuffix(n, "_test.rego") {
			decide[n] = m
		}
	}
	cr := cov.Report(decide)
	var all, bi [2]int
	for _, n := range sortedKeys(decide) {
		fr := cr.Files[n]
		if fr == nil {
			continue
		}
		fc := FileCoverage{File: n, Builtin: strings.HasPrefix(n, builtinPrefix), Covered: fr.CoveredLines, NotCovered: fr.NotCoveredLines, Percent: fr.Coverage}
		if fc.Covered+fc.NotCovered == 0 {
			fc.Percent = 100
		}
		for _, r := range fr.NotCovered {
			if r.Start.Row == r.End.Row {
				fc.Missed = append(fc.Missed, fmt.Sprint(r.Start.Row))
			} else {
				fc.Missed = append(fc.Missed, fmt.Sprintf("%d-%d", r.Start.Row, r.End.Row))
			}
		}
		rep.Coverage = append(rep.Coverage, fc)
		all[0] += fc.Covered
		all[1] += fc.NotCovered
		if fc.Builtin {
			bi[0] += fc.Covered
			bi[1] += fc.NotCovered
		}
	}
	rep.Total = percent(all)
	rep.Builtin = percent(bi)
}

func percent(c [2]int) float64 {
	if c[0]+c[1] == 0 {
		return 100
	}
	return 100 * float64(c[0]) / float64(c[0]+c[1])
}

// failures names the failing tests.
func (rep *TestReport) failures() []string {
	var out []string
	for _, t := range rep.Tests {
		if !t.Pass {
			s := t.Package + "." + t.Name
			if t.Error != "" {
				s += ": " + t.Error
			}
			out = append(out, s)
		}
	}
	return out
}
