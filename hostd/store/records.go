package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A session's checkpoints, jobs and uploads. Each belongs to a session row
// (putting one for a session that does not exist is ErrNotFound) and goes
// with it when the session row is deleted.

// CheckpointRow is one checkpoint of a session: its tag, unique within the
// session, and the backend's snapshot description as JSON.
type CheckpointRow struct {
	SessionID string
	Tag       string
	Snapshot  json.RawMessage
	CreatedAt time.Time
}

// JobRow is one job's metadata.
type JobRow struct {
	SessionID string
	JobID     string
	Command   string
	Record    json.RawMessage
}

// UploadRow is one upload's metadata.
type UploadRow struct {
	SessionID string
	UploadID  string
	Record    json.RawMessage
}

// insertForSession runs an INSERT for a row that references a session and
// maps constraint failures to ErrConflict (duplicate key) and ErrNotFound
// (no such session).
func (s *Store) insertForSession(ctx context.Context, what, sessionID, q string, args ...any) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		switch {
		case isUniqueViolation(err):
			return fmt.Errorf("store: put %s: %w", what, ErrConflict)
		case isForeignKeyViolation(err):
			return fmt.Errorf("store: put %s: session %s: %w", what, sessionID, ErrNotFound)
		case err != nil:
			return fmt.Errorf("store: put %s: %w", what, err)
		}
		return nil
	})
}

// PutCheckpoint records a new checkpoint. Tags are never overwritten:
// ErrConflict if the session has one with that tag already.
func (s *Store) PutCheckpoint(ctx context.Context, c CheckpointRow) error {
	what := "checkpoint " + c.SessionID + "/" + c.Tag
	if err := errors.Join(checkKey("session id", c.SessionID), checkKey("checkpoint tag", c.Tag), checkJSON(what+" snapshot", c.Snapshot)); err != nil {
		return fmt.Errorf("store: put %s: %w", what, err)
	}
	return s.insertForSession(ctx, what, c.SessionID,
		`INSERT INTO checkpoints (session_id, tag, snapshot, created_at) VALUES (?, ?, ?, ?)`,
		c.SessionID, c.Tag, string(c.Snapshot), formatTime(c.CreatedAt))
}

func scanCheckpoint(sc scanner) (CheckpointRow, error) {
	var (
		c                 CheckpointRow
		snapshot, created string
	)
	if err := sc.Scan(&c.SessionID, &c.Tag, &snapshot, &created); err != nil {
		return CheckpointRow{}, err
	}
	t, err := parseTime(created)
	if err != nil {
		return CheckpointRow{}, err
	}
	c.Snapshot, c.CreatedAt = json.RawMessage(snapshot), t
	return c, nil
}

// GetCheckpoint returns one checkpoint, or ErrNotFound.
func (s *Store) GetCheckpoint(ctx context.Context, sessionID, tag string) (CheckpointRow, error) {
	return getOne(ctx, s.db, "checkpoint "+sessionID+"/"+tag, scanCheckpoint,
		`SELECT session_id, tag, snapshot, created_at FROM checkpoints WHERE session_id = ? AND tag = ?`, sessionID, tag)
}

// ListCheckpoints returns a session's checkpoints, oldest first.
func (s *Store) ListCheckpoints(ctx context.Context, sessionID string) ([]CheckpointRow, error) {
	return list(ctx, s.db, "checkpoints of "+sessionID, scanCheckpoint,
		`SELECT session_id, tag, snapshot, created_at FROM checkpoints WHERE session_id = ? ORDER BY created_at, rowid`, sessionID)
}

// DeleteCheckpoint removes one checkpoint, or returns ErrNotFound.
func (s *Store) DeleteCheckpoint(ctx context.Context, sessionID, tag string) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		return deleteOne(ctx, tx, "checkpoint "+sessionID+"/"+tag,
			`DELETE FROM checkpoints WHERE session_id = ? AND tag = ?`, sessionID, tag)
	})
}

// PutJob inserts or replaces a job's metadata (a job's record changes as it
// runs and exits). ErrNotFound if the session does not exist.
func (s *Store) PutJob(ctx context.Context, j JobRow) error {
	what := "job " + j.SessionID + "/" + j.JobID
	if err := errors.Join(checkKey("session id", j.SessionID), checkKey("job id", j.JobID), checkJSON(what+" record", j.Record)); err != nil {
		return fmt.Errorf("store: put %s: %w", what, err)
	}
	return s.insertForSession(ctx, what, j.SessionID,
		`INSERT INTO jobs (session_id, job_id, command, record) VALUES (?, ?, ?, ?)
		 ON CONFLICT (session_id, job_id) DO UPDATE SET command = excluded.command, record = excluded.record`,
		j.SessionID, j.JobID, j.Command, string(j.Record))
}

