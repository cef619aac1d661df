package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// LifecycleOp is the marker of a checkpoint, restore, fork or delete in
// progress on a session. Daemon names the process that wrote it, so a
// reader can tell its own operation in flight from one a dead daemon left.
type LifecycleOp struct {
	SessionID string
	Op        string
	StartedAt time.Time
	Daemon    string
	// Reported: the interruption was ledgered already.
	Reported bool
}

// PutLifecycleOp writes (or replaces) a session's marker. ErrNotFound if
// there is no such session; ErrInvalid for an op the table does not know.
func (s *Store) PutLifecycleOp(ctx context.Context, op LifecycleOp) error {
	if err := errors.Join(checkKey("session id", op.SessionID), checkKey("daemon", op.Daemon)); err != nil {
		return fmt.Errorf("store: put lifecycle marker: %w", err)
	}
	switch op.Op {
	case "checkpoint", "restore", "fork", "delete":
	default:
		return fmt.Errorf("store: lifecycle op %q: %w", op.Op, ErrInvalid)
	}
	return s.insertForSession(ctx, "lifecycle marker", op.SessionID,
		`INSERT INTO lifecycle_ops (session_id, op, started_at, daemon, reported) VALUES (?, ?, ?, ?, 0)
		 ON CONFLICT (session_id) DO UPDATE SET op = excluded.op, started_at = excluded.started_at,
		   daemon = excluded.daemon, reported = 0`,
		op.SessionID, op.Op, formatTime(op.StartedAt), op.Daemon)
}

// GetLifecycleOp returns a session's marker, or ErrNotFound when it has
// none.
func (s *Store) GetLifecycleOp(ctx context.Context, sessionID string) (LifecycleOp, error) {
	var (
		op      = LifecycleOp{SessionID: sessionID}
		started string
	)
	err := s.db.QueryRowContext(ctx, `SELECT op, started_at, daemon, reported FROM lifecycle_ops WHERE session_id = ?`, sessionID).
		Scan(&op.Op, &started, &op.Daemon, &op.Reported)
	if errors.Is(err, sql.ErrNoRows) {
		return LifecycleOp{}, fmt.Errorf("store: lifecycle marker of %s: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return LifecycleOp{}, fmt.Errorf("store: lifecycle marker of %s: %w", sessionID, err)
	}
	if op.StartedAt, err = parseTime(started); err != nil {
		return LifecycleOp{}, err
	}
	return op, nil
}

// ReportLifecycleOp marks a marker that another daemon left as reported
// and says whether this call did it: of any number of readers, exactly
// one gets true.
func (s *Store) ReportLifecycleOp(ctx context.Context, sessionID, daemon string) (bool, error) {
	first := false
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE lifecycle_ops SET reported = 1 WHERE session_id = ? AND daemon != ? AND reported = 0`, sessionID, daemon)
		if err != nil {
			return fmt.Errorf("store: report lifecycle marker of %s: %w", sessionID, err)
		}
		n, _ := res.RowsAffected()
		first = n == 1
		return nil
	})
	return first, err
}

// DeleteLifecycleOp removes a session's marker (none is not an error).
func (s *Store) DeleteLifecycleOp(ctx context.Context, sessionID string) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM lifecycle_ops WHERE session_id = ?`, sessionID); err != nil {
			return fmt.Errorf("store: delete lifecycle marker of %s: %w", sessionID, err)
		}
		return nil
	})
}
