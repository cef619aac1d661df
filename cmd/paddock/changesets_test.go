package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
)

// TestCLISpeculate: `paddock session speculate`, `changesets` and
// `changeset` against `paddock serve` on procbox, then the same verbs
// under `paddock sandboxes`. A speculation shows its changes and leaves
// the session as it was; approve then apply makes them; a session token
// cannot approve (exit 5); an apply before approval, after a rejection or
// over a file changed since is refused (exit 4) and writes nothing.
func TestCLISpeculate(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	id := c.newSession()
	defer pd("session", "rm", id)
	if _, se, code := pd("session", "exec", id, "--", "cd /workspace && echo old > a && echo gone > c"); code != 0 {
		t.Fatalf("exec: %q", se)
	}
	// cat prints each workspace file's content, or "-" for one missing.
	cat := func(names string) string {
		t.Helper()
		out, _, _ := pd("session", "exec", id, "--", "cd /workspace && for f in "+names+"; do cat $f 2>/dev/null || echo -; done")
		return out
	}

	// Usage errors and limits exit 2 (the CLI checks them before asking;
	// the daemon would refuse the limits with a 400 too).
	tooMany := []string{"session", "speculate", id}
	for i := range apiv1.MaxSpeculatePaths + 1 {
		tooMany = append(tooMany, "--path", fmt.Sprint("/workspace/p", i))
	}
	for _, args := range [][]string{
		append(tooMany, "--", "true"),
		{"session", "speculate", id, "--path", "/workspace", "--", strings.Repeat("x", apiv1.MaxSpeculateCommandBytes+1)},
		{"session", "speculate", id, "--", "true"},
		{"session", "speculate", id, "--path", "/workspace", "--timeout", "2h", "--", "true"},
		{"session", "changeset", id, "cs-x", "merge"},
		{"session", "changeset", id, "cs-x", "apply", "--reason", "why"},
		{"session", "changeset", id, "cs-x", "approve", "--diff"},
	} {
		if _, se, code := pd(args...); code != exitUsage {
			t.Errorf("%v: exit %d %q, want %d", args, code, se, exitUsage)
		}
	}

	out, se, code := pd("session", "speculate", id, "--path", "/workspace", "--", "cd /workspace && echo new > a && echo n > b && rm c && echo done")
	m := regexp.MustCompile(`changeset (\S+) pending`).FindStringSubmatch(out)
	if code != 0 || m == nil || !regexp.MustCompile(`modified\s+/workspace/a\s+4`).MatchString(out) ||
		!regexp.MustCompile(`added\s+/workspace/b\s+2`).MatchString(out) || !regexp.MustCompile(`deleted\s+/workspace/c\s+-`).MatchString(out) ||
		!strings.Contains(out, "network: no\n") || !strings.Contains(out, "exit code 0") || !strings.Contains(se, "changeset "+id) {
		t.Fatalf("speculate: %d %q %q", code, out, se)
	}
	cid := m[1]
	if got := cat("a b c"); got != "old\n-\ngone\n" {
		t.Fatalf("the session after the speculation: %q", got)
	}
	out, se, code = pd("session", "changesets", id)
	if code != 0 || !regexp.MustCompile(cid+`\s+pending\s+3\s+0\s+true`).MatchString(out) {
		t.Errorf("changesets: %d %q %q", code, out, se)
	}
	out, se, code = pd("session", "changeset", id, cid)
	if code != 0 || !strings.Contains(out, "/workspace/a (modified):\n  | new\n") || !strings.Contains(out, "stdout:\n  | done\n") ||
		!strings.Contains(out, "command: cd /workspace") {
		t.Errorf("changeset: %d %q %q", code, out, se)
	}

	out, se, code = pd("session", "changeset", id, cid, "--diff")
	if code != 0 || !strings.Contains(out, "--- a/workspace/a\n+++ b/workspace/a\n@@ -1,1 +1,1 @@\n-old\n+new\n") ||
		!strings.Contains(out, "--- /dev/null\n+++ b/workspace/b\n@@ -0,0 +1,1 @@\n+n\n") {
		t.Errorf("changeset --diff: %d %q %q", code, out, se)
	}

	// Apply before approval: refused.
	if _, se, code := pd("session", "changeset", id, cid, "apply"); code != exitConflict {
		t.Errorf("apply before approval: %d %q", code, se)
	}
	// A session token, even one that may run commands, cannot decide.
	tok, se, code := pd("session", "token", id, "--ops", "exec,files.read,files.write", "-q")
	if code != 0 {
		t.Fatalf("token: %d %q", code, se)
	}
	asTok := append(slices.Clone(c.env), "PADDOCK_TOKEN="+strings.TrimSpace(tok))
	if _, se, code := runCLI(t, c.bin, asTok, nil, "session", "changeset", id, cid, "approve"); code != exitForbidden {
		t.Errorf("approve with a session token: %d %q", code, se)
	}
	out, se, code = pd("session", "changeset", id, cid, "approve", "--reason", "looks right")
	if code != 0 || out != cid+" is approved\n" {
		t.Fatalf("approve: %d %q %q", code, out, se)
	}
	out, se, code = pd("session", "changeset", id, cid, "apply")
	if code != 0 || !strings.Contains(out, "applied "+cid+" to "+id+", paths written or removed:\n  /workspace/a\n  /workspace/b\n  /workspace/c\n") {
		t.Fatalf("apply: %d %q %q", code, out, se)
	}
	if got := cat("a b c"); got != "new\nn\n-\n" {
		t.Errorf("the session after apply: %q", got)
	}

	// A conflict: the file changes after the speculation; apply refuses
	// and leaves every file as it was.
	var cs apiv1.Changeset
	out, se, code = pd("--json", "session", "speculate", id, "--path", "/workspace", "--", "echo newer > /workspace/a; echo x > /workspace/x")
	if err := json.Unmarshal([]byte(out), &cs); err != nil || code != 0 || cs.Status != apiv1.ChangesetPending || len(cs.Files) != 2 || !cs.Complete {
		t.Fatalf("speculate --json: %d %q %q", code, out, se)
	}
	pd("session", "exec", id, "--", "echo meanwhile > /workspace/a")
	if _, se, code := pd("session", "changeset", id, cs.ID, "approve"); code != 0 {
		t.Fatalf("approve: %d %q", code, se)
	}
	if _, se, code := pd("session", "changeset", id, cs.ID, "apply"); code != exitConflict || !strings.Contains(se, "/workspace/a") {
		t.Errorf("a conflicting apply: %d %q", code, se)
	}
	if got := cat("a x"); got != "meanwhile\n-\n" {
		t.Errorf("the session after the refused apply: %q", got)
	}

	// Rejected: it cannot be applied.
	out, _, _ = pd("--json", "session", "speculate", id, "--path", "/workspace", "--", "echo r > /workspace/r")
	json.Unmarshal([]byte(out), &cs)
	if out, se, code := pd("session", "changeset", id, cs.ID, "reject"); code != 0 || out != cs.ID+" is rejected\n" {
		t.Errorf("reject: %d %q %q", code, out, se)
	}
	if _, se, code := pd("session", "changeset", id, cs.ID, "apply"); code != exitConflict {
		t.Errorf("apply of a rejected changeset: %d %q", code, se)
	}
	if _, se, code := pd("session", "changeset", id, "cs-nope"); code != exitNotFound {
		t.Errorf("a changeset that is not there: %d %q", code, se)
	}

	// A session that holds the command for an operator: exit 6 with the
	// approval to ask for, then the approved request spent with
	// --approval-id.
	var held struct{ ID string }
	out, _, _ = pd("--json", "session", "run", "--cmd-ask", "touch*")
	json.Unmarshal([]byte(out), &held)
	defer pd("session", "rm", held.ID)
	_, se, code = pd("session", "speculate", held.ID, "--path", "/workspace", "--", "touch /workspace/t")
	apr := regexp.MustCompile(`--approval-id (\S+)`).FindStringSubmatch(se)
	if code != exitHeld || apr == nil {
		t.Fatalf("a held speculation: %d %q", code, se)
	}
	if _, se, code := pd("session", "approve", held.ID, apr[1]); code != 0 {
		t.Fatalf("approve %s: %d %q", apr[1], code, se)
	}
	out, se, code = pd("session", "speculate", held.ID, "--path", "/workspace", "--approval-id", apr[1], "--", "touch /workspace/t")
	if code != 0 || !regexp.MustCompile(`added\s+/workspace/t\s+0`).MatchString(out) {
		t.Errorf("speculate with --approval-id: %d %q %q", code, out, se)
	}

	// The same verbs under `paddock sandboxes`.
	sb, se, code := pd("sandboxes", "create", "-q")
	sb = strings.TrimSpace(sb)
	if code != 0 || sb == "" {
		t.Fatalf("sandboxes create: %d %q", code, se)
	}
	defer pd("sandboxes", "rm", sb)
	if _, se, code := pd("sandboxes", "exec", sb, "--", "mkdir -p /tmp/spec && echo old > /tmp/spec/g"); code != 0 {
		t.Fatalf("sandboxes exec: %d %q", code, se)
	}
	out, se, code = pd("sandboxes", "speculate", sb, "--path", "/tmp/spec", "--diff", "--", "echo hi > /tmp/spec/f && echo new > /tmp/spec/g")
	m = regexp.MustCompile(`changeset (\S+) pending`).FindStringSubmatch(out)
	if code != 0 || m == nil || !regexp.MustCompile(`added\s+/tmp/spec/f\s+3`).MatchString(out) ||
		!strings.Contains(out, "--- a/tmp/spec/g\n+++ b/tmp/spec/g\n@@ -1,1 +1,1 @@\n-old\n+new\n") {
		t.Fatalf("sandboxes speculate --diff: %d %q %q", code, out, se)
	}
	if _, _, code := pd("sandboxes", "read", sb, "/tmp/spec/f"); code == 0 {
		t.Errorf("the speculated file is in the sandbox before apply")
	}
	if out, se, code := pd("sandboxes", "changesets", sb); code != 0 || !strings.Contains(out, m[1]) {
		t.Errorf("sandboxes changesets: %d %q %q", code, out, se)
	}
	pd("sandboxes", "changeset", sb, m[1], "approve")
	if out, se, code := pd("sandboxes", "changeset", sb, m[1], "apply"); code != 0 || !strings.Contains(out, "  /tmp/spec/f\n  /tmp/spec/g\n") {
		t.Fatalf("sandboxes apply: %d %q %q", code, out, se)
	}
	if out, se, code := pd("sandboxes", "read", sb, "/tmp/spec/f"); code != 0 || out != "hi\n" {
		t.Errorf("sandboxes read after apply: %d %q %q", code, out, se)
	}
}
