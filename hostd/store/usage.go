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
	// Children counts fork children (max_children); JobMS is the wall
	// time of finished jobs (SettleJob); WorkspaceBytes is the last
	// measure of the workspace (SetWorkspaceBytes), not a sum.
	Children       int64
	JobMS          int64
	WorkspaceBytes int64
	// CPUMS is the CPU time charged to the session's sandbox
	// (ChargeCPU); AddUsage cannot change it.
	CPUMS int64
}

// AddUsage adds to a session's counters. ErrNotFound if there is no such
// session.
func (s *Store) AddUsage(ctx context.Context, sessionID string, add UsageRow) error {
	if add.Execs < 0 || add.ExecMS < 0 || add.Jobs < 0 || add.Children < 0 || add.JobMS < 0 || add.WorkspaceBytes != 0 || add.CPUMS != 0 {
		return fmt.Errorf("store: usage only grows (and the workspace is measured, not added): %+v", add)
	}
	return s.insertForSession(ctx, "usage", sessionID,
		`INSERT INTO usage (session_id, execs, exec_ms, jobs, children, job_ms) VALUES (?, ?, ?, ?, ?, ?)
		 ON CONFLICT (session_id) DO UPDATE SET execs = execs + excluded.execs,
		   exec_ms = exec_ms + excluded.exec_ms, jobs = jobs + excluded.jobs,
		   children = children + excluded.children, job_ms = job_ms + excluded.job_ms`,
		sessionID, add.Execs, add.ExecMS, add.Jobs, add.Children, add.JobMS)
}

// GetUsage returns a session's counters (zero when nothing was counted).
func (s *Store) GetUsage(ctx context.Context, sessionID string) (UsageRow, error) {
	var u UsageRow
	err := s.db.QueryRowContext(ctx, `SELECT execs, exec_ms, jobs, children, job_ms, workspace_bytes, cpu_ms FROM usage WHERE session_id = ?`, sessionID).
		Scan(&u.Execs, &u.ExecMS, &u.Jobs, &u.Children, &u.JobMS, &u.WorkspaceBytes, &u.CPUMS)
	if errors.Is(err, sql.ErrNoRows) {
		return UsageRow{}, nil
	}
	if err != nil {
		return u, fmt.Errorf("store: usage of %s: %w", sessionID, err)
	}
	return u, nil
}

// CleanupSession removes what an ended session leaves besides its record
// and ledger: checkpoints, jobs, uploads, usage, approvals and previews,
// in one transaction.
func (s *Store) CleanupSession(ctx context.Context, sessionID string) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		for _, table := range []string{"checkpoints", "jobs", "uploads", "usage", "approvals", "previews"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE session_id = ?`, sessionID); err != nil {
				return fmt.Errorf("store: clean up %s of %s: %w", table, sessionID, err)
			}
		}
		return nil
	})
}

// ErrLimit: TakeUsage would take a counter past its limit.
var ErrLimit = errors.New("limit reached")

// Counters TakeUsage and GiveBackUsage work on.
const (
	CounterExecs    = "execs"
	CounterJobs     = "jobs"
	CounterChildren = "children"
)

func checkCounter(counter string) error {
	switch counter {
	case CounterExecs, CounterJobs, CounterChildren:
		return nil
	}
	return fmt.Errorf("store: usage counter %q: %w", counter, ErrInvalid)
}

// TakeUsage adds n to one counter if the result stays at most limit, in
// one statement, so two requests racing for the last unit cannot both get
// it. It returns the counter's value before the call; ErrLimit (with that
// value) when n does not fit, ErrNotFound when there is no such session.
func (s *Store) TakeUsage(ctx context.Context, sessionID, counter string, n, limit int64) (before int64, err error) {
	if err := checkCounter(counter); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("store: take %d %s: %w", n, counter, ErrInvalid)
	}
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage (session_id) VALUES (?) ON CONFLICT (session_id) DO NOTHING`, sessionID); err != nil {
			if isForeignKeyViolation(err) {
				return fmt.Errorf("store: usage of %s: %w", sessionID, ErrNotFound)
			}
			return fmt.Errorf("store: usage of %s: %w", sessionID, err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT `+counter+` FROM usage WHERE session_id = ?`, sessionID).Scan(&before); err != nil {
			return fmt.Errorf("store: usage of %s: %w", sessionID, err)
		}
		if before > limit-n {
			return ErrLimit
		}
		_, err := tx.ExecContext(ctx, `UPDATE usage SET `+counter+` = `+counter+` + ? WHERE session_id = ?`, n, sessionID)
		return err
	})
	return before, err
}

// GiveBackUsage takes n off one counter (never below zero): what a
// request took with TakeUsage and then did not use.
func (s *Store) GiveBackUsage(ctx context.Context, sessionID, counter string, n int64) error {
	if err := checkCounter(counter); err != nil {
		return err
	}
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE usage SET `+counter+` = MAX(0, `+counter+` - ?) WHERE session_id = ?`, n, sessionID)
		return err
	})
}