func scanJob(sc scanner) (JobRow, error) {
	var (
		j      JobRow
		record string
	)
	if err := sc.Scan(&j.SessionID, &j.JobID, &j.Command, &record); err != nil {
		return JobRow{}, err
	}
	j.Record = json.RawMessage(record)
	return j, nil
}

// GetJob returns one job's metadata, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, sessionID, jobID string) (JobRow, error) {
	return getOne(ctx, s.db, "job "+sessionID+"/"+jobID, scanJob,
		`SELECT session_id, job_id, command, record FROM jobs WHERE session_id = ? AND job_id = ?`, sessionID, jobID)
}

// ListJobs returns a session's jobs in the order they were first put.
func (s *Store) ListJobs(ctx context.Context, sessionID string) ([]JobRow, error) {
	return list(ctx, s.db, "jobs of "+sessionID, scanJob,
		`SELECT session_id, job_id, command, record FROM jobs WHERE session_id = ? ORDER BY rowid`, sessionID)
}

// DeleteJobs removes every job of a session (the sweeper's cleanup of an
// ended session, which keeps the session row) and says how many went.
func (s *Store) DeleteJobs(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE session_id = ?`, sessionID)
		if err != nil {
			return fmt.Errorf("store: delete jobs of %s: %w", sessionID, err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// PutUpload inserts or replaces an upload's metadata. ErrNotFound if the
// session does not exist.
func (s *Store) PutUpload(ctx context.Context, u UploadRow) error {
	what := "upload " + u.SessionID + "/" + u.UploadID
	if err := errors.Join(checkKey("session id", u.SessionID), checkKey("upload id", u.UploadID), checkJSON(what+" record", u.Record)); err != nil {
		return fmt.Errorf("store: put %s: %w", what, err)
	}
	return s.insertForSession(ctx, what, u.SessionID,
		`INSERT INTO uploads (session_id, upload_id, record) VALUES (?, ?, ?)
		 ON CONFLICT (session_id, upload_id) DO UPDATE SET record = excluded.record`,
		u.SessionID, u.UploadID, string(u.Record))
}

func scanUpload(sc scanner) (UploadRow, error) {
	var (
		u      UploadRow
		record string
	)
	if err := sc.Scan(&u.SessionID, &u.UploadID, &record); err != nil {
		return UploadRow{}, err
	}
	u.Record = json.RawMessage(record)
	return u, nil
}

// GetUpload returns one upload's metadata, or ErrNotFound.
func (s *Store) GetUpload(ctx context.Context, sessionID, uploadID string) (UploadRow, error) {
	return getOne(ctx, s.db, "upload "+sessionID+"/"+uploadID, scanUpload,
		`SELECT session_id, upload_id, record FROM uploads WHERE session_id = ? AND upload_id = ?`, sessionID, uploadID)
}

// ListUploads returns a session's uploads in the order they were first put.
func (s *Store) ListUploads(ctx context.Context, sessionID string) ([]UploadRow, error) {
	return list(ctx, s.db, "uploads of "+sessionID, scanUpload,
		`SELECT session_id, upload_id, record FROM uploads WHERE session_id = ? ORDER BY rowid`, sessionID)
}

// DeleteUpload removes one upload's metadata, or returns ErrNotFound.
func (s *Store) DeleteUpload(ctx context.Context, sessionID, uploadID string) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		return deleteOne(ctx, tx, "upload "+sessionID+"/"+uploadID,
			`DELETE FROM uploads WHERE session_id = ? AND upload_id = ?`, sessionID, uploadID)
	})
}

// getOne scans the one row q finds: ErrNotFound when there is none,
// other errors wrapped with what is got.
func getOne[T any](ctx context.Context, db *sql.DB, what string, scan func(scanner) (T, error), q string, args ...any) (T, error) {
	v, err := scan(db.QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		var zero T
		return zero, fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("store: get %s: %w", what, err)
	}
	return v, nil
}

// list runs a query and scans every row with scan.
func list[T any](ctx context.Context, db *sql.DB, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	return out, nil
}
