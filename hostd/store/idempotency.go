package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// IdempotencyTTL is how long an idempotency key is remembered.
const IdempotencyTTL = 24 * time.Hour

// Idempotency is one remembered Idempotency-Key. A key is reserved
// (PutIdempotency, Done false) when its request starts, completed with the
// response to replay (CompleteIdempotency) when it succeeds, and released
// (DeleteIdempotency) when it fails, so the key can be used again.
//
// Scope says whose key it is (for example a session id, or "tenant:<t>" for
// session create), so two callers' keys never collide. RequestHash is the
// caller's digest of the request body: a retry with a different hash is a
// different request. Response is opaque to the store.
type Idempotency struct {
	Scope       string
	Key         string
	RequestHash string
	Done        bool
	Response    []byte
	CreatedAt   time.Time
}

// GetIdempotency returns a live key, or ErrNotFound if it is unknown or
// older than IdempotencyTTL.
func (s *Store) GetIdempotency(ctx context.Context, scope, key string) (Idempotency, error) {
	var (
		r       Idempotency
		done    bool
		created string
	)
	err := s.db.QueryRowContext(ctx,
		`SELECT scope, key, request_hash, done, response, created_at FROM idempotency
		 WHERE scope = ? AND key = ? AND created_at > ?`,
		scope, key, formatTime(s.now().Add(-IdempotencyTTL))).
		Scan(&r.Scope, &r.Key, &r.RequestHash, &done, &r.Response, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Idempotency{}, fmt.Errorf("store: idempotency key %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return Idempotency{}, fmt.Errorf("store: get idempotency key %q: %w", key, err)
	}
	r.Done = done
	if r.CreatedAt, err = parseTime(created); err != nil {
		return Idempotency{}, err
	}
	return r, nil
}

// PutIdempotency reserves a key (or stores a completed one when rec.Done).
// ErrConflict if a live record with that scope and key exists: the caller
// then reads it with GetIdempotency to replay, refuse a different body, or
// say the first request is still running. An expired record is replaced.
// A zero CreatedAt means now.
func (s *Store) PutIdempotency(ctx context.Context, rec Idempotency) error {
	if err := errors.Join(checkKey("idempotency scope", rec.Scope), checkKey("idempotency key", rec.Key)); err != nil {
		return fmt.Errorf("store: put idempotency key: %w", err)
	}
	if len(rec.Response) > MaxRecordBytes {
		return fmt.Errorf("store: idempotency response is %d bytes, the limit is %d (1 MiB): %w", len(rec.Response), MaxRecordBytes, ErrTooLarge)
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = s.now()
	}
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE scope = ? AND key = ? AND created_at <= ?`,
			rec.Scope, rec.Key, formatTime(s.now().Add(-IdempotencyTTL))); err != nil {
			return fmt.Errorf("store: put idempotency key %q: %w", rec.Key, err)
		}
		_, err := tx.ExecContext(ctx,
			`INSERT INTO idempotency (scope, key, request_hash, done, response, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			rec.Scope, rec.Key, rec.RequestHash, rec.Done, nullBytes(rec.Response), formatTime(rec.CreatedAt))
		if isUniqueViolation(err) {
			return fmt.Errorf("store: idempotency key %q: %w", rec.Key, ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("store: put idempotency key %q: %w", rec.Key, err)
		}
		return nil
	})
}

// CompleteIdempotency stores the response of a reserved key and marks it
// done. ErrNotFound if the key is not reserved.
func (s *Store) CompleteIdempotency(ctx context.Context, scope, key string, response []byte) error {
	if len(response) > MaxRecordBytes {
		return fmt.Errorf("store: idempotency response is %d bytes, the limit is %d (1 MiB): %w", len(response), MaxRecordBytes, ErrTooLarge)
	}
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE idempotency SET done = 1, response = ? WHERE scope = ? AND key = ?`,
			nullBytes(response), scope, key)
		if err != nil {
			return fmt.Errorf("store: complete idempotency key %q: %w", key, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("store: idempotency key %q: %w", key, errors.Join(err, ErrNotFound))
		}
		return nil
	})
}

// DeleteIdempotency forgets a key (a request that failed releases its
// reservation). Forgetting an unknown key is not an error.
func (s *Store) DeleteIdempotency(ctx context.Context, scope, key string) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE scope = ? AND key = ?`, scope, key); err != nil {
			return fmt.Errorf("store: delete idempotency key %q: %w", key, err)
		}
		return nil
	})
}

// CleanupIdempotency deletes every key older than IdempotencyTTL and says
// how many went.
func (s *Store) CleanupIdempotency(ctx context.Context) (int64, error) {
	var n int64
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE created_at <= ?`, formatTime(s.now().Add(-IdempotencyTTL)))
		if err != nil {
			return fmt.Errorf("store: clean up idempotency keys: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// nullBytes stores a nil slice as NULL and anything else (even empty) as a
// blob, so an empty response reads back as empty, not nil.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}
