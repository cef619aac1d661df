// Package ledger is the append-only, hash-chained record of what was done
// through each session: session.create, exec, file.write, checkpoint,
// restore, fork, session.delete and the rest.
//
// Entries live in the ledger table of hostd's state database. The
// dependency goes one way: ledger imports store and uses the Store's write
// transaction (Store.WithTx) and read handle (Store.DB); store owns the
// table's DDL (one schema version for the whole file) and knows nothing of
// hashes. The table has no foreign key to sessions: a ledger outlives the
// session row it describes.
//
// # The chain
//
// Each entry's Seq counts from 1 within its session. Prev is the Hash of the
// entry before it ("" for seq 1), and Hash is the lowercase hex SHA-256 of
// the entry's canonical encoding (see Hash). Append reads the head and
// inserts the next entry in one write transaction, so concurrent appends
// queue and the chain never forks; the primary key (session, seq) would
// refuse a second entry with the same seq even if they did not.
//
// Changing, removing or reordering a stored entry breaks the chain at that
// entry, which Verify reports. The chain alone cannot show the loss of the
// newest entries (truncating the tail leaves a shorter, valid chain), so
// every append also records the session's head (its seq and hash) in the
// ledger_heads table, in the same transaction; Verify compares the chain
// with it, and reports a ledger that ends early, was emptied, has no head,
// or names a session the database does not know. The head lives in the
// same file: someone who can rewrite the file can rewrite both, so keep an
// exported copy or the head hash elsewhere when that matters.
//
// # No secrets
//
// Append refuses data whose JSON has a key that names a secret (see
// CheckNoSecrets), so a caller cannot ledger a token or password by
// accident. Data is at most MaxDataBytes.
package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/store"
)

// MaxDataBytes is the largest Data an entry may carry (as compact JSON).
const MaxDataBytes = 64 << 10

// MaxList is the most entries List returns at once.
const MaxList = 10000

// Ledger appends to and reads the ledgers in a store.
type Ledger struct {
	st  *store.Store
	now func() time.Time
	// readHook, when set (tests in this package only), runs for every row
	// read, so a test can count what a query fetched.
	readHook func()
}

// New returns a Ledger over st. It does no I/O.
func New(st *store.Store) *Ledger {
	return &Ledger{st: st, now: time.Now}
}

// Entry is the public wire type api.LedgerEntry, kept under this name here.
type Entry = apiv1.LedgerEntry

// hashDomain is the first field of every entry's canonical encoding; a new
// encoding gets a new domain.
const hashDomain = "paddock.ledger.v1"

// TimeLayout is how Time enters the hash (and the database): RFC 3339 in
// UTC with exactly nine fractional digits, so it is one string per instant
// and sorts as text.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// Hash computes an entry's hash from its fields (ignoring e.Hash):
//
//	hex(SHA-256(F(domain) F(seq) F(time) F(session) F(kind) F(actor) F(data) F(prev)))
//
// where F(x) is len(x) as an 8-byte big-endian unsigned integer followed by
// the bytes of x; domain is "paddock.ledger.v1"; seq is in decimal ASCII;
// time is Time in UTC formatted with TimeLayout; data is the entry's JSON
// bytes exactly as stored; prev is the previous hash in lowercase hex, or
// empty. The length prefixes make the encoding unambiguous whatever the
// fields contain.
func Hash(e Entry) string {
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		io.WriteString(h, s)
	}
	field(hashDomain)
	field(strconv.FormatInt(e.Seq, 10))
	field(e.Time.UTC().Format(TimeLayout))
	field(e.Session)
	field(e.Kind)
	field(e.Actor)
	field(string(e.Data))
	field(e.Prev)
	return hex.EncodeToString(h.Sum(nil))
}

// Append adds an entry to session's ledger and returns it. data is encoded
// as JSON (a json.RawMessage is used as it is, compacted; nil is null) and
// must have no secret-looking key (ErrSecret) and be at most MaxDataBytes
// (store.ErrTooLarge). Time is now, but never before the previous entry's,
// so a session's entries are in time order even if the clock steps back.
func (l *Ledger) Append(ctx context.Context, session, kind, actor string, data any) (Entry, error) {
	if session == "" || kind == "" {
		return Entry{}, fmt.Errorf("ledger: append: session and kind are required: %w", store.ErrInvalid)
	}
	raw, err := encodeData(data)
	if err != nil {
		return Entry{}, fmt.Errorf("ledger: append %s to %s: %w", kind, session, err)
	}
	if len(raw) > MaxDataBytes {
		return Entry{}, fmt.Errorf("ledger: append %s to %s: data is %d bytes, the limit is %d (64 KiB): %w",
			kind, session, len(raw), MaxDataBytes, store.ErrTooLarge)
	}
	if err := CheckNoSecrets(raw); err != nil {
		return Entry{}, fmt.Errorf("ledger: append %s to %s: %w", kind, session, err)
	}
	e := Entry{Session: session, Kind: kind, Actor: actor, Data: raw}
	err = l.st.WithTx(ctx, func(tx *sql.Tx) error {
		var (
			lastSeq  int64
			lastTime string
		)
		// The recorded head says where the chain goes on: after entries
		// were removed from the tail, the next entry still follows the
		// last one appended, so the gap stays visible. A ledger without
		// a head (none should be left after the migration) goes on from
		// its last row.
		err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM ledger_heads WHERE session = ?`, session).Scan(&lastSeq, &e.Prev)
		if errors.Is(err, sql.ErrNoRows) {
			err = tx.QueryRowContext(ctx, `SELECT seq, hash FROM ledger WHERE session = ? ORDER BY seq DESC LIMIT 1`, session).
				Scan(&lastSeq, &e.Prev)
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ledger: append to %s: read head: %w", session, err)
		}
		err = tx.QueryRowContext(ctx, `SELECT time FROM ledger WHERE session = ? ORDER BY seq DESC LIMIT 1`, session).Scan(&lastTime)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ledger: append to %s: read head: %w", session, err)
		}
		e.Seq = lastSeq + 1
		e.Time = l.now().UTC().Round(0)
		if lastTime != "" {
			if prevTime, err := time.Parse(time.RFC3339Nano, lastTime); err == nil && e.Time.Before(prevTime) {
				e.Time = prevTime.UTC()
			}
		}
		e.Hash = Hash(e)
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO ledger (session, seq, time, kind, actor, data, prev, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			e.Session, e.Seq, e.Time.Format(TimeLayout), e.Kind, e.Actor, string(e.Data), e.Prev, e.Hash); err != nil {
			return fmt.Errorf("ledger: append to %s: %w", session, err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO ledger_heads (session, seq, hash) VALUES (?, ?, ?)
			 ON CONFLICT (session) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`,
			e.Session, e.Seq, e.Hash); err != nil {
			return fmt.Errorf("ledger: append to %s: record the head: %w", session, err)
		}
		return nil
	})
	if err != nil {
		return Entry{}, err
	}
	return e, nil
}

