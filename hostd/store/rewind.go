package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// RewindRing is one session's rewind ring as stored (see migration 12):
// the config as JSON, the counter the next tag is made from, and the
// points, oldest first.
type RewindRing struct {
	Session string
	Config  json.RawMessage
	Seq     int64
	Points  []RewindPointRow
}

// RewindPointRow is one rewind point.
type RewindPointRow struct {
	Tag       string
	Kind      string // the trigger that took it: exec, job, file, git
	Command   string
	Memory    bool
	Pinned    bool
	Snapshot  json.RawMessage // the backend's snapshot record
	CreatedAt time.Time
}

// MaxRewindPointsStored bounds a stored ring (the API allows 50 points).
const MaxRewindPointsStored = 64

// PutRewindRing replaces session's stored ring with r, in one
// transaction.
func (s *Store) PutRewindRing(ctx context.Context, r RewindRing) error {
	if err := checkKey("rewind ring session", r.Session); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if len(r.Points) > MaxRewindPointsStored {
		return fmt.Errorf("store: rewind ring of %s has %d points, the limit is %d: %w", r.Session, len(r.Points), MaxRewindPointsStored, ErrTooLarge)
	}
	if err := checkJSON("rewind config", r.Config); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	for _, p := range r.Points {
		if p.Tag == "" {
			return fmt.Errorf("store: a rewind point of %s has no tag: %w", r.Session, ErrInvalid)
		}
		if err := checkJSON("rewind point snapshot", p.Snapshot); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO rewind_rings (session, config, seq) VALUES (?, ?, ?)
			ON CONFLICT (session) DO UPDATE SET config = excluded.config, seq = excluded.seq`,
			r.Session, string(r.Config), r.Seq); err != nil {
			return fmt.Errorf("store: rewind ring of %s: %w", r.Session, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM rewind_points WHERE session = ?`, r.Session); err != nil {
			return fmt.Errorf("store: rewind points of %s: %w", r.Session, err)
		}
		for i, p := range r.Points {
			if _, err := tx.ExecContext(ctx, `INSERT INTO rewind_points
				(session, tag, pos, kind, command, memory, pinned, snapshot, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				r.Session, p.Tag, i, p.Kind, p.Command, p.Memory, p.Pinned, string(p.Snapshot), formatTime(p.CreatedAt)); err != nil {
				return fmt.Errorf("store: rewind point %s of %s: %w", p.Tag, r.Session, err)
			}
		}
		return nil
	})
}

// GetRewindRing returns session's stored ring, or ErrNotFound.
func (s *Store) GetRewindRing(ctx context.Context, session string) (*RewindRing, error) {
	r := &RewindRing{Session: session, Points: []RewindPointRow{}}
	var cfg string
	err := s.db.QueryRowContext(ctx, `SELECT config, seq FROM rewind_rings WHERE session = ?`, session).Scan(&cfg, &r.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: rewind ring of %s: %w", session, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: rewind ring of %s: %w", session, err)
	}
	r.Config = json.RawMessage(cfg)
	rows, err := s.db.QueryContext(ctx, `SELECT tag, kind, command, memory, pinned, snapshot, created_at
		FROM rewind_points WHERE session = ? ORDER BY pos LIMIT ?`, session, MaxRewindPointsStored)
	if err != nil {
		return nil, fmt.Errorf("store: rewind points of %s: %w", session, err)
	}
	defer rows.Close()
	for rows.Next() {
		var p RewindPointRow
		var snap, at string
		if err := rows.Scan(&p.Tag, &p.Kind, &p.Command, &p.Memory, &p.Pinned, &snap, &at); err != nil {
			return nil, fmt.Errorf("store: rewind points of %s: %w", session, err)
		}
		if p.CreatedAt, err = parseTime(at); err != nil {
			return nil, err
		}
		p.Snapshot = json.RawMessage(snap)
		r.Points = append(r.Points, p)
	}
	return r, rows.Err()
}

// DeleteRewindRing removes session's stored ring and points (none is
// not an error).
func (s *Store) DeleteRewindRing(ctx context.Context, session string) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM rewind_points WHERE session = ?`, session); err != nil {
			return fmt.Errorf("store: rewind points of %s: %w", session, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM rewind_rings WHERE session = ?`, session); err != nil {
			return fmt.Errorf("store: rewind ring of %s: %w", session, err)
		}
		return nil
	})
}
