package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestCLISessionRunWorkspace runs `paddock session run` with --readonly,
// --git and --require-ready against `paddock serve`.
func TestCLISessionRunWorkspace(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)
	pd := func(extraEnv []string, args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, append(slices.Clone(env), extraEnv...), nil, args...)
	}
	var s struct {
		ID        string
		Workspace struct{ Mode, Git, Note string }
	}

	out, se, code := pd(nil, "--json", "session", "run", "--readonly")
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || s.Workspace.Mode != "readonly" {
		t.Fatalf("session run --readonly: %q %q %d", out, se, code)
	}
	if _, se, code := pd(nil, "session", "exec", s.ID, "--", "touch /workspace/x"); code == 0 || !strings.Contains(se, "Permission denied") {
		t.Errorf("exec writing the read-only workspace: code %d stderr %q", code, se)
	}
	if _, _, code := pd(nil, "session", "exec", s.ID, "--", "touch /tmp/x"); code != 0 {
		t.Errorf("exec writing /tmp: code %d", code)
	}
	pd(nil, "session", "rm", s.ID)

	// An overlay of the image's /etc at /srv/view.
	out, se, code = pd(nil, "--json", "session", "run", "--overlay-lower", "/etc", "--workspace", "/srv/view")
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || s.Workspace.Mode != "overlay" {
		t.Fatalf("session run --overlay-lower: %q %q %d", out, se, code)
	}
	if out, se, code := pd(nil, "session", "exec", s.ID, "--", "rm hosts && echo x > new && ls /etc | grep -c hosts"); code != 0 || out != "1\n" {
		t.Errorf("exec in an overlay workspace: %d %q %q", code, out, se)
	}
	pd(nil, "session", "rm", s.ID)
	if _, se, code := pd(nil, "session", "run", "--overlay-lower", "/nope"); code != exitUsage || !strings.Contains(se, "does not exist") {
		t.Errorf("session run --overlay-lower of a missing directory: code %d stderr %q", code, se)
	}

	// The credential comes from the environment, not argv; the mini image
	// has no git, so the create succeeds with a note.
	const url = "https://user:s3cret@example.invalid/r.git"
	out, se, code = pd([]string{"PADDOCK_GIT_URL=" + url}, "session", "run")
	if code != 0 || !strings.Contains(se, "paddock: workspace: git is not installed") {
		t.Errorf("session run with PADDOCK_GIT_URL: code %d stdout %q stderr %q", code, out, se)
	}
	out, _, code = pd(nil, "--json", "session", "run", "--git", url)
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || s.Workspace.Git != "https://***@example.invalid/r.git" || s.Workspace.Note == "" {
		t.Errorf("session run --git: %q %d", out, code)
	}
	out, se, code = pd(nil, "session", "run", "--git", url, "--require-ready")
	if code != exitError || !strings.Contains(se, "502") || !strings.Contains(se, "removed") {
		t.Errorf("session run --require-ready with a failed clone: code %d stdout %q stderr %q", code, out, se)
	}
	if _, se, code := pd(nil, "session", "run", "--git", "http://example.invalid/r.git"); code != exitUsage || !strings.Contains(se, "https://") {
		t.Errorf("session run --git http://: code %d stderr %q", code, se)
	}
	var left []struct{ ID string }
	if ls, _, _ := pd(nil, "--json", "session", "ls"); json.Unmarshal([]byte(ls), &left) != nil || len(left) != 2 {
		t.Errorf("sessions after the 502: %s", ls)
	}
	for _, l := range left {
		pd(nil, "session", "rm", l.ID)
	}
	if strings.Contains(serveLogs(srv), "s3cret") {
		t.Error("the daemon's log holds the credential")
	}
}