// List returns up to limit entries of session with Seq > afterSeq, in seq
// order. A limit <= 0 or over MaxList means MaxList.
func (l *Ledger) List(ctx context.Context, session string, afterSeq int64, limit int) ([]Entry, error) {
	if limit <= 0 || limit > MaxList {
		limit = MaxList
	}
	return l.query(ctx, `WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?`, session, afterSeq, limit)
}

// Tail returns the newest n entries of session (MaxList when n <= 0 or
// over it), in seq order.
func (l *Ledger) Tail(ctx context.Context, session string, n int) ([]Entry, error) {
	if n <= 0 || n > MaxList {
		n = MaxList
	}
	out, err := l.query(ctx, `WHERE session = ? ORDER BY seq DESC LIMIT ?`, session, n)
	slices.Reverse(out)
	return out, err
}

// Since returns the first limit entries of session whose Time is after t
// (MaxList when limit <= 0 or over it), in seq order, and whether more
// follow. The limit is in the query (one row past it tells of more), so a
// long ledger is never read whole for a page.
func (l *Ledger) Since(ctx context.Context, session string, t time.Time, limit int) ([]Entry, bool, error) {
	if limit <= 0 || limit > MaxList {
		limit = MaxList
	}
	out, err := l.query(ctx, `WHERE session = ? AND time > ? ORDER BY seq LIMIT ?`, session, t.UTC().Format(TimeLayout), limit+1)
	if err != nil {
		return nil, false, err
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

func (l *Ledger) query(ctx context.Context, where string, args ...any) ([]Entry, error) {
	var out []Entry
	err := l.each(ctx, where, args, func(r row) error {
		e, err := r.entry()
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// ExportJSONL writes session's ledger to w as JSON Lines, one Entry per
// line in seq order. The lines verify with VerifyEntries once decoded.
func (l *Ledger) ExportJSONL(ctx context.Context, session string, w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // Data must go out byte for byte, or its hash breaks
	return l.each(ctx, `WHERE session = ? ORDER BY seq`, []any{session}, func(r row) error {
		e, err := r.entry()
		if err != nil {
			return err
		}
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("ledger: export %s seq %d: %w", session, e.Seq, err)
		}
		return nil
	})
}

// row is a ledger row as stored, before its time is parsed.
type row struct {
	e    Entry
	time string
}

func (r row) entry() (Entry, error) {
	t, err := time.Parse(time.RFC3339Nano, r.time)
	if err != nil {
		return Entry{}, fmt.Errorf("ledger: %s seq %d: bad stored time %q", r.e.Session, r.e.Seq, r.time)
	}
	e := r.e
	e.Time = t.UTC()
	return e, nil
}

// each streams the ledger rows matching where to fn.
func (l *Ledger) each(ctx context.Context, where string, args []any, fn func(row) error) error {
	rows, err := l.st.DB().QueryContext(ctx,
		`SELECT session, seq, time, kind, actor, data, prev, hash FROM ledger `+where, args...)
	if err != nil {
		return fmt.Errorf("ledger: read: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r    row
			data string
		)
		if err := rows.Scan(&r.e.Session, &r.e.Seq, &r.time, &r.e.Kind, &r.e.Actor, &data, &r.e.Prev, &r.e.Hash); err != nil {
			return fmt.Errorf("ledger: read: %w", err)
		}
		r.e.Data = json.RawMessage(data)
		if l.readHook != nil {
			l.readHook()
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: read: %w", err)
	}
	return nil
}

// encodeData turns Append's data argument into compact JSON.
func encodeData(data any) (json.RawMessage, error) {
	var b []byte
	switch d := data.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case json.RawMessage:
		if d == nil {
			return json.RawMessage("null"), nil
		}
		b = d
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(data); err != nil {
			return nil, fmt.Errorf("data is not JSON-encodable: %w", err)
		}
		b = buf.Bytes()
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, fmt.Errorf("data is not valid JSON (%v): %w", err, store.ErrInvalid)
	}
	return out.Bytes(), nil
}
