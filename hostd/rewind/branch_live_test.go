package rewind_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
)

// TestRewindBranchLive: three execs each write a file; a branch from the
// point before the second starts children holding only the first file,
// while the parent keeps all three and its ring is as it was. A child is
// an ordinary session (exec works in it), ledgered as a branch child, and
// promote refuses it: it has no baseline. The point stays usable by the
// parent, and dropping it does not hurt the children. Bad input is 400,
// an unknown point 404, and the children count against max_children.
func TestRewindBranchLive(t *testing.T) {
	rewindBranchLive(t, liveDaemon(t), api.Runtime{})
}

// rewindBranchLive is the body of the branch tests, in a session of rt
// on d. Where the backend saves memory the points are memory points, and
// the children start from them.
func rewindBranchLive(t *testing.T, d *daemontest.Daemon, rt api.Runtime) {
	c := d.Client
	ctx := context.Background()
	maxKids := int64(3)
	s, err := c.CreateSession(ctx, api.CreateRequest{TTLSeconds: 900, Budget: &api.Budget{MaxChildren: &maxKids}, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Backend != "" && s.Backend != rt.Backend {
		t.Fatalf("the session runs on %q, want %q", s.Backend, rt.Backend)
	}
	start := time.Now()
	defer func() { t.Logf("the branch test took %v on %s", time.Since(start), s.Backend) }()

	// No ring yet: the point is unknown.
	if _, err := c.RewindBranch(ctx, s.ID, api.RewindBranchRequest{Tag: "rw-1"}); status(err) != 404 {
		t.Errorf("branch before rewind is on: %v, want 404", err)
	}
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, s.ID, "echo one > /workspace/f1")
	mustExec(t, c, s.ID, "echo two > /workspace/f2")
	mustExec(t, c, s.ID, "echo three > /workspace/f3")
	before, err := c.Rewind(ctx, s.ID)
	if err != nil || pointTags(before) != "rw-1,rw-2,rw-3" {
		t.Fatalf("points: %+v %v", before, err)
	}
	for _, p := range before.Points {
		if p.Memory != s.Capabilities.MemoryCheckpoint {
			t.Errorf("point %s: memory %v, the backend's memory checkpoints %v", p.Tag, p.Memory, s.Capabilities.MemoryCheckpoint)
		}
	}

	// The limits, each refused before anything is made.
	for _, tc := range []struct {
		req    api.RewindBranchRequest
		status int
		want   string
	}{
		{api.RewindBranchRequest{Tag: "rw-2", Count: 33}, 400, "count 33 must be from 1 to 32"},
		{api.RewindBranchRequest{Tag: "rw-2", Count: -1}, 400, "count -1"},
		{api.RewindBranchRequest{Tag: "../rw-2"}, 400, "name a rewind point"},
		{api.RewindBranchRequest{}, 400, "name a rewind point"},
		{api.RewindBranchRequest{Tag: "rw-2", Identity: "twin"}, 400, `identity "twin"`},
		{api.RewindBranchRequest{Tag: "rw-99"}, 404, `no rewind point "rw-99"`},
		{api.RewindBranchRequest{Tag: "rw-2", Count: 4}, 403, "max_children"},
	} {
		_, err := c.RewindBranch(ctx, s.ID, tc.req)
		if e := clientErr(err); e == nil || e.Status != tc.status || !strings.Contains(e.Message, tc.want) {
			t.Errorf("branch %+v: %v, want %d %q", tc.req, err, tc.status, tc.want)
		}
	}

	t0 := time.Now()
	b, err := c.RewindBranch(ctx, s.ID, api.RewindBranchRequest{Tag: "rw-2", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a branch of 2 took %v", time.Since(t0))
	if len(b.Children) != 2 || b.From != "rw-2" || b.Point.Tag != "rw-2" || b.Point.Command != "echo two > /workspace/f2" || b.Identity != api.IdentityBestEffort {
		t.Fatalf("branch: %+v", b)
	}
	for _, k := range b.Children {
		if k.Parent != s.ID || k.Workspace.BaselineFiles != 0 {
			t.Errorf("child %s: parent %q baseline files %d", k.ID, k.Parent, k.Workspace.BaselineFiles)
		}
		// Only the first state: f1, not f2 or f3.
		if r := mustExec(t, c, k.ID, "cat f1; ls"); r.Stdout != "one\nf1\n" {
			t.Errorf("child %s reads %q, want only f1", k.ID, r.Stdout)
		}
		// An ordinary session: it runs commands of its own.
		mustExec(t, c, k.ID, "echo mine > /workspace/g")
		if r := mustExec(t, c, k.ID, "cat g"); r.Stdout != "mine\n" {
			t.Errorf("child %s: %q", k.ID, r.Stdout)
		}
		_, err := c.Promote(ctx, k.ID, api.PromoteRequest{DryRun: true})
		if e := clientErr(err); e == nil || e.Status != 409 || e.Code != "no_baseline" {
			t.Errorf("promote of branch child %s: %v, want 409 no_baseline", k.ID, err)
		}
		kk := kinds(t, d, k.ID)
		if kk["session.branch_child"] != 1 || kk["session.fork_child"] != 0 {
			t.Errorf("child %s ledger: %v", k.ID, kk)
		}
	}
	if b.Children[0].ID == b.Children[1].ID || len(b.Identities) != 2 {
		t.Errorf("children %s %s, identities %+v", b.Children[0].ID, b.Children[1].ID, b.Identities)
	}

	// The parent carries on untouched: all three files, the same ring.
	if r := mustExec(t, c, s.ID, "cat f1 f2 f3; ls"); r.Stdout != "one\ntwo\nthree\nf1\nf2\nf3\n" {
		t.Errorf("the parent reads %q", r.Stdout)
	}
	after, err := c.Rewind(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The exec just above took rw-4; the first three are as they were.
	was, _ := json.Marshal(before.Points)
	now, _ := json.Marshal(after.Points[:3])
	if len(after.Points) != 4 || string(was) != string(now) {
		t.Errorf("the ring changed: %s, was %s", now, was)
	}
	pk := kinds(t, d, s.ID)
	if pk["rewind.branch"] != 1 || pk["fork"] != 0 || pk["restore"] != 0 || pk["rewind.undo"] != 0 {
		t.Errorf("parent ledger: %v", pk)
	}
	ps, err := c.GetSession(ctx, s.ID)
	if err != nil || len(ps.Children) != 2 || ps.Usage.Children != 2 {
		t.Errorf("the parent's children: %+v %v", ps, err)
	}

	// Budget: one child left, so two more are refused; one is not.
	_, err = c.RewindBranch(ctx, s.ID, api.RewindBranchRequest{Tag: "rw-1", Count: 2})
	if e := clientErr(err); e == nil || e.Status != 403 || e.Code != "budget_exceeded" {
		t.Errorf("branch past max_children: %v", err)
	}
	b1, err := c.RewindBranch(ctx, s.ID, api.RewindBranchRequest{Tag: "rw-1"})
	if err != nil || len(b1.Children) != 1 {
		t.Fatalf("branch of 1 from rw-1: %+v %v", b1, err)
	}
	if r := mustExec(t, c, b1.Children[0].ID, "ls /workspace | wc -l"); strings.TrimSpace(r.Stdout) != "0" {
		t.Errorf("a child of rw-1 (before any write) has %q files", r.Stdout)
	}

	// The point stays the parent's: an undo to it works, and drops it
	// and the newer ones; the children go on without it.
	if u, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{To: "rw-2"}); err != nil || strings.Join(u.Dropped, ",") != "rw-2,rw-3,rw-4" {
		t.Fatalf("undo to rw-2 after the branch: %+v %v", u, err)
	}
	if r := mustExec(t, c, s.ID, "ls"); r.Stdout != "f1\n" {
		t.Errorf("the parent after undo reads %q", r.Stdout)
	}
	for _, k := range b.Children {
		if r := mustExec(t, c, k.ID, "cat f1 g"); r.Stdout != "one\nmine\n" {
			t.Errorf("child %s after its point was dropped: %q", k.ID, r.Stdout)
		}
	}
}
