package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func changesetRow(id, target, status string, at time.Time) ChangesetRow {
	return ChangesetRow{ID: id, Target: target, Status: status, CreatedAt: at, Record: []byte(`{"id":"` + id + `"}`)}
}

// TestChangesets: put, get, list oldest first, the cap (the oldest
// decided go first; all pending is ErrTooManyChangesets), the status
// compare-and-set of UpdateChangeset, the size limit, delete, and the
// cascade when the session row goes.
func TestChangesets(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("ses-a", "acme", t0), session("ses-b", "", t0))
	for i := range 3 {
		if err := s.PutChangeset(ctx, changesetRow(fmt.Sprintf("cs-%d", i), "ses-a", "pending", t0.Add(time.Duration(i)*time.Second)), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutChangeset(ctx, changesetRow("cs-0", "ses-b", "pending", t0), 3); !errors.Is(err, ErrConflict) {
		t.Errorf("a duplicate id: %v", err)
	}
	if err := s.PutChangeset(ctx, changesetRow("cs-x", "ses-none", "pending", t0), 3); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown target: %v", err)
	}
	// Full, all pending.
	if err := s.PutChangeset(ctx, changesetRow("cs-3", "ses-a", "pending", t0.Add(time.Hour)), 3); !errors.Is(err, ErrTooManyChangesets) {
		t.Fatalf("a fourth with three pending: %v", err)
	}
	// Decide the middle and the newest one: the middle (oldest decided) goes first.
	for _, id := range []string{"cs-1", "cs-2"} {
		r, _ := s.GetChangeset(ctx, "ses-a", id)
		r.Status = "rejected"
		if err := s.UpdateChangeset(ctx, r, "pending"); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := s.GetChangeset(ctx, "ses-a", "cs-1")
	r.Status = "approved"
	if err := s.UpdateChangeset(ctx, r, "pending"); !errors.Is(err, ErrRevision) {
		t.Errorf("an update from a status it no longer has: %v", err)
	}
	if err := s.PutChangeset(ctx, changesetRow("cs-3", "ses-a", "pending", t0.Add(time.Hour)), 3); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListChangesets(ctx, "ses-a")
	if err != nil || len(rows) != 3 || rows[0].ID != "cs-0" || rows[1].ID != "cs-2" || rows[2].ID != "cs-3" {
		t.Fatalf("after eviction: %+v %v", rows, err)
	}
	if _, err := s.GetChangeset(ctx, "ses-a", "cs-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the evicted one: %v", err)
	}
	if _, err := s.GetChangeset(ctx, "ses-b", "cs-0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another target's changeset: %v", err)
	}
	big := changesetRow("cs-big", "ses-b", "pending", t0)
	big.Record = []byte(`"` + string(make([]byte, MaxChangesetRecordBytes)) + `"`)
	if err := s.PutChangeset(ctx, big, 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a record over the limit: %v", err)
	}
	if err := s.DeleteChangesets(ctx, "ses-a"); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.ListChangesets(ctx, "ses-a"); len(rows) != 0 {
		t.Errorf("after delete: %d", len(rows))
	}
	// The rows go with the session row.
	s.PutChangeset(ctx, changesetRow("cs-9", "ses-b", "pending", t0), 3)
	if _, err := s.db.Exec(`DELETE FROM sessions WHERE id = 'ses-b'`); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.ListChangesets(ctx, "ses-b"); len(rows) != 0 {
		t.Errorf("after the session row went: %d", len(rows))
	}
}
