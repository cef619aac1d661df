package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ErrTooManyPreviews: a session already has as many live previews as
// PutPreview allows.
var ErrTooManyPreviews = errors.New("too many live previews")

// PreviewRow is one preview URL. Its token is never stored: Hash is the
// token's SHA-256, by which the preview is found when the URL is used.
type PreviewRow struct {
	ID        string
	SessionID string
	Hash      [32]byte
	Port      int
	CreatedBy string // the ledger actor who made it
	CreatedAt time.Time
	ExpiresAt time.Time

	// Read from the session's row by PreviewByHash; not stored with the
	// preview.
	Tenant       string
	SessionState string
	SessionEnds  time.Time
}

// Live reports whether the preview has not expired at now.
func (p PreviewRow) Live(now time.Time) bool { return now.Before(p.ExpiresAt) }

const previewColumns = `p.id, p.session_id, p.hash, p.port, p.created_by, p.created_at, p.expires_at, s.tenant, s.state, s.expires_at`

func scanPreview(sc scanner) (PreviewRow, error) {
	var (
		p                              PreviewRow
		hash, created, expir, sessEnds string
	)
	if err := sc.Scan(&p.ID, &p.SessionID, &hash, &p.Port, &p.CreatedBy, &created, &expir, &p.Tenant, &p.SessionState, &sessEnds); err != nil {
		return PreviewRow{}, err
	}
	raw, err := hex.DecodeString(hash)
	if err != nil || len(raw) != 32 {
		return PreviewRow{}, fmt.Errorf("store: preview %s: bad stored hash", p.ID)
	}
	p.Hash = [32]byte(raw)
	if p.CreatedAt, err = parseTime(created); err != nil {
		return PreviewRow{}, err
	}
	if p.ExpiresAt, err = parseTime(expir); err != nil {
		return PreviewRow{}, err
	}
	if p.SessionEnds, err = parseTime(sessEnds); err != nil {
		return PreviewRow{}, err
	}
	return p, nil
}

// PutPreview records a new preview, unless its session already has maxLive
// previews live at p.CreatedAt (ErrTooManyPreviews). The session's expired
// previews are removed in the same transaction, so the count and the
// insert never race. ErrNotFound if the session does not exist,
// ErrConflict if the id or hash does.
func (s *Store) PutPreview(ctx context.Context, p PreviewRow, maxLive int) error {
	what := "preview " + p.SessionID + "/" + p.ID
	if err := errors.Join(checkKey("session id", p.SessionID), checkKey("preview id", p.ID)); err != nil {
		return fmt.Errorf("store: put %s: %w", what, err)
	}
	if p.Port < 1 || p.Port > 65535 {
		return fmt.Errorf("store: put %s: port %d: %w", what, p.Port, ErrInvalid)
	}
	now := formatTime(p.CreatedAt)
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM previews WHERE session_id = ? AND expires_at <= ?`, p.SessionID, now); err != nil {
			return fmt.Errorf("store: put %s: drop expired previews: %w", what, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM previews WHERE session_id = ?`, p.SessionID).Scan(&n); err != nil {
			return fmt.Errorf("store: put %s: count live previews: %w", what, err)
		}
		if n >= maxLive {
			return fmt.Errorf("store: put %s: the session has %d live previews: %w", what, n, ErrTooManyPreviews)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO previews (id, session_id, hash, port, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.ID, p.SessionID, hex.EncodeToString(p.Hash[:]), p.Port, p.CreatedBy, now, formatTime(p.ExpiresAt))
		switch {
		case isUniqueViolation(err):
			return fmt.Errorf("store: put %s: %w", what, ErrConflict)
		case isForeignKeyViolation(err):
			return fmt.Errorf("store: put %s: session %s: %w", what, p.SessionID, ErrNotFound)
		case err != nil:
			return fmt.Errorf("store: put %s: %w", what, err)
		}
		return nil
	})
}

// PreviewByHash returns the preview whose token hashes to hash, with its
// session's tenant, state and expiry, or ErrNotFound. Whether it is live
// is the caller's to decide.
func (s *Store) PreviewByHash(ctx context.Context, hash [32]byte) (PreviewRow, error) {
	p, err := scanPreview(s.db.QueryRowContext(ctx, `SELECT `+previewColumns+` FROM previews p JOIN sessions s ON s.id = p.session_id WHERE p.hash = ?`,
		hex.EncodeToString(hash[:])))
	if errors.Is(err, sql.ErrNoRows) {
		return PreviewRow{}, fmt.Errorf("store: preview: %w", ErrNotFound)
	}
	if err != nil {
		return PreviewRow{}, fmt.Errorf("store: get preview: %w", err)
	}
	return p, nil
}

// ListPreviews returns a session's previews live at now, oldest first.
func (s *Store) ListPreviews(ctx context.Context, sessionID string, now time.Time) ([]PreviewRow, error) {
	return list(ctx, s.db, "previews of "+sessionID, scanPreview,
		`SELECT `+previewColumns+` FROM previews p JOIN sessions s ON s.id = p.session_id
		 WHERE p.session_id = ? AND p.expires_at > ? ORDER BY p.created_at, p.rowid`,
		sessionID, formatTime(now))
}

// DeletePreview removes one preview of a session and returns it (expired
// or not), or ErrNotFound.
func (s *Store) DeletePreview(ctx context.Context, sessionID, id string) (PreviewRow, error) {
	var p PreviewRow
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		var err error
		p, err = scanPreview(tx.QueryRowContext(ctx, `SELECT `+previewColumns+` FROM previews p JOIN sessions s ON s.id = p.session_id WHERE p.id = ? AND p.session_id = ?`, id, sessionID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: preview %s/%s: %w", sessionID, id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: delete preview %s/%s: %w", sessionID, id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM previews WHERE id = ?`, id); err != nil {
			return fmt.Errorf("store: delete preview %s/%s: %w", sessionID, id, err)
		}
		return nil
	})
	return p, err
}

// DeleteSessionPreviews removes every preview of a session and returns
// them, expired ones included.
func (s *Store) DeleteSessionPreviews(ctx context.Context, sessionID string) ([]PreviewRow, error) {
	var out []PreviewRow
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+previewColumns+` FROM previews p JOIN sessions s ON s.id = p.session_id
			WHERE p.session_id = ? ORDER BY p.created_at, p.rowid`, sessionID)
		if err != nil {
			return fmt.Errorf("store: delete previews of %s: %w", sessionID, err)
		}
		for rows.Next() {
			p, err := scanPreview(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("store: delete previews of %s: %w", sessionID, err)
			}
			out = append(out, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("store: delete previews of %s: %w", sessionID, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM previews WHERE session_id = ?`, sessionID); err != nil {
			return fmt.Errorf("store: delete previews of %s: %w", sessionID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
