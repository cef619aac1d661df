package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func previewRow(id, sessionID string, port int, created time.Time, ttl time.Duration) PreviewRow {
	return PreviewRow{ID: id, SessionID: sessionID, Hash: sha256.Sum256([]byte("pvw-secret-" + id)), Port: port,
		CreatedBy: "admin", CreatedAt: created, ExpiresAt: created.Add(ttl)}
}

// TestPreviews: put, find by hash (with the session's tenant, state and
// expiry), the live cap (expired ones dropped first, concurrent puts
// included), list, delete one and all, CleanupSession and the cascade
// when the session row goes.
func TestPreviews(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("ses-a", "acme", t0), session("ses-b", "", t0))
	if err := s.PutPreview(ctx, previewRow("pv-1", "ses-a", 8000, t0, time.Hour), 3); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		row  PreviewRow
		want error
	}{
		{"duplicate id", previewRow("pv-1", "ses-a", 8000, t0, time.Hour), ErrConflict},
		{"duplicate hash", func() PreviewRow {
			p := previewRow("pv-9", "ses-a", 1, t0, time.Hour)
			p.Hash = previewRow("pv-1", "", 0, t0, 0).Hash
			return p
		}(), ErrConflict},
		{"unknown session", previewRow("pv-x", "ses-none", 8000, t0, time.Hour), ErrNotFound},
		{"port 0", previewRow("pv-y", "ses-a", 0, t0, time.Hour), ErrInvalid},
		{"port 65536", previewRow("pv-z", "ses-a", 65536, t0, time.Hour), ErrInvalid},
	} {
		if err := s.PutPreview(ctx, tc.row, 3); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	want := previewRow("pv-1", "ses-a", 8000, t0, time.Hour)
	got, err := s.PreviewByHash(ctx, want.Hash)
	if err != nil || got.ID != "pv-1" || got.Port != 8000 || got.Tenant != "acme" || got.SessionState != "running" ||
		!got.ExpiresAt.Equal(want.ExpiresAt) || !got.SessionEnds.Equal(t0.Add(time.Hour)) || got.CreatedBy != "admin" {
		t.Errorf("by hash: %+v %v", got, err)
	}
	if !got.Live(t0) || got.Live(t0.Add(time.Hour)) {
		t.Errorf("Live at t0 %v, at expiry %v", got.Live(t0), got.Live(t0.Add(time.Hour)))
	}
	if _, err := s.PreviewByHash(ctx, sha256.Sum256([]byte("made up"))); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown hash: %v", err)
	}
	// An expired preview does not count against the cap and is removed
	// by the next put.
	if err := s.PutPreview(ctx, previewRow("pv-old", "ses-a", 8001, t0.Add(-2*time.Hour), time.Hour), 3); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"pv-2", "pv-3"} {
		if err := s.PutPreview(ctx, previewRow(id, "ses-a", 8002, t0, time.Hour), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutPreview(ctx, previewRow("pv-4", "ses-a", 8003, t0, time.Hour), 3); !errors.Is(err, ErrTooManyPreviews) {
		t.Errorf("over the cap: %v", err)
	}
	if _, err := s.PreviewByHash(ctx, previewRow("pv-old", "", 0, t0, 0).Hash); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired preview still stored: %v", err)
	}
	live, err := s.ListPreviews(ctx, "ses-a", t0)
	if err != nil || len(live) != 3 || live[0].ID != "pv-1" {
		t.Errorf("list: %+v %v", live, err)
	}
	if live, _ := s.ListPreviews(ctx, "ses-a", t0.Add(time.Hour)); len(live) != 0 {
		t.Errorf("list after expiry: %+v", live)
	}
	// Delete one; again, or through another session, is not found.
	if p, err := s.DeletePreview(ctx, "ses-a", "pv-2"); err != nil || p.ID != "pv-2" || p.Port != 8002 {
		t.Errorf("delete: %+v %v", p, err)
	}
	if _, err := s.DeletePreview(ctx, "ses-a", "pv-2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete again: %v", err)
	}
	if _, err := s.DeletePreview(ctx, "ses-b", "pv-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete through another session: %v", err)
	}
	if _, err := s.PreviewByHash(ctx, previewRow("pv-2", "", 0, t0, 0).Hash); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted preview found: %v", err)
	}
	// Concurrent puts never pass the cap.
	var wg sync.WaitGroup
	var ok int
	var mu sync.Mutex
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.PutPreview(ctx, previewRow(fmt.Sprintf("pv-c%d", i), "ses-b", 3000+i, t0, time.Hour), 5) == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 5 {
		t.Errorf("%d concurrent puts passed a cap of 5", ok)
	}
	// Delete all of a session's.
	all, err := s.DeleteSessionPreviews(ctx, "ses-a")
	if err != nil || len(all) != 2 {
		t.Errorf("delete all: %+v %v", all, err)
	}
	if live, _ := s.ListPreviews(ctx, "ses-a", t0); len(live) != 0 {
		t.Errorf("live after deleting all: %v", live)
	}
	// CleanupSession and the session row's removal take them too.
	if err := s.PutPreview(ctx, previewRow("pv-5", "ses-a", 8005, t0, time.Hour), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.CleanupSession(ctx, "ses-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "ses-b"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM previews`).Scan(&n); err != nil || n != 0 {
		t.Errorf("previews left after cleanup and the session row: %d %v", n, err)
	}
}
