package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newApproval(id, digest string, now time.Time) ApprovalRow {
	return ApprovalRow{ID: id, SessionID: "s1", Kind: "exec", Digest: digest, Command: "deploy prod",
		Summary: "exec: deploy prod", Matched: "process.ask: deploy *", Requester: "admin",
		CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
}

func TestApprovalLifecycle(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("s1", "", t0))

	a, created, err := s.PutApproval(ctx, newApproval("a1", "d1", t0), t0, 4, 100)
	if err != nil || !created || a.State != ApprovalPending {
		t.Fatalf("put: %+v created=%v err=%v", a, created, err)
	}
	// Asking again for the same digest finds the same request.
	again, created, err := s.PutApproval(ctx, newApproval("a2", "d1", t0), t0.Add(time.Minute), 4, 100)
	if err != nil || created || again.ID != "a1" {
		t.Fatalf("ask again: %+v created=%v err=%v", again, created, err)
	}
	// Not approved yet: it cannot be used.
	if _, err := s.ConsumeApproval(ctx, "s1", "a1", "d1", t0); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("consume pending: %v", err)
	}
	got, err := s.DecideApproval(ctx, "s1", "a1", ApprovalApproved, "admin", "ok", t0.Add(time.Minute))
	if err != nil || got.State != ApprovalApproved || got.Decider != "admin" || got.Note != "ok" {
		t.Fatalf("approve: %+v %v", got, err)
	}
	// Deciding twice is refused: the first decision stands.
	if got, err := s.DecideApproval(ctx, "s1", "a1", ApprovalDenied, "admin", "", t0.Add(2*time.Minute)); !errors.Is(err, ErrApprovalState) || got.State != ApprovalApproved {
		t.Fatalf("second decision: %+v %v", got, err)
	}
	// Another digest (another command) cannot spend it.
	if _, err := s.ConsumeApproval(ctx, "s1", "a1", "other", t0.Add(2*time.Minute)); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("consume with another digest: %v", err)
	}
	if got, err := s.ConsumeApproval(ctx, "s1", "a1", "d1", t0.Add(2*time.Minute)); err != nil || got.State != ApprovalConsumed {
		t.Fatalf("consume: %+v %v", got, err)
	}
	// Single use.
	if got, err := s.ConsumeApproval(ctx, "s1", "a1", "d1", t0.Add(3*time.Minute)); !errors.Is(err, ErrApprovalState) || got.State != ApprovalConsumed {
		t.Fatalf("second use: %+v %v", got, err)
	}
	// Once consumed, the same command asks anew.
	next, created, err := s.PutApproval(ctx, newApproval("a3", "d1", t0), t0.Add(4*time.Minute), 4, 100)
	if err != nil || !created || next.ID != "a3" {
		t.Fatalf("ask after use: %+v created=%v err=%v", next, created, err)
	}
	if _, err := s.GetApproval(ctx, "s1", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := s.GetApproval(ctx, "s2", "a1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another session's id: %v", err)
	}
	list, err := s.ListApprovals(ctx, "s1")
	if err != nil || len(list) != 2 || list[0].ID != "a1" || list[1].ID != "a3" {
		t.Fatalf("list: %+v %v", list, err)
	}
}

func TestApprovalExpiryAndLimit(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("s1", "", t0))
	for i := range 3 {
		if _, _, err := s.PutApproval(ctx, newApproval(fmt.Sprint("a", i), fmt.Sprint("d", i), t0), t0, 3, 100); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.PutApproval(ctx, newApproval("a9", "d9", t0), t0, 3, 100); !errors.Is(err, ErrApprovalLimit) {
		t.Fatalf("over the limit: %v", err)
	}
	// Past expiry: no decision, no use, and the slot is free again.
	late := t0.Add(11 * time.Minute)
	if _, err := s.DecideApproval(ctx, "s1", "a0", ApprovalApproved, "admin", "", late); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("decide expired: %v", err)
	}
	if _, err := s.DecideApproval(ctx, "s1", "a1", ApprovalApproved, "admin", "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeApproval(ctx, "s1", "a1", "d1", late); !errors.Is(err, ErrApprovalState) {
		t.Fatalf("consume expired: %v", err)
	}
	if a, created, err := s.PutApproval(ctx, newApproval("a8", "d0", late), late, 3, 100); err != nil || !created {
		t.Fatalf("ask after expiry: %+v %v %v", a, created, err)
	}
	if _, _, err := s.PutApproval(ctx, ApprovalRow{ID: "z", SessionID: "nosuch", Kind: "exec", Digest: "d", CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)}, t0, 3, 100); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	// The session's cleanup takes them.
	if err := s.CleanupSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListApprovals(ctx, "s1"); len(list) != 0 {
		t.Fatalf("left after cleanup: %+v", list)
	}
}

