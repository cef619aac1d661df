package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Approval states. A request is pending until an operator approves or
// denies it, or it expires; an approved one is consumed by exactly one run.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalConsumed = "consumed"
)

var (
	// ErrApprovalLimit: the session has as many pending requests as it may.
	ErrApprovalLimit = errors.New("too many pending approval requests")
	// ErrApprovalState: the request is not in the state the change needs
	// (decided already, expired, used, or bound to another command).
	ErrApprovalState = errors.New("approval request is not in the needed state")
)

// ApprovalRow is one approval request: a held command, bound by Digest to
// the session, the kind, the exact command and its parameters, the policy
// and the session's revision.
type ApprovalRow struct {
	ID         string
	SessionID  string
	Kind       string // "exec" or "job"
	Digest     string // hex SHA-256
	Command    string
	Summary    string
	Matched    string // the rule and pattern that asked
	State      string
	Requester  string // the actor who asked
	Decider    string // the actor who decided
	Note       string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	DecidedAt  time.Time
	ConsumedAt time.Time
}

// Expired reports whether a request that is not yet consumed is past its
// expiry at now.
func (a ApprovalRow) Expired(now time.Time) bool {
	return a.State != ApprovalConsumed && !now.Before(a.ExpiresAt)
}

const approvalCols = `id, session_id, kind, digest, command, summary, matched, state, requester, decider, note, created_at, expires_at, decided_at, consumed_at`

func scanApproval(sc scanner) (ApprovalRow, error) {
	var (
		a                                   ApprovalRow
		created, expires, decided, consumed string
	)
	if err := sc.Scan(&a.ID, &a.SessionID, &a.Kind, &a.Digest, &a.Command, &a.Summary, &a.Matched, &a.State,
		&a.Requester, &a.Decider, &a.Note, &created, &expires, &decided, &consumed); err != nil {
		return ApprovalRow{}, err
	}
	var err error
	if a.CreatedAt, err = parseTime(created); err != nil {
		return a, err
	}
	if a.ExpiresAt, err = parseTime(expires); err != nil {
		return a, err
	}
	if decided != "" {
		if a.DecidedAt, err = parseTime(decided); err != nil {
			return a, err
		}
	}
	if consumed != "" {
		if a.ConsumedAt, err = parseTime(consumed); err != nil {
			return a, err
		}
	}
	return a, nil
}

func optTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return formatTime(t)
}

// PutApproval opens a request, or returns the live one (pending, not
// expired at now) with the same digest: asking again for the same command
// finds the same request. maxPending bounds a session's live pending
// requests and maxRows all it keeps: requests decided, used or expired
// more than a day ago are pruned to make room, and past either bound it
// is ErrApprovalLimit. created reports whether a is new.
func (s *Store) PutApproval(ctx context.Context, a ApprovalRow, now time.Time, maxPending, maxRows int) (out ApprovalRow, created bool, err error) {
	if err := errors.Join(checkKey("session id", a.SessionID), checkKey("approval id", a.ID)); err != nil {
		return a, false, fmt.Errorf("store: put approval: %w", err)
	}
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		row := tx.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals
			WHERE session_id = ? AND digest = ? AND state = ? AND expires_at > ? ORDER BY created_at DESC LIMIT 1`,
			a.SessionID, a.Digest, ApprovalPending, formatTime(now))
		prev, err := scanApproval(row)
		if err == nil {
			out, created = prev, false
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM approvals WHERE session_id = ? AND state = ? AND expires_at > ?`,
			a.SessionID, ApprovalPending, formatTime(now)).Scan(&n); err != nil {
			return err
		}
		if n >= maxPending {
			return fmt.Errorf("store: session %s has %d pending approval requests: %w", a.SessionID, n, ErrApprovalLimit)
		}
		var total int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM approvals WHERE session_id = ?`, a.SessionID).Scan(&total); err != nil {
			return err
		}
		if total >= maxRows {
			dayAgo := formatTime(now.Add(-24 * time.Hour))
			if _, err := tx.ExecContext(ctx, `DELETE FROM approvals WHERE session_id = ? AND (
				(state != ? AND created_at < ?) OR (state = ? AND expires_at < ?))`,
				a.SessionID, ApprovalPending, dayAgo, ApprovalPending, dayAgo); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM approvals WHERE session_id = ?`, a.SessionID).Scan(&total); err != nil {
				return err
			}
			if total >= maxRows {
				return fmt.Errorf("store: session %s keeps %d approval requests: %w", a.SessionID, total, ErrApprovalLimit)
			}
		}
		a.State = ApprovalPending
		_, err = tx.ExecContext(ctx, `INSERT INTO approvals (`+approvalCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.SessionID, a.Kind, a.Digest, a.Command, a.Summary, a.Matched, a.State, a.Requester, a.Decider, a.Note,
			formatTime(a.CreatedAt), formatTime(a.ExpiresAt), optTime(a.DecidedAt), optTime(a.ConsumedAt))
		switch {
		case isForeignKeyViolation(err):
			return fmt.Errorf("store: put approval: session %s: %w", a.SessionID, ErrNotFound)
		case isUniqueViolation(err):
			return fmt.Errorf("store: put approval %s: %w", a.ID, ErrConflict)
		case err != nil:
			return err
		}
		out, created = a, true
		return nil
	})
	return out, created, err
}

