package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLISessionRewind: `paddock session rewind` against `paddock serve`:
// on takes points before each exec, the list shows them, undo puts a
// removed file back, pin marks a point, bisect prints the command that
// broke a test and leaves the session as it was, branch starts a child
// from an old point that promote refuses; flags of another verb
// and a max-points past 50 are usage errors, steps past the ring a
// conflict.
func TestCLISessionRewind(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	id := c.newSession()
	out, se, code := pd("session", "rewind", id, "on", "--max-points", "5", "--triggers", "exec")
	if code != 0 || !strings.Contains(se, "rewind on: at most 5 points") {
		t.Fatalf("rewind on: %d %q %q", code, out, se)
	}
	for _, cmd := range []string{"echo hi > /workspace/a", "rm -f /workspace/a", "echo BROKEN > /workspace/flag", "true"} {
		if out, se, code := pd("session", "exec", id, "--", cmd); code != 0 {
			t.Fatalf("exec %q: %d %q %q", cmd, code, out, se)
		}
	}
	out, _, code = pd("session", "rewind", id)
	if code != 0 || strings.Count(out, "rw-") != 4 || !strings.Contains(out, "rm -f /workspace/a") {
		t.Fatalf("rewind list: %d %q", code, out)
	}
	// bisect: the flag appeared with the third command.
	out, se, code = pd("session", "rewind", id, "bisect", "! test -e /workspace/flag")
	if code != 0 || strings.TrimSpace(out) != "echo BROKEN > /workspace/flag" || !strings.Contains(se, "between rw-3 (good) and rw-4 (bad)") {
		t.Errorf("bisect: %d %q %q", code, out, se)
	}
	if out, se, code = pd("session", "rewind", id, "pin", "rw-1"); code != 0 || strings.TrimSpace(out) != "rw-1 pinned: true" {
		t.Errorf("pin: %d %q %q", code, out, se)
	}
	// undo 3: back to before the rm.
	if out, se, code = pd("session", "rewind", id, "undo", "--steps", "3"); code != 0 || !strings.Contains(out, "restored rw-2 (before: rm -f /workspace/a)") {
		t.Fatalf("undo: %d %q %q", code, out, se)
	}
	if out, se, code = pd("session", "exec", id, "--", "cat /workspace/a; test ! -e /workspace/flag"); code != 0 || out != "hi\n" {
		t.Errorf("after undo: %d %q %q", code, out, se)
	}
	var rw struct {
		Points []struct {
			Tag    string
			Pinned bool
		}
	}
	out, _, code = pd("--json", "session", "rewind", id)
	if err := json.Unmarshal([]byte(out), &rw); err != nil || code != 0 || len(rw.Points) != 2 || rw.Points[0].Tag != "rw-1" || !rw.Points[0].Pinned {
		t.Errorf("rewind --json after undo and one exec: %d %q", code, out)
	}
	// branch from rw-1 (before a was written): the child has no a, the
	// session keeps it, and the child cannot be promoted.
	var br struct {
		From     string
		Children []struct{ ID string }
		Point    struct{ Tag string }
	}
	out, se, code = pd("--json", "session", "rewind", id, "branch", "rw-1", "--count", "1")
	if err := json.Unmarshal([]byte(out), &br); err != nil || code != 0 || br.From != "rw-1" || br.Point.Tag != "rw-1" || len(br.Children) != 1 {
		t.Fatalf("branch --json: %d %q %q", code, out, se)
	}
	if out, se, code = pd("session", "exec", br.Children[0].ID, "--", "test ! -e /workspace/a && echo clean"); code != 0 || out != "clean\n" {
		t.Errorf("the branch child: %d %q %q", code, out, se)
	}
	if out, se, code = pd("session", "exec", id, "--", "cat /workspace/a"); code != 0 || out != "hi\n" {
		t.Errorf("the session after the branch: %d %q %q", code, out, se)
	}
	if _, se, code = pd("session", "promote", br.Children[0].ID, "--dry-run"); code != exitConflict || !strings.Contains(se, "no baseline") {
		t.Errorf("promote of a branch child: %d %q", code, se)
	}
	if out, se, code = pd("session", "rewind", id, "branch", "rw-1"); code != 0 || !strings.Contains(out, "rw-1") || !strings.Contains(se, "branched from rw-1") {
		t.Errorf("branch (table): %d %q %q", code, out, se)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"session", "rewind", id, "undo", "--count", "2"}, exitUsage, "--count goes with `rewind ID branch`"},
		{[]string{"session", "rewind", id, "branch", "rw-1", "--count", "33"}, exitUsage, "count 33"},
		{[]string{"session", "rewind", id, "branch", "rw-77"}, exitNotFound, `no rewind point "rw-77"`},
		{[]string{"session", "rewind", id, "branch"}, exitUsage, "takes 2 argument"},
		{[]string{"session", "rewind", id, "undo", "--good", "rw-1"}, exitUsage, "--good goes with `rewind ID bisect`"},
		{[]string{"session", "rewind", id, "on", "--max-points", "51"}, exitUsage, "max_points 51"},
		{[]string{"session", "rewind", id, "rewind"}, exitUsage, "use on, off, undo"},
		{[]string{"session", "rewind", id, "pin"}, exitUsage, "takes 2 argument"},
		{[]string{"session", "rewind", id, "undo", "--steps", "9"}, exitConflict, "goes past the oldest point"},
	} {
		if _, se, code := pd(tc.args...); code != tc.code || !strings.Contains(se, tc.want) {
			t.Errorf("%v: %d %q, want %d naming %q", tc.args, code, se, tc.code, tc.want)
		}
	}
}
