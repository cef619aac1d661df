package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
)

// TestCLIReplay: `paddock session replay` against `paddock serve`: a dry
// run lists the steps and what it skips; a replay into a session whose
// policy denies a command stops there and exits 5, printing the rule and
// where to go on; --json carries the target's 403 body; the first
// failure exits 1; --since goes on; no target without --dry-run is a
// usage error.
func TestCLIReplay(t *testing.T) {
	c := serveCLI(t)
	pd, newSession := c.pd, c.newSession
	src := newSession()
	for _, cmd := range []string{"echo one", "exit 4", "uname -s", "echo two"} {
		if _, se, code := pd("session", "exec", src, "--", cmd); code != 0 && code != 4 {
			t.Fatalf("exec %q: %d %q", cmd, code, se)
		}
	}

	out, se, code := pd("session", "replay", src, "--dry-run")
	if code != 0 || strings.Count(out, "planned") != 5 || !strings.Contains(out, "SEQ") || !strings.Contains(out, "planned 4, failed 0") {
		t.Errorf("dry run: %d %q %q", code, out, se)
	}

	denying := newSession("--cmd-deny", "uname*")
	out, se, code = pd("session", "replay", src, "--target", denying, "--keep-going")
	since := regexp.MustCompile(`--since (\d+)`).FindStringSubmatch(out)
	if code != exitForbidden || !strings.Contains(out, "refused") || !strings.Contains(out, "process.deny") || since == nil {
		t.Fatalf("replay into the denying target: %d %q %q", code, out, se)
	}
	out, _, code = pd("--json", "session", "replay", src, "--target", denying, "--since", since[1])
	var r apiv1.ReplayResult
	var body struct{ Rule, Pattern string }
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != exitForbidden || r.Stopped == nil || r.Stopped.Status != 403 ||
		json.Unmarshal(r.Stopped.Body, &body) != nil || body.Rule != "process.deny" || body.Pattern != "uname*" || r.Ran != 0 {
		t.Errorf("--json: %d %q", code, out)
	}

	plain := newSession()
	out, se, code = pd("session", "replay", src, "--target", plain)
	if code != exitError || !strings.Contains(out, "stopped (failure)") || !strings.Contains(out, "ran 2, failed 1") {
		t.Errorf("stop at the failure: %d %q %q", code, out, se)
	}
	since = regexp.MustCompile(`--since (\d+)`).FindStringSubmatch(out)
	if since == nil {
		t.Fatalf("no --since in %q", out)
	}
	out, se, code = pd("session", "replay", src, "--target", plain, "--since", since[1])
	if code != 0 || !strings.Contains(out, "ran 2, failed 0") || strings.Contains(out, "NO") {
		t.Errorf("going on: %d %q %q", code, out, se)
	}
	if _, se, code := pd("session", "replay", src); code != exitUsage || !strings.Contains(se, "--dry-run") {
		t.Errorf("no target: %d %q", code, se)
	}
}
