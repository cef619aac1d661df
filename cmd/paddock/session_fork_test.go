package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLISessionFork forks through `paddock serve` with the CLI: a job
// running in the parent does not stop it, the table names the job not
// carried, --identity and --from reach the daemon, and an unknown
// identity exits with the usage code.
func TestCLISessionFork(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	id := c.newSession()
	defer pd("session", "rm", id)
	if _, se, code := pd("session", "exec", id, "--", "echo old > /workspace/f"); code != 0 {
		t.Fatalf("exec: %q", se)
	}
	if _, se, code := pd("session", "checkpoint", id, "--tag", "old"); code != 0 {
		t.Fatalf("checkpoint: %q", se)
	}
	if _, se, code := pd("session", "exec", id, "--", "echo new > /workspace/f"); code != 0 {
		t.Fatalf("exec: %q", se)
	}
	job, se, code := pd("session", "bg", id, "--", "sleep 300")
	job = strings.TrimSpace(job)
	if code != 0 || job == "" {
		t.Fatalf("bg: %q %d", se, code)
	}

	out, se, code := pd("session", "fork", id, "--count", "2", "--identity", "unique")
	if code != 0 || !strings.Contains(out, "not carried: job "+job+" (sleep 300)") || strings.Count(out, "\n"+id+"-f") != 2 {
		t.Fatalf("fork while a job runs: %d %q %q", code, out, se)
	}
	out, se, code = pd("--json", "session", "fork", id, "--from", "old", "--identity", "preserve")
	var fr struct {
		Children   []struct{ ID string }
		Identity   string
		From       string
		NotCarried []struct{ Job string } `json:"not_carried"`
	}
	if err := json.Unmarshal([]byte(out), &fr); err != nil || code != 0 || len(fr.Children) != 1 || fr.Identity != "preserve" || fr.From != "old" || len(fr.NotCarried) != 1 || fr.NotCarried[0].Job != job {
		t.Fatalf("fork --from old --identity preserve --json: %d %q %q", code, out, se)
	}
	if out, _, code := pd("session", "cat", fr.Children[0].ID, "/workspace/f"); code != 0 || out != "old\n" {
		t.Errorf("the child from old has %q (%d)", out, code)
	}
	if _, se, code := pd("session", "fork", id, "--identity", "twin"); code != exitUsage || !strings.Contains(se, "identity") {
		t.Errorf("fork --identity twin: %d %q, want the usage code", code, se)
	}
	if _, se, code := pd("session", "fork", id, "--from", "nope"); code != exitNotFound {
		t.Errorf("fork --from nope: %d %q, want not found", code, se)
	}
}
