package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestCLIApprovals: `paddock session run --cmd-allow/--cmd-deny/--cmd-ask`
// against `paddock serve`: a denied command exits 5 naming the rule, an
// ask command exits 6 saying how to approve it, `session approvals` lists
// it, `session approve` lets it run once with --approval-id, and `policy`
// rules from a file work the same.
func TestCLIApprovals(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	out, se, code := pd("--json", "session", "run", "--cmd-allow", "echo *", "--cmd-allow", "cat *", "--cmd-deny", "rm *", "--cmd-ask", "touch *")
	var s struct {
		ID     string
		Policy struct {
			Process struct{ Allow, Deny, Ask []string }
		}
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || len(s.Policy.Process.Allow) != 2 {
		t.Fatalf("session run: %q %q %d", out, se, code)
	}
	if out, se, code := pd("session", "exec", s.ID, "--", "echo hi"); code != 0 || out != "hi\n" {
		t.Errorf("allowed: %d %q %q", code, out, se)
	}
	if _, se, code := pd("session", "exec", s.ID, "--", "echo x; rm -rf /workspace"); code != exitForbidden || !strings.Contains(se, "process.deny") {
		t.Errorf("denied: %d %q", code, se)
	}
	_, se, code = pd("session", "exec", s.ID, "--", "touch /workspace/deployed")
	id := regexp.MustCompile(`apr-[0-9a-f]{16}`).FindString(se)
	if code != exitHeld || id == "" || !strings.Contains(se, "paddock session approve "+s.ID+" "+id) {
		t.Fatalf("held: %d %q", code, se)
	}
	if out, _, code := pd("session", "approvals", s.ID); code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "pending") {
		t.Errorf("approvals: %d %q", code, out)
	}
	if out, se, code := pd("session", "approve", s.ID, id, "--note", "ok"); code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("approve: %d %q %q", code, out, se)
	}
	if _, se, code := pd("session", "exec", s.ID, "--approval-id", id, "--", "touch /workspace/deployed"); code != 0 {
		t.Fatalf("approved run: %d %q", code, se)
	}
	if _, se, code := pd("session", "exec", s.ID, "--approval-id", id, "--", "touch /workspace/deployed"); code != exitForbidden || !strings.Contains(se, "used already") {
		t.Errorf("second run: %d %q", code, se)
	}
	if out, _, _ := pd("session", "exec", s.ID, "--", "cat /workspace/deployed && echo there"); out != "there\n" {
		t.Errorf("the approved command did not run: %q", out)
	}
	if _, se, code := pd("session", "deny", s.ID, id); code != exitConflict {
		t.Errorf("deny after use: %d %q", code, se)
	}
	// Bad rules are refused before anything is made.
	if _, se, code := pd("session", "run", "--cmd-allow", "g*t *", "--cmd-enforce"); code != exitUsage || !strings.Contains(se, "without *") {
		t.Errorf("unenforceable: %d %q", code, se)
	}
}
