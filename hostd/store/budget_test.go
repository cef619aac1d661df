package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestBudgetTakeUsage: a counter is taken only up to its limit, in one
// statement, so of many racing takers exactly limit win; what is given
// back can be taken again, and a give-back never goes below zero.
func TestBudgetTakeUsage(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("a", "", t0))
	const limit, racers = 5, 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, refused := 0, 0
	for range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.TakeUsage(ctx, "a", CounterExecs, 1, limit)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, ErrLimit):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won != limit || refused != racers-limit {
		t.Errorf("%d took, %d refused; want %d and %d", won, refused, limit, racers-limit)
	}
	before, err := s.TakeUsage(ctx, "a", CounterExecs, 1, limit)
	if !errors.Is(err, ErrLimit) || before != limit {
		t.Errorf("take past the limit: before %d, %v", before, err)
	}
	if err := s.GiveBackUsage(ctx, "a", CounterExecs, 2); err != nil {
		t.Fatal(err)
	}
	if before, err := s.TakeUsage(ctx, "a", CounterExecs, 2, limit); err != nil || before != limit-2 {
		t.Errorf("take what was given back: before %d, %v", before, err)
	}
	// Several at once, all or nothing (a fork's count).
	if _, err := s.TakeUsage(ctx, "a", CounterChildren, 3, 4); err != nil {
		t.Fatal(err)
	}
	if before, err := s.TakeUsage(ctx, "a", CounterChildren, 2, 4); !errors.Is(err, ErrLimit) || before != 3 {
		t.Errorf("2 more children past 4: before %d, %v", before, err)
	}
	if err := s.GiveBackUsage(ctx, "a", CounterChildren, 10); err != nil {
		t.Fatal(err)
	}
	if u, _ := s.GetUsage(ctx, "a"); u.Children != 0 || u.Execs != limit {
		t.Errorf("after give-backs: %+v", u)
	}
	if _, err := s.TakeUsage(ctx, "a", "exec_ms; DROP TABLE usage", 1, 10); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown counter: %v", err)
	}
	if _, err := s.TakeUsage(ctx, "missing", CounterJobs, 1, 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing session: %v", err)
	}
	before2, _ := s.GetSession(ctx, "a")
	if before2.Revision != 0 {
		t.Errorf("counting changed the revision: %d", before2.Revision)
	}
}

// TestBudgetSettleJobOnce: a job's time is added once however many
// readers see it end, and the workspace measure is set, not summed.
func TestBudgetSettleJobOnce(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("a", "", t0))
	if err := s.PutJob(ctx, JobRow{SessionID: "a", JobID: "j1", Command: "sleep 1", Record: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, err := s.SettleJob(ctx, "a", "j1", 1500)
			if err != nil {
				t.Error(err)
			}
			if first {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if u, _ := s.GetUsage(ctx, "a"); firsts != 1 || u.JobMS != 1500 {
		t.Errorf("settled %d times, job_ms %d", firsts, u.JobMS)
	}
	for _, n := range []int64{4096, 1024} {
		if err := s.SetWorkspaceBytes(ctx, "a", n); err != nil {
			t.Fatal(err)
		}
	}
	if u, _ := s.GetUsage(ctx, "a"); u.WorkspaceBytes != 1024 {
		t.Errorf("workspace bytes %d, want the last measure 1024", u.WorkspaceBytes)
	}
	if err := s.AddUsage(ctx, "a", UsageRow{WorkspaceBytes: 1}); err == nil {
		t.Error("AddUsage summed a workspace measure")
	}
}

// TestLifecycleMarker: a marker is put, read, reported exactly once to a
// daemon other than its writer, replaced by the next operation and
// removed; it goes with its session row.
func TestLifecycleMarker(t *testing.T) {
	s, path := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("a", "", t0), session("b", "", t0))
	if _, err := s.GetLifecycleOp(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("no marker: %v", err)
	}
	if err := s.PutLifecycleOp(ctx, LifecycleOp{SessionID: "a", Op: "fork", StartedAt: t0, Daemon: "d-old"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLifecycleOp(ctx, LifecycleOp{SessionID: "a", Op: "nap", StartedAt: t0, Daemon: "d-old"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown op: %v", err)
	}
	if err := s.PutLifecycleOp(ctx, LifecycleOp{SessionID: "missing", Op: "fork", StartedAt: t0, Daemon: "d-old"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing session: %v", err)
	}
	// The marker survives the process: reopen, as a new daemon would.
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	op, err := s2.GetLifecycleOp(ctx, "a")
	if err != nil || op.Op != "fork" || !op.StartedAt.Equal(t0) || op.Daemon != "d-old" || op.Reported {
		t.Fatalf("marker after a reopen: %+v %v", op, err)
	}
	if first, err := s2.ReportLifecycleOp(ctx, "a", "d-old"); err != nil || first {
		t.Errorf("the writer reported its own marker: %v %v", first, err)
	}
	reports := 0
	for range 3 {
		if first, err := s2.ReportLifecycleOp(ctx, "a", "d-new"); err != nil {
			t.Fatal(err)
		} else if first {
			reports++
		}
	}
	if op, _ := s2.GetLifecycleOp(ctx, "a"); reports != 1 || !op.Reported {
		t.Errorf("reported %d times; marker %+v", reports, op)
	}
	// The next operation replaces it (not reported), and its end removes it.
	later := t0.Add(time.Minute)
	if err := s2.PutLifecycleOp(ctx, LifecycleOp{SessionID: "a", Op: "checkpoint", StartedAt: later, Daemon: "d-new"}); err != nil {
		t.Fatal(err)
	}
	if op, _ := s2.GetLifecycleOp(ctx, "a"); op.Op != "checkpoint" || op.Reported || op.Daemon != "d-new" {
		t.Errorf("replaced marker: %+v", op)
	}
	if err := s2.DeleteLifecycleOp(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.GetLifecycleOp(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	if err := s2.DeleteLifecycleOp(ctx, "a"); err != nil {
		t.Errorf("deleting no marker: %v", err)
	}
	// A session row that goes takes its marker along.
	if err := s2.PutLifecycleOp(ctx, LifecycleOp{SessionID: "b", Op: "delete", StartedAt: t0, Daemon: "d-new"}); err != nil {
		t.Fatal(err)
	}
	if err := s2.DeleteSession(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.GetLifecycleOp(ctx, "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("marker of a removed session: %v", err)
	}
}