// Two (or many) concurrent retries with one approval: exactly one spends it.
func TestApprovalConsumeRace(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("s1", "", t0))
	now := time.Now().UTC()
	if _, _, err := s.PutApproval(ctx, newApproval("a1", "d1", now), now, 4, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideApproval(ctx, "s1", "a1", ApprovalApproved, "admin", "", now); err != nil {
		t.Fatal(err)
	}
	var wins, refusals atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			_, err := s.ConsumeApproval(ctx, "s1", "a1", "d1", now)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, ErrApprovalState):
				refusals.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || refusals.Load() != 15 {
		t.Fatalf("wins %d, refusals %d", wins.Load(), refusals.Load())
	}
}

// A session keeps at most maxRows requests: past that, the ones decided,
// used or expired more than a day ago make room; live ones never do.
func TestApprovalRowsPruned(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("s1", "", t0))
	for i := range 3 {
		if _, _, err := s.PutApproval(ctx, newApproval(fmt.Sprint("a", i), fmt.Sprint("d", i), t0), t0, 10, 3); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DecideApproval(ctx, "s1", "a0", ApprovalDenied, "admin", "", t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutApproval(ctx, newApproval("a3", "d3", t0), t0.Add(time.Hour), 10, 3); !errors.Is(err, ErrApprovalLimit) {
		t.Fatalf("a fourth within the day: %v", err)
	}
	later := t0.Add(25 * time.Hour)
	if _, created, err := s.PutApproval(ctx, newApproval("a4", "d4", later), later, 10, 3); err != nil || !created {
		t.Fatalf("after a day: %v", err)
	}
	list, _ := s.ListApprovals(ctx, "s1")
	if len(list) != 1 || list[0].ID != "a4" {
		t.Fatalf("kept: %+v", list)
	}
}

// TestApprovalReturn: a consumed request given back is approved again and
// can be consumed once more; giving back one that is not consumed (still
// approved, given back already, unknown) is refused.
func TestApprovalReturn(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("s1", "", t0))
	if _, _, err := s.PutApproval(ctx, newApproval("a1", "d1", t0), t0, 4, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideApproval(ctx, "s1", "a1", ApprovalApproved, "admin", "", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.ReturnApproval(ctx, "s1", "a1"); !errors.Is(err, ErrApprovalState) {
		t.Errorf("giving back an approved request: %v, want ErrApprovalState", err)
	}
	if _, err := s.ConsumeApproval(ctx, "s1", "a1", "d1", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.ReturnApproval(ctx, "s1", "a1"); err != nil {
		t.Fatalf("giving back a consumed request: %v", err)
	}
	if got, err := s.GetApproval(ctx, "s1", "a1"); err != nil || got.State != ApprovalApproved || !got.ConsumedAt.IsZero() {
		t.Errorf("after the give-back: %+v %v, want approved and not consumed", got, err)
	}
	if err := s.ReturnApproval(ctx, "s1", "a1"); !errors.Is(err, ErrApprovalState) {
		t.Errorf("giving back twice: %v, want ErrApprovalState", err)
	}
	if got, err := s.ConsumeApproval(ctx, "s1", "a1", "d1", t0.Add(2*time.Minute)); err != nil || got.State != ApprovalConsumed {
		t.Errorf("consuming it again: %+v %v", got, err)
	}
	if err := s.ReturnApproval(ctx, "s1", "nosuch"); !errors.Is(err, ErrApprovalState) {
		t.Errorf("giving back an unknown request: %v, want ErrApprovalState", err)
	}
}
