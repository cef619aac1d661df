package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrTooManyTokens: a session already has as many live tokens as
// PutToken allows.
var ErrTooManyTokens = errors.New("too many live tokens")

// TokenRow is one session token. The token itself is never stored: Hash
// is its SHA-256, and ID is the public part of the token by which it is
// found.
type TokenRow struct {
	ID        string
	SessionID string
	Hash      [32]byte
	Ops       []string
	Label     string
	CreatedBy string // the ledger actor who minted it
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt *time.Time

	// Read from the session's row by GetToken; not stored with the token.
	Tenant       string
	SessionState string
}

// Live reports whether the token is neither revoked nor expired at now.
func (t TokenRow) Live(now time.Time) bool { return t.RevokedAt == nil && now.Before(t.ExpiresAt) }

const tokenColumns = `t.id, t.session_id, t.hash, t.ops, t.label, t.created_by, t.created_at, t.expires_at, t.revoked_at, s.tenant, s.state`

func scanToken(sc scanner) (TokenRow, error) {
	var (
		t                         TokenRow
		hash, ops, created, expir string
		revoked                   sql.NullString
	)
	if err := sc.Scan(&t.ID, &t.SessionID, &hash, &ops, &t.Label, &t.CreatedBy, &created, &expir, &revoked, &t.Tenant, &t.SessionState); err != nil {
		return TokenRow{}, err
	}
	raw, err := hex.DecodeString(hash)
	if err != nil || len(raw) != 32 {
		return TokenRow{}, fmt.Errorf("store: token %s: bad stored hash", t.ID)
	}
	t.Hash = [32]byte(raw)
	if err := json.Unmarshal([]byte(ops), &t.Ops); err != nil {
		return TokenRow{}, fmt.Errorf("store: token %s: bad stored ops: %w", t.ID, err)
	}
	if t.CreatedAt, err = parseTime(created); err != nil {
		return TokenRow{}, err
	}
	if t.ExpiresAt, err = parseTime(expir); err != nil {
		return TokenRow{}, err
	}
	if revoked.Valid {
		at, err := parseTime(revoked.String)
		if err != nil {
			return TokenRow{}, err
		}
		t.RevokedAt = &at
	}
	return t, nil
}

// PutToken records a new token, unless its session already has maxLive
// tokens that are live at t.CreatedAt (ErrTooManyTokens). The count and the
// insert are one transaction, so concurrent mints never pass the limit.
// ErrNotFound if the session does not exist, ErrConflict if the id does.
func (s *Store) PutToken(ctx context.Context, t TokenRow, maxLive int) error {
	what := "token " + t.SessionID + "/" + t.ID
	if err := errors.Join(checkKey("session id", t.SessionID), checkKey("token id", t.ID)); err != nil {
		return fmt.Errorf("store: put %s: %w", what, err)
	}
	if len(t.Ops) == 0 {
		return fmt.Errorf("store: put %s: no ops: %w", what, ErrInvalid)
	}
	ops, err := json.Marshal(t.Ops)
	if err != nil {
		return err
	}
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE session_id = ? AND revoked_at IS NULL AND expires_at > ?`,
			t.SessionID, formatTime(t.CreatedAt)).Scan(&n); err != nil {
			return fmt.Errorf("store: put %s: count live tokens: %w", what, err)
		}
		if n >= maxLive {
			return fmt.Errorf("store: put %s: the session has %d live tokens: %w", what, n, ErrTooManyTokens)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tokens (id, session_id, hash, ops, label, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.SessionID, hex.EncodeToString(t.Hash[:]), string(ops), t.Label, t.CreatedBy, formatTime(t.CreatedAt), formatTime(t.ExpiresAt))
		switch {
		case isUniqueViolation(err):
			return fmt.Errorf("store: put %s: %w", what, ErrConflict)
		case isForeignKeyViolation(err):
			return fmt.Errorf("store: put %s: session %s: %w", what, t.SessionID, ErrNotFound)
		case err != nil:
			return fmt.Errorf("store: put %s: %w", what, err)
		}
		return nil
	})
}

// GetToken returns a token by id, with its session's tenant and state, or
// ErrNotFound.
func (s *Store) GetToken(ctx context.Context, id string) (TokenRow, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens t JOIN sessions s ON s.id = t.session_id WHERE t.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return TokenRow{}, fmt.Errorf("store: token %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return TokenRow{}, fmt.Errorf("store: get token %s: %w", id, err)
	}
	return t, nil
}

// ListTokens returns a session's tokens that are live at now, oldest
// first.
func (s *Store) ListTokens(ctx context.Context, sessionID string, now time.Time) ([]TokenRow, error) {
	return list(ctx, s.db, "tokens of "+sessionID, scanToken,
		`SELECT `+tokenColumns+` FROM tokens t JOIN sessions s ON s.id = t.session_id
		 WHERE t.session_id = ? AND t.revoked_at IS NULL AND t.expires_at > ? ORDER BY t.created_at, t.rowid`,
		sessionID, formatTime(now))
}

// RevokeToken revokes one token of a session at at. revoked says whether
// it was live until now; a token already revoked or expired is left as it
// is (revoked false, no error). ErrNotFound if the session has no token
// with that id.
func (s *Store) RevokeToken(ctx context.Context, sessionID, id string, at time.Time) (t TokenRow, revoked bool, err error) {
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		var e error
		t, e = scanToken(tx.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens t JOIN sessions s ON s.id = t.session_id WHERE t.id = ? AND t.session_id = ?`, id, sessionID))
		if errors.Is(e, sql.ErrNoRows) {
			return fmt.Errorf("store: token %s/%s: %w", sessionID, id, ErrNotFound)
		}
		if e != nil {
			return fmt.Errorf("store: revoke token %s/%s: %w", sessionID, id, e)
		}
		if !t.Live(at) {
			return nil
		}
		if _, e := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE id = ?`, formatTime(at), id); e != nil {
			return fmt.Errorf("store: revoke token %s/%s: %w", sessionID, id, e)
		}
		at := at.UTC()
		t.RevokedAt, revoked = &at, true
		return nil
	})
	return t, revoked, err
}

// RevokeSessionTokens revokes every token of a session that is live at
// at, and returns them.
func (s *Store) RevokeSessionTokens(ctx context.Context, sessionID string, at time.Time) ([]TokenRow, error) {
	var out []TokenRow
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+tokenColumns+` FROM tokens t JOIN sessions s ON s.id = t.session_id
			WHERE t.session_id = ? AND t.revoked_at IS NULL AND t.expires_at > ? ORDER BY t.created_at, t.rowid`, sessionID, formatTime(at))
		if err != nil {
			return fmt.Errorf("store: revoke tokens of %s: %w", sessionID, err)
		}
		for rows.Next() {
			t, err := scanToken(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("store: revoke tokens of %s: %w", sessionID, err)
			}
			out = append(out, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("store: revoke tokens of %s: %w", sessionID, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL AND expires_at > ?`,
			formatTime(at), sessionID, formatTime(at)); err != nil {
			return fmt.Errorf("store: revoke tokens of %s: %w", sessionID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	at = at.UTC()
	for i := range out {
		out[i].RevokedAt = &at
	}
	return out, nil
}
