package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
)

// TestHold: while a sibling holds a session, every other command and
// lifecycle operation is refused naming the hold, the holder's own
// checkpoint goes through (recorded and ledgered), and once the hold ends
// the session works again; a hold is refused while a job runs.
func TestHold(t *testing.T) {
	m := sessiontest.New(t)
	ctx := context.Background()
	s, err := m.Create(ctx, "", session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Hold(ctx, s, "nap"); !errors.Is(err, session.ErrBadRequest) {
		t.Errorf("a hold for an unknown operation: %v", err)
	}
	end, err := m.Hold(ctx, s, "promote")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Hold(ctx, s, "promote"); !errors.Is(err, session.ErrConflict) {
		t.Errorf("a second hold: %v", err)
	}
	if _, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "true"}); !errors.Is(err, session.ErrConflict) || !strings.Contains(err.Error(), "promote is in progress") {
		t.Errorf("exec during a hold: %v", err)
	}
	if _, err := m.Checkpoint(ctx, "", s.ID, -1, session.CheckpointRequest{Tag: "other"}); !errors.Is(err, session.ErrConflict) {
		t.Errorf("checkpoint during a hold: %v", err)
	}
	if _, err := m.CheckpointHeld(ctx, "", s.ID, "fork", "x", false); !errors.Is(err, session.ErrConflict) {
		t.Errorf("CheckpointHeld for an operation not held: %v", err)
	}
	ck, err := m.CheckpointHeld(ctx, "", s.ID, "promote", "held-1", false)
	if err != nil || ck.Tag != "held-1" {
		t.Fatalf("CheckpointHeld: %v %v", ck, err)
	}
	if _, err := m.CheckpointHeld(ctx, "", s.ID, "promote", "held-1", false); !errors.Is(err, session.ErrConflict) {
		t.Errorf("CheckpointHeld with a tag taken: %v", err)
	}
	end()
	end() // twice is fine
	if _, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "true"}); err != nil {
		t.Errorf("exec after the hold: %v", err)
	}
	if _, err := m.CheckpointHeld(ctx, "", s.ID, "promote", "held-2", false); !errors.Is(err, session.ErrConflict) {
		t.Errorf("CheckpointHeld after the hold: %v", err)
	}
	if got, _ := m.Load(ctx, "", s.ID); len(got.Checkpoints) != 1 || got.Checkpoints[0].Tag != "held-1" {
		t.Errorf("checkpoints %+v", got.Checkpoints)
	}
	if ks := sessiontest.LedgerKinds(t, sessiontest.Ledger(m), s.ID); !strings.Contains(ks, "checkpoint") {
		t.Errorf("ledger %s: no checkpoint", ks)
	}

	job, err := m.StartJob(ctx, "", s.ID, session.JobStart{Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Hold(ctx, s, "promote"); !errors.Is(err, session.ErrConflict) || !strings.Contains(err.Error(), job.ID) {
		t.Errorf("a hold while a job runs: %v", err)
	}
	m.SignalJob(ctx, "", s.ID, job.ID, "KILL")
}
