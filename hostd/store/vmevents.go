package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// VMEventRow is one thing that happened to a session's machine (see
// migration 10).
type VMEventRow struct {
	ID      int64 // assigned by AppendVMEvent, increasing
	Session string
	Time    time.Time
	Kind    string
	Data    json.RawMessage
}

// MaxVMEventList is the most rows ListVMEvents returns at once.
const MaxVMEventList = 10000

// MaxVMEventsPerSession bounds a session's rows: past it, AppendVMEvent
// removes the oldest, so a machine that keeps failing cannot fill the
// database.
const MaxVMEventsPerSession = 5000

// AppendVMEvent inserts one row, dropping the session's oldest past
// MaxVMEventsPerSession.
func (s *Store) AppendVMEvent(ctx context.Context, r VMEventRow) error {
	if r.Session == "" || r.Kind == "" {
		return fmt.Errorf("store: a vm event needs a session and a kind: %w", ErrInvalid)
	}
	if len(r.Data) == 0 {
		r.Data = json.RawMessage("{}")
	}
	if err := checkJSON("vm event data", r.Data); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO vm_events (session, time, kind, data) VALUES (?, ?, ?, ?)`,
		r.Session, formatTime(r.Time), r.Kind, string(r.Data))
	if err != nil {
		return fmt.Errorf("store: vm event of %s: %w", r.Session, err)
	}
	_, err = s.db.ExecContext(ctx, `DELETE FROM vm_events WHERE session = ? AND id <= (
		SELECT id FROM vm_events WHERE session = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`, r.Session, r.Session, MaxVMEventsPerSession)
	if err != nil {
		return fmt.Errorf("store: trim the vm events of %s: %w", r.Session, err)
	}
	return nil
}

// ListVMEvents returns up to MaxVMEventList rows of session whose time is
// after since (the zero time: all), oldest first.
func (s *Store) ListVMEvents(ctx context.Context, session string, since time.Time) ([]VMEventRow, error) {
	if since.IsZero() {
		return s.listVMEvents(ctx, `WHERE session = ? ORDER BY id LIMIT ?`, session, MaxVMEventList)
	}
	return s.listVMEvents(ctx, `WHERE session = ? AND time > ? ORDER BY id LIMIT ?`, session, formatTime(since), MaxVMEventList)
}

// ListVMEventsTail returns the newest n rows of session (at most
// MaxVMEventList), oldest first.
func (s *Store) ListVMEventsTail(ctx context.Context, session string, n int) ([]VMEventRow, error) {
	if n <= 0 || n > MaxVMEventList {
		n = MaxVMEventList
	}
	out, err := s.listVMEvents(ctx, `WHERE session = ? ORDER BY id DESC LIMIT ?`, session, n)
	slices.Reverse(out)
	return out, err
}

// ListVMEventsAfter returns up to MaxVMEventList rows of session with an
// ID over afterID, oldest first.
func (s *Store) ListVMEventsAfter(ctx context.Context, session string, afterID int64) ([]VMEventRow, error) {
	return s.listVMEvents(ctx, `WHERE session = ? AND id > ? ORDER BY id LIMIT ?`, session, afterID, MaxVMEventList)
}

func (s *Store) listVMEvents(ctx context.Context, where string, args ...any) ([]VMEventRow, error) {
	session := args[0]
	rows, err := s.db.QueryContext(ctx, `SELECT id, session, time, kind, data FROM vm_events `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: vm events of %s: %w", session, err)
	}
	defer rows.Close()
	out := []VMEventRow{}
	for rows.Next() {
		var r VMEventRow
		var t, data string
		if err := rows.Scan(&r.ID, &r.Session, &t, &r.Kind, &data); err != nil {
			return nil, fmt.Errorf("store: vm events of %s: %w", session, err)
		}
		if r.Time, err = parseTime(t); err != nil {
			return nil, err
		}
		r.Data = json.RawMessage(data)
		out = append(out, r)
	}
	return out, rows.Err()
}