// GetApproval returns one request of a session.
func (s *Store) GetApproval(ctx context.Context, sessionID, id string) (ApprovalRow, error) {
	a, err := scanApproval(s.db.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE session_id = ? AND id = ?`, sessionID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("store: approval %s of %s: %w", id, sessionID, ErrNotFound)
	}
	return a, err
}

// ListApprovals returns a session's requests, oldest first.
func (s *Store) ListApprovals(ctx context.Context, sessionID string) ([]ApprovalRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE session_id = ? ORDER BY created_at, id`, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ApprovalRow
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// DecideApproval moves a pending, unexpired request to approved or denied,
// as a compare-and-set: ErrApprovalState (with the row as it is) when it is not
// pending any more or has expired.
func (s *Store) DecideApproval(ctx context.Context, sessionID, id, state, decider, note string, now time.Time) (ApprovalRow, error) {
	if state != ApprovalApproved && state != ApprovalDenied {
		return ApprovalRow{}, fmt.Errorf("store: decide approval: state %q", state)
	}
	var out ApprovalRow
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ?, decider = ?, note = ?, decided_at = ?
			WHERE session_id = ? AND id = ? AND state = ? AND expires_at > ?`,
			state, decider, note, formatTime(now), sessionID, id, ApprovalPending, formatTime(now))
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		out, err = scanApproval(tx.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE session_id = ? AND id = ?`, sessionID, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: approval %s of %s: %w", id, sessionID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("store: approval %s is %s: %w", id, out.State, ErrApprovalState)
		}
		return nil
	})
	return out, err
}

// ConsumeApproval spends an approved, unexpired request whose digest is
// digest: a compare-and-set in one transaction, so of two concurrent
// retries exactly one gets it. Otherwise ErrApprovalState, with the row as it is
// (the caller says why: denied, used, expired, another command).
func (s *Store) ConsumeApproval(ctx context.Context, sessionID, id, digest string, now time.Time) (ApprovalRow, error) {
	var out ApprovalRow
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ?, consumed_at = ?
			WHERE session_id = ? AND id = ? AND state = ? AND digest = ? AND expires_at > ?`,
			ApprovalConsumed, formatTime(now), sessionID, id, ApprovalApproved, digest, formatTime(now))
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		out, err = scanApproval(tx.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE session_id = ? AND id = ?`, sessionID, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: approval %s of %s: %w", id, sessionID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("store: approval %s cannot be used: %w", id, ErrApprovalState)
		}
		return nil
	})
	return out, err
}

// ReturnApproval gives back a request ConsumeApproval spent, for a command
// that then did not start: consumed becomes approved again, as a
// compare-and-set (ErrApprovalState when the request is not consumed).
// Its expiry stands, so a request past it stays unusable.
func (s *Store) ReturnApproval(ctx context.Context, sessionID, id string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET state = ?, consumed_at = ''
		WHERE session_id = ? AND id = ? AND state = ?`, ApprovalApproved, sessionID, id, ApprovalConsumed)
	if err != nil {
		return fmt.Errorf("store: return approval %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("store: approval %s is not consumed: %w", id, errors.Join(err, ErrApprovalState))
	}
	return nil
}

// DeleteApprovals removes a session's requests (the session ended).
func (s *Store) DeleteApprovals(ctx context.Context, sessionID string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM approvals WHERE session_id = ?`, sessionID)
	return err
}
