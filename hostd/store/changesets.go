package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"paddock.dev/paddock/errdefs"
)

// MaxChangesetRecordBytes bounds one changeset's stored record. It is
// larger than MaxRecordBytes because a changeset carries file contents
// (api.MaxChangesetBytes of them, base64 in the JSON).
const MaxChangesetRecordBytes = 32 << 20

// ErrTooManyChangesets: a target already has as many changesets as
// PutChangeset allows, all of them still pending.
var ErrTooManyChangesets = errdefs.New(errdefs.ErrConflict, "too many pending changesets")

// ChangesetRow is one changeset of a session or sandbox (target).
type ChangesetRow struct {
	ID        string
	Target    string
	Status    string
	CreatedAt time.Time
	Record    json.RawMessage
}

// pendingStatus is the one status PutChangeset never evicts.
const pendingStatus = "pending"

func scanChangeset(sc scanner) (ChangesetRow, error) {
	var (
		c               ChangesetRow
		created, record string
	)
	if err := sc.Scan(&c.ID, &c.Target, &c.Status, &created, &record); err != nil {
		return ChangesetRow{}, err
	}
	t, err := parseTime(created)
	if err != nil {
		return ChangesetRow{}, err
	}
	c.CreatedAt, c.Record = t, json.RawMessage(record)
	return c, nil
}

func checkChangeset(what string, c ChangesetRow) error {
	if err := errors.Join(checkKey("changeset id", c.ID), checkKey("target", c.Target), checkKey("status", c.Status)); err != nil {
		return err
	}
	if len(c.Record) > MaxChangesetRecordBytes {
		return fmt.Errorf("%s is %d bytes, the limit is %d: %w", what, len(c.Record), MaxChangesetRecordBytes, ErrTooLarge)
	}
	if !json.Valid(c.Record) {
		return fmt.Errorf("%s is not valid JSON: %w", what, ErrInvalid)
	}
	return nil
}

// PutChangeset records a new changeset. When its target has max already,
// the oldest ones that are no longer pending are removed to make room, in
// the same transaction; when all are pending it is ErrTooManyChangesets.
// ErrNotFound if the target does not exist, ErrConflict if the id does.
func (s *Store) PutChangeset(ctx context.Context, c ChangesetRow, max int) error {
	what := "changeset " + c.Target + "/" + c.ID
	if err := checkChangeset(what, c); err != nil {
		return fmt.Errorf("store: put %s: %w", what, err)
	}
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM changesets WHERE target = ?`, c.Target).Scan(&n); err != nil {
			return fmt.Errorf("store: put %s: count: %w", what, err)
		}
		if over := n - max + 1; over > 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM changesets WHERE id IN (
				SELECT id FROM changesets WHERE target = ? AND status != ? ORDER BY created_at, rowid LIMIT ?)`,
				c.Target, pendingStatus, over); err != nil {
				return fmt.Errorf("store: put %s: drop decided changesets: %w", what, err)
			}
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM changesets WHERE target = ?`, c.Target).Scan(&n); err != nil {
				return fmt.Errorf("store: put %s: count: %w", what, err)
			}
			if n >= max {
				return fmt.Errorf("store: put %s: the target has %d pending changesets: %w", what, n, ErrTooManyChangesets)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO changesets (id, target, status, created_at, record) VALUES (?, ?, ?, ?, ?)`,
			c.ID, c.Target, c.Status, formatTime(c.CreatedAt), string(c.Record))
		switch {
		case isUniqueViolation(err):
			return fmt.Errorf("store: put %s: %w", what, ErrConflict)
		case isForeignKeyViolation(err):
			return fmt.Errorf("store: put %s: session %s: %w", what, c.Target, ErrNotFound)
		case err != nil:
			return fmt.Errorf("store: put %s: %w", what, err)
		}
		return nil
	})
}

// GetChangeset returns changeset id of target, or ErrNotFound.
func (s *Store) GetChangeset(ctx context.Context, target, id string) (ChangesetRow, error) {
	return getOne(ctx, s.db, "changeset "+target+"/"+id, scanChangeset,
		`SELECT id, target, status, created_at, record FROM changesets WHERE target = ? AND id = ?`, target, id)
}

// ListChangesets returns target's changesets, oldest first.
func (s *Store) ListChangesets(ctx context.Context, target string) ([]ChangesetRow, error) {
	return list(ctx, s.db, "changesets of "+target, scanChangeset,
		`SELECT id, target, status, created_at, record FROM changesets WHERE target = ? ORDER BY created_at, rowid`, target)
}

// UpdateChangeset replaces changeset id's status and record, provided its
// status is still from: of two updates that race, one wins and the other
// gets ErrRevision. ErrNotFound if there is no such changeset.
func (s *Store) UpdateChangeset(ctx context.Context, c ChangesetRow, from string) error {
	what := "changeset " + c.Target + "/" + c.ID
	if err := checkChangeset(what, c); err != nil {
		return fmt.Errorf("store: update %s: %w", what, err)
	}
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		var have string
		err := tx.QueryRowContext(ctx, `SELECT status FROM changesets WHERE target = ? AND id = ?`, c.Target, c.ID).Scan(&have)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: update %s: %w", what, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: update %s: %w", what, err)
		}
		if have != from {
			return fmt.Errorf("store: update %s: it is %s, not %s: %w", what, have, from, ErrRevision)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE changesets SET status = ?, record = ? WHERE target = ? AND id = ?`,
			c.Status, string(c.Record), c.Target, c.ID); err != nil {
			return fmt.Errorf("store: update %s: %w", what, err)
		}
		return nil
	})
}

// DeleteChangesets removes every changeset of target.
func (s *Store) DeleteChangesets(ctx context.Context, target string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM changesets WHERE target = ?`, target); err != nil {
		return fmt.Errorf("store: delete changesets of %s: %w", target, err)
	}
	return nil
}
