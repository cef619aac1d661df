// Package store keeps hostd's state in one SQLite database file: sessions
// (with a revision for compare-and-set), checkpoints, job and upload
// metadata, idempotency keys, and the table the ledger package appends to.
//
// The database runs in WAL mode with a busy timeout, foreign keys on and
// synchronous=FULL. Its schema is a list of numbered migrations (schema.go)
// applied in one transaction at Open.
//
// # Why a crash never leaves half a record
//
// Every write goes through one transaction (Store.WithTx). In WAL mode
// SQLite appends the changed pages to the -wal file and only a commit frame
// (written last, and fsynced before Commit returns under synchronous=FULL)
// makes them part of the database. Readers and the recovery that runs when
// the database is next opened ignore every frame after the last commit
// frame, so a process killed mid-transaction, even one whose pages already
// spilled to the -wal file, leaves the database exactly as the last commit
// left it. A record is one row written by one statement inside that
// transaction, so it is either all old or all new.
//
// Writes are serialised in the process by a one-slot semaphore (so writers
// queue instead of spinning in SQLite's busy handler) and across processes
// by BEGIN IMMEDIATE, which takes the write lock before the first read of a
// read-modify-write, so a compare-and-set never works from a stale read.
// Reads run outside transactions on other pooled connections and never wait
// for a writer.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
	"paddock.dev/paddock/errdefs"
)

// Sentinel errors, wrapped with %w; test with errors.Is. Each is of an
// errdefs kind, so one that reaches the API unchanged still answers with
// the right status (the session package words most of them first).
var (
	// ErrNotFound: no row with that key (or, for idempotency keys, expired).
	ErrNotFound = errdefs.New(errdefs.ErrNotFound, "not found")
	// ErrConflict: a row with that key exists already.
	ErrConflict = errdefs.New(errdefs.ErrConflict, "already exists")
	// ErrRevision: UpdateSession expected a revision the session no longer has.
	ErrRevision = errdefs.New(errdefs.ErrRevision, "revision mismatch")
	// ErrTooLarge: a record is over MaxRecordBytes (the ledger uses it for
	// its own, smaller limit too). The daemon builds its records, so one
	// too large is the daemon's failure (500), not the caller's.
	ErrTooLarge = errdefs.New(errdefs.ErrInternal, "too large")
	// ErrInvalid: an empty key, invalid JSON or a forbidden change: the
	// daemon's own failure too (500).
	ErrInvalid = errdefs.New(errdefs.ErrInternal, "invalid")
)

// MaxRecordBytes is the largest JSON record (session record, checkpoint
// snapshot, job or upload record, idempotency response) the store accepts.
const MaxRecordBytes = 1 << 20

// BusyTimeout is how long a connection waits for another process's write
// lock before it gives up with SQLITE_BUSY.
const BusyTimeout = 10 * time.Second

// Store is the state database. It is safe for concurrent use.
type Store struct {
	db  *sql.DB
	wmu chan struct{} // one slot: the in-process writer
	now func() time.Time
}

// FileMode is the mode of the database file and of its -wal and -shm
// files: they hold every session's record, the ledger and the hashes of
// tokens, which are the daemon's alone whatever directory they live in.
const FileMode os.FileMode = 0o600

// privateFiles makes the database file before SQLite does, with FileMode
// (SQLite would make it 0644 less the umask; the -wal and -shm files it
// makes later take the database file's mode), and takes group and other
// rights off the files a database made before this existed has.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		if fi.Mode().Perm()&^FileMode != 0 {
			if err := os.Chmod(p, FileMode); err != nil {
				return err
			}
		}
	}
	return nil
}

// Open opens (creating if needed) the database at path and applies any
// migrations it does not have yet. The database's files are FileMode. It refuses a database written by a newer
// Paddock (one with migrations this binary does not know).
func Open(path string) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("store: open %q: want a plain file path without '?' or '#': %w", path, ErrInvalid)
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	dsn := path + "?" + strings.Join([]string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", BusyTimeout.Milliseconds()),
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous(FULL)",
		"_pragma=foreign_keys(1)",
		"_txlock=immediate",
	}, "&")
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	s := &Store{db: db, wmu: make(chan struct{}, 1), now: time.Now}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		db.Close()
		return nil, fmt.Errorf("store: open %s: journal mode is %q, not wal (is the file system shared or read-only?)", path, mode)
	}
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return s, nil
}

// Close closes the database. Calls after the first return nil.
func (s *Store) Close() error {
	return s.db.Close()
}

// DB is the database handle, for reads by packages that keep their own
// tables in this database (the ledger). Writes go through WithTx.
func (s *Store) DB() *sql.DB { return s.db }

// WithTx runs fn in one write transaction (BEGIN IMMEDIATE, serialised with
// every other writer of this Store) and commits if fn returns nil. Any error
// from fn rolls the whole transaction back and is returned as it is.
func (s *Store) WithTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	select {
	case s.wmu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.wmu }()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// timeLayout is RFC 3339 with a fixed nine-digit fraction, always in UTC,
// so that stored times sort as text in time order.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: bad stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

// checkJSON validates a JSON record against the size limit and syntax.
func checkJSON(what string, b []byte) error {
	if len(b) > MaxRecordBytes {
		return fmt.Errorf("%s is %d bytes, the limit is %d (1 MiB): %w", what, len(b), MaxRecordBytes, ErrTooLarge)
	}
	if len(b) == 0 || !json.Valid(b) {
		return fmt.Errorf("%s is not valid JSON: %w", what, ErrInvalid)
	}
	return nil
}

func checkKey(what, v string) error {
	if v == "" {
		return fmt.Errorf("%s is empty: %w", what, ErrInvalid)
	}
	return nil
}

// constraintCode returns the extended SQLite result code when err is a
// constraint violation, and 0 otherwise.
func constraintCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		return se.Code()
	}
	return 0
}

func isUniqueViolation(err error) bool {
	c := constraintCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || c == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}

func isForeignKeyViolation(err error) bool {
	return constraintCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}