// ChargeCPU charges a session the CPU time its sandbox used since the
// last charge: reading is the machine's CPU time since it was created
// (it only grows), and what it grew by since the reading last charged is
// added to cpu_ms, in one transaction. A reading below the last one
// (a machine that lost its count) charges nothing until it passes it.
// It returns cpu_ms after the charge.
func (s *Store) ChargeCPU(ctx context.Context, sessionID string, readingMS int64) (int64, error) {
	if readingMS < 0 {
		return 0, fmt.Errorf("store: a CPU reading of %d ms: %w", readingMS, ErrInvalid)
	}
	var cpu int64
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage (session_id) VALUES (?) ON CONFLICT (session_id) DO NOTHING`, sessionID); err != nil {
			if isForeignKeyViolation(err) {
				return fmt.Errorf("store: usage of %s: %w", sessionID, ErrNotFound)
			}
			return fmt.Errorf("store: usage of %s: %w", sessionID, err)
		}
		var seen int64
		if err := tx.QueryRowContext(ctx, `SELECT cpu_ms, cpu_seen_ms FROM usage WHERE session_id = ?`, sessionID).Scan(&cpu, &seen); err != nil {
			return fmt.Errorf("store: usage of %s: %w", sessionID, err)
		}
		if readingMS <= seen {
			return nil
		}
		cpu += readingMS - seen
		_, err := tx.ExecContext(ctx, `UPDATE usage SET cpu_ms = ?, cpu_seen_ms = ? WHERE session_id = ?`, cpu, readingMS, sessionID)
		return err
	})
	return cpu, err
}

// SetWorkspaceBytes records the last measure of the session's workspace.
func (s *Store) SetWorkspaceBytes(ctx context.Context, sessionID string, n int64) error {
	if n < 0 {
		return fmt.Errorf("store: workspace of %d bytes: %w", n, ErrInvalid)
	}
	return s.insertForSession(ctx, "usage", sessionID,
		`INSERT INTO usage (session_id, workspace_bytes) VALUES (?, ?)
		 ON CONFLICT (session_id) DO UPDATE SET workspace_bytes = excluded.workspace_bytes`, sessionID, n)
}

// SettleJob accounts a finished job once: it removes the job's row and
// adds ms to the session's job time, in one transaction. It reports false
// (and adds nothing) when the job has no row, i.e. it was settled before.
func (s *Store) SettleJob(ctx context.Context, sessionID, jobID string, ms int64) (bool, error) {
	if ms < 0 {
		ms = 0
	}
	settled := false
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE session_id = ? AND job_id = ?`, sessionID, jobID)
		if err != nil {
			return fmt.Errorf("store: settle job %s/%s: %w", sessionID, jobID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		settled = true
		_, err = tx.ExecContext(ctx, `INSERT INTO usage (session_id, job_ms) VALUES (?, ?)
			ON CONFLICT (session_id) DO UPDATE SET job_ms = job_ms + excluded.job_ms`, sessionID, ms)
		return err
	})
	return settled, err
}
