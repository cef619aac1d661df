package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestCLISessionPromote: `paddock session promote` against `paddock
// serve`: the dry run's table and plan id, a conflict refused (exit 4),
// the apply with --plan-id, --skip-conflicts and --path, the undo hint,
// and --json.
func TestCLISessionPromote(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	sid := c.newSession()
	if _, se, code := pd("session", "exec", sid, "--", "cd /workspace && echo a > a && echo b > b && mkdir d && echo x > d/x"); code != 0 {
		t.Fatalf("exec: %q", se)
	}
	var forked struct{ Children []struct{ ID string } }
	out, se, code := pd("--json", "session", "fork", sid)
	if err := json.Unmarshal([]byte(out), &forked); err != nil || code != 0 || len(forked.Children) != 1 {
		t.Fatalf("fork: %q %q %d", out, se, code)
	}
	child := forked.Children[0].ID
	pd("session", "exec", child, "--", "cd /workspace && echo A > a && echo B > b && echo X > d/x && echo n > d/new")
	pd("session", "exec", sid, "--", "echo parent > /workspace/b")

	out, se, code = pd("session", "promote", child, "--dry-run")
	id := regexp.MustCompile(`plan ([0-9a-f]{32}):`).FindStringSubmatch(out)
	if code != 0 || id == nil || !strings.Contains(out, "modified  a ") || !strings.Contains(out, "conflict: the parent changed it too") ||
		!strings.Contains(out, "3 to apply") || !strings.Contains(out, "dry run: nothing changed") {
		t.Fatalf("promote --dry-run: %d %q %q", code, out, se)
	}
	if _, se, code := pd("session", "promote", child, "--plan-id", id[1]); code != exitConflict || !strings.Contains(se, "in conflict (b;") {
		t.Errorf("promote with a conflict: %d %q", code, se)
	}
	if _, se, code := pd("session", "promote", child, "--plan-id", strings.Repeat("0", 32)); code != exitConflict || !strings.Contains(se, "plan is") {
		t.Errorf("promote with a stale plan id: %d %q", code, se)
	}
	out, se, code = pd("session", "promote", child, "--path", "d", "--skip-conflicts")
	if code != 0 || !strings.Contains(out, "applied 2 paths to "+sid) || !strings.Contains(out, "paddock session restore "+sid+" pre-promote-") {
		t.Fatalf("promote --path d: %d %q %q", code, out, se)
	}
	var res struct {
		Applied, Skipped []string
		Checkpoint       string
	}
	out, se, code = pd("--json", "session", "promote", child, "--skip-conflicts")
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || strings.Join(res.Applied, ",") != "a" || strings.Join(res.Skipped, ",") != "b" || res.Checkpoint == "" {
		t.Fatalf("promote --json --skip-conflicts: %d %q %q", code, out, se)
	}
	if out, _, _ := pd("session", "exec", sid, "--", "cd /workspace && cat a b d/x d/new"); out != "A\nparent\nX\nn\n" {
		t.Errorf("the parent after the promotions: %q", out)
	}
}
