package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SessionRow is one session. The columns beside Record are what the store
// queries and compares on; Record is the full session record as JSON, opaque
// to the store. Revision is authoritative: it is bumped by every
// UpdateSession, whatever Record says.
type SessionRow struct {
	ID        string
	Tenant    string
	Revision  int64
	State     string
	CreatedAt time.Time
	ExpiresAt time.Time
	Record    json.RawMessage
}

const sessionColumns = `id, tenant, revision, state, created_at, expires_at, record`

func (r SessionRow) check() error {
	if err := checkKey("session id", r.ID); err != nil {
		return err
	}
	if r.Revision < 0 {
		return fmt.Errorf("session %s: revision %d is negative: %w", r.ID, r.Revision, ErrInvalid)
	}
	return checkJSON("session "+r.ID+" record", r.Record)
}

type scanner interface{ Scan(dest ...any) error }

func scanSession(sc scanner) (SessionRow, error) {
	var (
		r                SessionRow
		created, expires string
		record           string
	)
	if err := sc.Scan(&r.ID, &r.Tenant, &r.Revision, &r.State, &created, &expires, &record); err != nil {
		return SessionRow{}, err
	}
	var err error
	if r.CreatedAt, err = parseTime(created); err != nil {
		return SessionRow{}, err
	}
	if r.ExpiresAt, err = parseTime(expires); err != nil {
		return SessionRow{}, err
	}
	r.Record = json.RawMessage(record)
	return r, nil
}

// CreateSession inserts a new session with the revision it carries
// (normally 0). ErrConflict if the id exists.
func (s *Store) CreateSession(ctx context.Context, rec SessionRow) error {
	if err := rec.check(); err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			rec.ID, rec.Tenant, rec.Revision, rec.State, formatTime(rec.CreatedAt), formatTime(rec.ExpiresAt), string(rec.Record))
		if isUniqueViolation(err) {
			return fmt.Errorf("store: create session %s: %w", rec.ID, ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("store: create session %s: %w", rec.ID, err)
		}
		return nil
	})
}

// GetSession returns one session, or ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (SessionRow, error) {
	r, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return SessionRow{}, fmt.Errorf("store: session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return SessionRow{}, fmt.Errorf("store: get session %s: %w", id, err)
	}
	return r, nil
}

// ListSessions returns a tenant's sessions, oldest first (ties by id). An
// empty tenant lists every tenant's sessions (for the sweeper).
func (s *Store) ListSessions(ctx context.Context, tenant string) ([]SessionRow, error) {
	q := `SELECT ` + sessionColumns + ` FROM sessions WHERE tenant = ? ORDER BY created_at, id`
	args := []any{tenant}
	if tenant == "" {
		q = `SELECT ` + sessionColumns + ` FROM sessions ORDER BY created_at, id`
		args = nil
	}
	return list(ctx, s.db, "sessions", scanSession, q, args...)
}

// UpdateSession is compare-and-set in one transaction: it loads the
// session, checks its revision (expectRevision < 0 accepts any), calls fn on
// a copy, bumps the revision by one and saves, returning the saved row.
// ErrNotFound if there is no such session, ErrRevision if the revision
// differs. An error from fn aborts the update and is returned unchanged. fn
// may change anything but ID and Revision (the store sets Revision); it runs
// while the write lock is held, so it must be quick and must not call the
// store.
func (s *Store) UpdateSession(ctx context.Context, id string, expectRevision int64, fn func(*SessionRow) error) (SessionRow, error) {
	var saved SessionRow
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		cur, err := scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: update session %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: update session %s: %w", id, err)
		}
		if expectRevision >= 0 && cur.Revision != expectRevision {
			return fmt.Errorf("store: update session %s: expected revision %d, it is %d: %w", id, expectRevision, cur.Revision, ErrRevision)
		}
		next := cur
		next.Record = bytes.Clone(cur.Record)
		if err := fn(&next); err != nil {
			return err
		}
		if next.ID != id {
			return fmt.Errorf("store: update session %s: the id cannot change (to %q): %w", id, next.ID, ErrInvalid)
		}
		next.Revision = cur.Revision + 1
		if err := next.check(); err != nil {
			return fmt.Errorf("store: update session: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET tenant = ?, revision = ?, state = ?, created_at = ?, expires_at = ?, record = ? WHERE id = ?`,
			next.Tenant, next.Revision, next.State, formatTime(next.CreatedAt), formatTime(next.ExpiresAt), string(next.Record), id); err != nil {
			return fmt.Errorf("store: update session %s: %w", id, err)
		}
		saved = next
		return nil
	})
	if err != nil {
		return SessionRow{}, err
	}
	saved.CreatedAt = saved.CreatedAt.UTC()
	saved.ExpiresAt = saved.ExpiresAt.UTC()
	return saved, nil
}

// DeleteSession removes a session row and, by cascade, its checkpoints, jobs
// and uploads. Its ledger stays. ErrNotFound if there is no such session.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		return deleteOne(ctx, tx, "session "+id, `DELETE FROM sessions WHERE id = ?`, id)
	})
}

// deleteOne runs a DELETE and turns "no row" into ErrNotFound.
func deleteOne(ctx context.Context, tx *sql.Tx, what, q string, args ...any) error {
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("store: delete %s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: delete %s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	return nil
}
