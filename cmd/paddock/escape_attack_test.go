package main

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
)

// TestAttackSandboxNamesForgeCLIOutput: a command in a real sandbox makes
// a file whose name holds an escape sequence that clears the screen and a
// newline followed by a forged table row, and starts a job whose command
// holds the same. `session files`, `session artifacts`, `session jobs` and
// `session timeline` (a real `paddock serve`, the real CLI binary) print
// them escaped: no raw escape, carriage return or newline inside a row, no
// forged row; --json keeps the exact name and command.
func TestAttackSandboxNamesForgeCLIOutput(t *testing.T) {
	c := serveCLI(t)
	pd := func(args ...string) string {
		t.Helper()
		out, se, code := c.pd(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d\n%s%s", args, code, out, se)
		}
		return out
	}
	id := c.newSession()
	const name = "evil\x1b[2J\rhidden\n-rw-r--r--  0  2000-01-01T00:00:00Z  FORGED"
	const shown = `evil\x1b[2J\rhidden\n-rw-r--r--  0  2000-01-01T00:00:00Z  FORGED`
	// The sandbox makes the name itself (printf turns \033 and \n into
	// the bytes); the CLI never sees it before the listing.
	pd("session", "exec", id, "--", `touch "/workspace/$(printf 'evil\033[2J\rhidden\n-rw-r--r--  0  2000-01-01T00:00:00Z  FORGED')"`)
	const command = ": '\x1b[2J\nJOB-FORGED exited 0'"
	pd("session", "bg", id, "--", command)

	check := func(what, out string, want ...string) {
		t.Helper()
		for _, r := range out {
			if r != '\n' && unicode.IsControl(r) {
				t.Errorf("%s: raw %U in the output:\n%s", what, r, out)
				break
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "FORGED") && !strings.Contains(line, `\n`) {
				t.Errorf("%s: a forged line %q", what, line)
			}
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q not shown:\n%s", what, w, out)
			}
		}
	}
	check("files", pd("session", "files", id, "/workspace"), shown)
	check("artifacts", pd("session", "artifacts", id), "A "+shown)
	check("jobs", pd("session", "jobs", id), `: '\x1b[2J\nJOB-FORGED exited 0'`)
	check("timeline", pd("session", "timeline", id), `\u001b[2J\nJOB-FORGED`)

	var listing struct {
		Entries []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(pd("--json", "session", "files", id, "/workspace")), &listing); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range listing.Entries {
		found = found || e.Name == name
	}
	if !found {
		t.Errorf("files --json lacks the exact name %q: %+v", name, listing.Entries)
	}
	var jobs []struct{ Command string }
	if err := json.Unmarshal([]byte(pd("--json", "session", "jobs", id)), &jobs); err != nil || len(jobs) != 1 || jobs[0].Command != command {
		t.Errorf("jobs --json: %+v %v, want the exact command %q", jobs, err, command)
	}
}
