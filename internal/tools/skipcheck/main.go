// Command skipcheck reads the test events `go test -json` wrote (gotestsum's
// --jsonfile), prints every skipped test with its reason, and, with
// -require-live, fails when a test was skipped that is not on the list of
// skips this machine kind is expected to have (scripts/expected-skips.txt).
//
// `make test` runs it after the tests; `.ci/run` sets PADDOCK_REQUIRE_LIVE=1,
// so a live test that quietly skipped (no kernel fetched, no Landlock, an
// image missing) fails CI instead of passing it.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is the part of a test2json event skipcheck reads.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// Skip is one skipped test and the reason it printed.
type Skip struct {
	Package, Test, Reason string
}

// Expected is one line of the expected-skips list: a skip in a package
// whose name ends in Package, of a test matching Test, with a reason
// matching Reason, is expected on this machine kind for the reason Why.
type Expected struct {
	Package string
	Test    *regexp.Regexp
	Reason  *regexp.Regexp
	Why     string
	Line    int
}

func main() {
	jsonFile := flag.String("json", "", "the test2json events (gotestsum --jsonfile)")
	expectedFile := flag.String("expected", "scripts/expected-skips.txt", "the skips this machine kind is expected to have")
	require := flag.Bool("require-live", os.Getenv("PADDOCK_REQUIRE_LIVE") == "1", "fail on a skip not in -expected (env PADDOCK_REQUIRE_LIVE=1)")
	flag.Parse()
	if err := run(*jsonFile, *expectedFile, *require, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(1)
	}
}

// errUnexpected is returned when a skip is not on the expected list.
var errUnexpected = errors.New("tests were skipped that are not on the expected list (-require-live)")

func run(jsonFile, expectedFile string, require bool, out io.Writer) error {
	f, err := os.Open(jsonFile)
	if err != nil {
		return err
	}
	defer f.Close()
	skips, err := ReadSkips(f)
	if err != nil {
		return err
	}
	var expected []Expected
	if require {
		ef, err := os.Open(expectedFile)
		if err != nil {
			return err
		}
		defer ef.Close()
		if expected, err = ParseExpected(ef); err != nil {
			return fmt.Errorf("%s: %w", expectedFile, err)
		}
	}
	unexpected := 0
	fmt.Fprintf(out, "\nSkipped tests: %d\n", len(skips))
	for _, s := range skips {
		mark := ""
		if require {
			if e := Match(expected, s); e != nil {
				mark = "  (expected here: " + e.Why + ")"
			} else {
				mark = "  UNEXPECTED"
				unexpected++
			}
		}
		fmt.Fprintf(out, "  %s %s: %s%s\n", shortPkg(s.Package), s.Test, s.Reason, mark)
	}
	if unexpected > 0 {
		fmt.Fprintf(out, "%d skip(s) not in %s\n", unexpected, expectedFile)
		return errUnexpected
	}
	return nil
}

// ReadSkips returns the skipped tests in a test2json stream, sorted, each
// with the lines it printed (its t.Skip message among them).
func ReadSkips(r io.Reader) ([]Skip, error) {
	type key struct{ pkg, test string }
	output := map[key][]string{}
	var skips []Skip
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("bad test event %.80q: %w", line, err)
		}
		if e.Test == "" {
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			if text := reasonLine(e.Output); text != "" {
				output[k] = append(output[k], text)
			}
		case "skip":
			skips = append(skips, Skip{Package: e.Package, Test: e.Test, Reason: strings.Join(output[k], " / ")})
			delete(output, k)
		case "pass", "fail":
			delete(output, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(skips, func(i, j int) bool {
		if skips[i].Package != skips[j].Package {
			return skips[i].Package < skips[j].Package
		}
		return skips[i].Test < skips[j].Test
	})
	return skips, nil
}

// reasonLine is an output line as a reason, or "" for the lines the test
// runner adds itself (=== RUN, --- SKIP, …).
func reasonLine(s string) string {
	s = strings.TrimSpace(s)
	for _, p := range []string{"=== ", "--- "} {
		if strings.HasPrefix(s, p) {
			return ""
		}
	}
	return s
}

// ParseExpected reads the expected-skips list: one skip a line as
// "package-suffix | test regexp | reason regexp | why", '#' comments.
func ParseExpected(r io.Reader) ([]Expected, error) {
	var list []Expected
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 4 {
			return nil, fmt.Errorf("line %d: want 4 fields separated by '|', got %d", n, len(f))
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if f[0] == "" || f[3] == "" {
			return nil, fmt.Errorf("line %d: the package and the reason why are required", n)
		}
		test, err := regexp.Compile("^(?:" + f[1] + ")$")
		if err != nil {
			return nil, fmt.Errorf("line %d: test: %w", n, err)
		}
		reason, err := regexp.Compile(f[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: reason: %w", n, err)
		}
		list = append(list, Expected{Package: f[0], Test: test, Reason: reason, Why: f[3], Line: n})
	}
	return list, sc.Err()
}

// Match returns the entry that expects s, or nil.
func Match(list []Expected, s Skip) *Expected {
	for i, e := range list {
		if (s.Package == e.Package || strings.HasSuffix(s.Package, "/"+e.Package)) &&
			e.Test.MatchString(s.Test) && e.Reason.MatchString(s.Reason) {
			return &list[i]
		}
	}
	return nil
}

func shortPkg(p string) string { return strings.TrimPrefix(p, "paddock.dev/paddock/") }
