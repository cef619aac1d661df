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

func tokenRow(id, sessionID string, created time.Time, ttl time.Duration) TokenRow {
	return TokenRow{ID: id, SessionID: sessionID, Hash: sha256.Sum256([]byte("secret-" + id)), Ops: []string{"exec", "read"},
		Label: "l-" + id, CreatedBy: "admin", CreatedAt: created, ExpiresAt: created.Add(ttl)}
}

// TestTokens: put, get (with the session's tenant and state), list of live
// ones, the live-token cap (concurrent mints included), revoke (one and
// all, idempotent), and the cascade when the session row goes.
func TestTokens(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("ses-a", "acme", t0), session("ses-b", "", t0))
	if err := s.PutToken(ctx, tokenRow("tok-1", "ses-a", t0, time.Hour), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.PutToken(ctx, tokenRow("tok-1", "ses-a", t0, time.Hour), 3); !errors.Is(err, ErrConflict) {
		t.Errorf("duplicate id: %v", err)
	}
	if err := s.PutToken(ctx, tokenRow("tok-x", "ses-none", t0, time.Hour), 3); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	got, err := s.GetToken(ctx, "tok-1")
	want := tokenRow("tok-1", "ses-a", t0, time.Hour)
	if err != nil || got.Hash != want.Hash || got.Tenant != "acme" || got.SessionState != "running" || got.Label != "l-tok-1" ||
		!got.ExpiresAt.Equal(want.ExpiresAt) || fmt.Sprint(got.Ops) != "[exec read]" || got.RevokedAt != nil {
		t.Errorf("get: %+v %v", got, err)
	}
	if _, err := s.GetToken(ctx, "tok-none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	// An expired token does not count against the cap and is not listed.
	if err := s.PutToken(ctx, tokenRow("tok-old", "ses-a", t0.Add(-2*time.Hour), time.Hour), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.PutToken(ctx, tokenRow("tok-2", "ses-a", t0, time.Hour), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.PutToken(ctx, tokenRow("tok-3", "ses-a", t0, time.Hour), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.PutToken(ctx, tokenRow("tok-4", "ses-a", t0, time.Hour), 3); !errors.Is(err, ErrTooManyTokens) {
		t.Errorf("over the cap: %v", err)
	}
	live, err := s.ListTokens(ctx, "ses-a", t0)
	if err != nil || len(live) != 3 {
		t.Errorf("list: %d %v", len(live), err)
	}
	// Revoke one: live until now, then idempotent; unknown and another
	// session's token are not found.
	r, revoked, err := s.RevokeToken(ctx, "ses-a", "tok-2", t0.Add(time.Minute))
	if err != nil || !revoked || r.RevokedAt == nil {
		t.Errorf("revoke: %+v %v %v", r, revoked, err)
	}
	if _, revoked, err := s.RevokeToken(ctx, "ses-a", "tok-2", t0.Add(2*time.Minute)); err != nil || revoked {
		t.Errorf("revoke again: %v %v", revoked, err)
	}
	if _, revoked, err := s.RevokeToken(ctx, "ses-a", "tok-old", t0); err != nil || revoked {
		t.Errorf("revoke an expired token: %v %v", revoked, err)
	}
	if _, _, err := s.RevokeToken(ctx, "ses-b", "tok-1", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke through another session: %v", err)
	}
	if g, _ := s.GetToken(ctx, "tok-2"); g.RevokedAt == nil || g.Live(t0.Add(time.Minute)) {
		t.Errorf("revoked token reads %+v", g)
	}
	// Concurrent mints never pass the cap.
	var wg sync.WaitGroup
	var ok int
	var mu sync.Mutex
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.PutToken(ctx, tokenRow(fmt.Sprintf("tok-c%d", i), "ses-b", t0, time.Hour), 5) == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 5 {
		t.Errorf("%d concurrent mints passed a cap of 5", ok)
	}
	// Revoke all: the live ones are returned, revoked and no longer listed.
	all, err := s.RevokeSessionTokens(ctx, "ses-a", t0.Add(3*time.Minute))
	if err != nil || len(all) != 2 || all[0].RevokedAt == nil {
		t.Errorf("revoke all: %+v %v", all, err)
	}
	if live, _ := s.ListTokens(ctx, "ses-a", t0.Add(3*time.Minute)); len(live) != 0 {
		t.Errorf("live after revoking all: %v", live)
	}
	// The tokens go with the session row.
	if err := s.DeleteSession(ctx, "ses-b"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM tokens WHERE session_id = 'ses-b'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("tokens left after the session row: %d %v", n, err)
	}
}
