package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// UsageRow is what a session has used so far. It lives in its own table,
// so counting an exec never changes the session's revision.
type UsageRow struct {
	Execs  int64
	ExecMS int64
	Jobs   int64
}

// AddUsage adds to a session's counters. ErrNotFound if there is no such
// session.
func (s *Store) AddUsage(ctx context.Context, sessionID string, add UsageRow) error {
	if add.Execs < 0 || add.ExecMS < 0 || add.Jobs < 0 {
		return fmt.Errorf("store: usage only grows: %+v", add)
	}
	return s.insertForSession(ctx, "usage", sessionID,
		`INSERT INTO usage (session_id, execs, exec_ms, jobs) VALUES (?, ?, ?, ?)
		 ON CONFLICT (session_id) DO UPDATE SET execs = execs + excluded.execs,
		   exec_ms = exec_ms + excluded.exec_ms, jobs = jobs + excluded.jobs`,
		sessionID, add.Execs, add.ExecMS, add.Jobs)
}

// GetUsage returns a session's counters (zero when nothing was counted).
func (s *Store) GetUsage(ctx context.Context, sessionID string) (UsageRow, error) {
	var u UsageRow
	err := s.db.QueryRowContext(ctx, `SELECT execs, exec_ms, jobs FROM usage WHERE session_id = ?`, sessionID).Scan(&u.Execs, &u.ExecMS, &u.Jobs)
	if errors.Is(err, sql.ErrNoRows) {
		return UsageRow{}, nil
	}
	if err != nil {
		return u, fmt.Errorf("store: usage of %s: %w", sessionID, err)
	}
	return u, nil
}

// CleanupSession removes what an ended session leaves besides its record
// and ledger: checkpoints, jobs, uploads and usage, in one transaction.
func (s *Store) CleanupSession(ctx context.Context, sessionID string) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		for _, table := range []string{"checkpoints", "jobs", "uploads", "usage"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE session_id = ?`, sessionID); err != nil {
				return fmt.Errorf("store: clean up %s of %s: %w", table, sessionID, err)
			}
		}
		return nil
	})
}
