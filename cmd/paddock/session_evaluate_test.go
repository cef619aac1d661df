package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLISessionEvaluate: `paddock session evaluate` and `session
// rollout` against `paddock serve`: the table and the winner's promote
// hint, exit 8 when nothing passed, --json, usage errors (exit 2) for
// counts and sizes out of bounds, and rollout's runs with no child left.
func TestCLISessionEvaluate(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	id := c.newSession()
	out, se, code := pd("session", "evaluate", id,
		"--candidate", "echo good > /workspace/f", "--candidate", "echo bad > /workspace/f", "--candidate", "exit 3",
		"--test", "grep -qx good /workspace/f", "--timeout", "30s")
	if code != 0 || !strings.Contains(out, "winner: candidate 0, session ") || !strings.Contains(out, "review it with: paddock session promote ") ||
		!strings.Contains(out, "deleted") {
		t.Fatalf("evaluate: %d %q %q", code, out, se)
	}
	t.Logf("evaluate:\n%s", out)
	var res struct {
		Winner  int
		Results []struct {
			Score   int
			Deleted bool
		}
	}
	out, se, code = pd("--json", "session", "evaluate", id, "--candidate", "true", "--candidate", "false", "--test", "false")
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitNoneWon || res.Winner != -1 ||
		len(res.Results) != 2 || res.Results[0].Score != 10 || res.Results[1].Score != 0 || !res.Results[0].Deleted {
		t.Fatalf("evaluate with no winner: %d %q %q", code, out, se)
	}
	for _, args := range [][]string{
		{"session", "evaluate", id, "--test", "true"},
		{"session", "evaluate", id, "--candidate", "true", "--timeout", "2h"},
		{"session", "evaluate", id, "--candidate", strings.Repeat("x", 64<<10+1)},
		{"session", "rollout", id, "--count", "33", "--", "true"},
		{"session", "rollout", id, "--count", "0", "--", "true"},
	} {
		if _, se, code := pd(args...); code != exitUsage {
			t.Errorf("%s %s: exit %d %q, want %d", args[1], args[3], code, se, exitUsage)
		}
	}
	out, se, code = pd("session", "rollout", id, "--count", "3", "--", "echo", "hi")
	if code != 0 || strings.Count(out, "deleted") != 3 || strings.Count(out, "hi") != 3 {
		t.Fatalf("rollout: %d %q %q", code, out, se)
	}
	t.Logf("rollout:\n%s", out)
	if _, _, code := pd("session", "rollout", id, "--count", "2", "--", "exit 1"); code != exitNoneWon {
		t.Errorf("rollout of a failing command: exit %d", code)
	}
	var ls []struct{ ID string }
	out, _, _ = pd("--json", "session", "ls")
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls) != 2 {
		t.Errorf("sessions left: %q (want the parent and the first evaluate's winner)", out)
	}
}
