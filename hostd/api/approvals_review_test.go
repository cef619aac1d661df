package api_test

import (
	"context"
	"io"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/policy"
)

// TestReviewApprovalWaitSurvivesRestore: a request held open with
// approval_wait_seconds does not hold the session, so a checkpoint and a
// restore go through meanwhile. The spec says a restore in between makes
// the approval 403; the waiting request instead runs the command on the
// restored machine, because its digest was computed at the old revision
// and nothing re-checks it after the wait.
func TestReviewApprovalWaitSurvivesRestore(t *testing.T) {
	d := newTestDaemon(t)
	c, ctx := d.c, context.Background()
	s := processSession(t, c, policy.ProcessRules{Allow: []string{"echo *", "cat *", "test *"}, Ask: []string{"touch *"}})
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "c0", Memory: new(bool)}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/after-restore", ApprovalWaitSeconds: 60})
		done <- err
	}()
	var pending string
	for deadline := time.Now().Add(10 * time.Second); pending == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		as, _ := c.Approvals(ctx, s.ID)
		for _, a := range as {
			if a.State == "pending" {
				pending = a.ID
			}
		}
	}
	if pending == "" {
		t.Fatal("no pending request")
	}
	before, _ := c.GetSession(ctx, s.ID)
	if _, err := c.Restore(ctx, s.ID, -1, "c0"); err != nil {
		t.Fatal(err)
	}
	after, _ := c.GetSession(ctx, s.ID)
	if after.Revision == before.Revision {
		t.Fatalf("restore did not change the revision (%d)", after.Revision)
	}
	if _, err := c.Approve(ctx, s.ID, pending, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if status(err) != 403 {
			t.Errorf("the waiting request after a restore: %v, want 403 (approval bound to revision %d, session now at %d)", err, before.Revision, after.Revision)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request did not wake")
	}
	if r, _ := c.Exec(ctx, s.ID, session.ExecRequest{Command: "test -e /workspace/after-restore && echo ran || echo not-run"}); r != nil && r.Stdout == "ran\n" {
		t.Errorf("the command approved at revision %d ran after a restore (revision %d)", before.Revision, after.Revision)
	}
}

// TestReviewApprovalWaitHoldsStreamSlot: exec/stream takes one of the
// daemon's 16 stream slots before the approval wait, so one agent holding
// 16 requests open for an operator blocks every exec/stream on the host.
func TestReviewApprovalWaitHoldsStreamSlot(t *testing.T) {
	d := newTestDaemon(t)
	c := d.c
	s := processSession(t, c, policy.ProcessRules{Allow: []string{"echo *"}, Ask: []string{"touch *"}})
	other, err := c.CreateSession(context.Background(), session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 16 {
		go c.ExecStream(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/x", ApprovalWaitSeconds: 60}, io.Discard, io.Discard)
	}
	time.Sleep(1500 * time.Millisecond)
	_, err = c.ExecStream(context.Background(), other.ID, session.ExecRequest{Command: "echo hi"}, io.Discard, io.Discard)
	if err != nil {
		t.Errorf("another session's exec/stream while 16 requests wait for an operator: %v", err)
	}
}

// TestReviewApprovalSpentBeforeGate: exec spends the approval (judge)
// before it asks the lifecycle gate (commandStarts), and loads the
// session's revision before both. During a restore the retry is refused
// with 409 and the approval is gone: spent, nothing ran. (The same order
// lets an approval bound to revision R run after a restore that ends
// between the load and commandStarts.)
func TestReviewApprovalSpentBeforeGate(t *testing.T) {
	d := newTestDaemon(t)
	c, ctx := d.c, context.Background()
	s := processSession(t, c, policy.ProcessRules{Allow: []string{"echo *"}, Ask: []string{"touch *"}})
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "c0", Memory: new(bool)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/x"})
	h := client.HoldOf(err)
	if h == nil {
		t.Fatal(err)
	}
	if _, err := c.Approve(ctx, s.ID, h.ApprovalID, ""); err != nil {
		t.Fatal(err)
	}
	d.mgr.SetTestHooks(session.TestHooks{Pause: map[string]time.Duration{"restore": 2 * time.Second}})
	restored := make(chan error, 1)
	go func() { _, err := c.Restore(ctx, s.ID, -1, "c0"); restored <- err }()
	time.Sleep(500 * time.Millisecond)
	_, err = c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/x", ApprovalID: h.ApprovalID})
	t.Logf("retry during the restore: %v", err)
	<-restored
	as, _ := c.Approvals(ctx, s.ID)
	for _, a := range as {
		if a.ID == h.ApprovalID && a.State == "consumed" && status(err) == 409 {
			t.Errorf("the approval was consumed by a request the lifecycle gate refused (409); nothing ran")
		}
	}
}
