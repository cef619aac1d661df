package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// EgressLogRow is one row of the egress log: a sandbox's network
// decision (Summary false, Count 1), or the number of decisions like it
// that a window folded into one row (Summary true: "Count more like
// this", from Time to LastTime). The log lives outside the hash-chained
// ledger so retention can prune it.
type EgressLogRow struct {
	ID       int64 // assigned by AppendEgressLog, increasing
	Session  string
	Time     time.Time
	LastTime time.Time
	Kind     string // egress.allow, egress.deny, dns.deny
	Host     string
	Reason   string
	Count    int64
	Summary  bool
	Data     json.RawMessage // the decision (or the summary's samples) as JSON
}

// MaxEgressLogList is the most rows ListEgressLog returns at once.
const MaxEgressLogList = 10000

// AppendEgressLog inserts rows in one transaction.
func (s *Store) AppendEgressLog(ctx context.Context, rows []EgressLogRow) error {
	for _, r := range rows {
		if r.Session == "" || r.Kind == "" || r.Count < 1 {
			return fmt.Errorf("store: egress log row needs a session, a kind and a count ≥ 1: %w", ErrInvalid)
		}
		if err := checkJSON("egress log data", r.Data); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		for _, r := range rows {
			last := r.LastTime
			if last.IsZero() {
				last = r.Time
			}
			summary := 0
			if r.Summary {
				summary = 1
			}
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO egress_log (session, time, last_time, kind, host, reason, count, summary, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				r.Session, formatTime(r.Time), formatTime(last), r.Kind, r.Host, r.Reason, r.Count, summary, string(r.Data)); err != nil {
				return fmt.Errorf("store: append to the egress log of %s: %w", r.Session, err)
			}
		}
		return nil
	})
}

// ListEgressLog returns up to limit rows of session with an ID over
// afterID, oldest first. A limit ≤ 0 or over MaxEgressLogList means
// MaxEgressLogList.
func (s *Store) ListEgressLog(ctx context.Context, session string, afterID int64, limit int) ([]EgressLogRow, error) {
	if limit <= 0 || limit > MaxEgressLogList {
		limit = MaxEgressLogList
	}
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, session, time, last_time, kind, host, reason, count, summary, data FROM egress_log
		 WHERE session = ? AND id > ? ORDER BY id LIMIT ?`, session, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: egress log of %s: %w", session, err)
	}
	defer rows.Close()
	var out []EgressLogRow
	for rows.Next() {
		var (
			r           EgressLogRow
			first, last string
			summary     int
			data        string
		)
		if err := rows.Scan(&r.ID, &r.Session, &first, &last, &r.Kind, &r.Host, &r.Reason, &r.Count, &summary, &data); err != nil {
			return nil, fmt.Errorf("store: egress log of %s: %w", session, err)
		}
		if r.Time, err = parseTime(first); err != nil {
			return nil, err
		}
		if r.LastTime, err = parseTime(last); err != nil {
			return nil, err
		}
		r.Summary, r.Data = summary == 1, json.RawMessage(data)
		out = append(out, r)
	}
	return out, rows.Err()
}

// PruneEgressLog removes every row whose last decision is before t and
// returns how many went.
func (s *Store) PruneEgressLog(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM egress_log WHERE last_time < ?`, formatTime(before))
		if err != nil {
			return fmt.Errorf("store: prune the egress log: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}

// EgressLogPrunedKind is the kind of the one row per session that counts
// what TrimEgressLog removed (Count: rows removed so far).
const EgressLogPrunedKind = "egress.pruned"

// egressRowOverhead is what a row costs past its text columns (id,
// times, count, flags, index entries), as TrimEgressLog counts it.
const egressRowOverhead = 96

// Size is what the row costs against a session's byte budget.
func (r EgressLogRow) Size() int64 {
	return int64(len(r.Kind)+len(r.Host)+len(r.Reason)+len(r.Data)) + egressRowOverhead
}

// EgressLogBytes returns what session's egress log rows cost, as Size
// counts it.
func (s *Store) EgressLogBytes(ctx context.Context, session string) (int64, error) {
	var n sql.NullInt64
	err := s.db.QueryRowContext(ctx,
		`SELECT SUM(length(CAST(kind AS BLOB)) + length(CAST(host AS BLOB)) + length(CAST(reason AS BLOB)) + length(CAST(data AS BLOB)) + ?)
		 FROM egress_log WHERE session = ?`, egressRowOverhead, session).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: size of the egress log of %s: %w", session, err)
	}
	return n.Int64, nil
}

// TrimEgressLog removes session's oldest egress log rows until what is
// left costs at most keep bytes, and keeps the count of rows removed (all
// trims together) in one row of kind EgressLogPrunedKind, written anew
// after the rows kept. It returns the rows removed now and what the log
// costs after.
func (s *Store) TrimEgressLog(ctx context.Context, session string, keep int64, now time.Time) (removed, size int64, err error) {
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		var prevRows, prevDecisions int64
		var prevData string
		err := tx.QueryRowContext(ctx, `SELECT count, data FROM egress_log WHERE session = ? AND kind = ?`,
			session, EgressLogPrunedKind).Scan(&prevRows, &prevData)
		if err != nil && err != sql.ErrNoRows {
			return fmt.Errorf("store: trim the egress log of %s: %w", session, err)
		}
		if err == nil {
			var d struct {
				Decisions int64 `json:"decisions_pruned"`
			}
			_ = json.Unmarshal([]byte(prevData), &d)
			prevDecisions = d.Decisions
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM egress_log WHERE session = ? AND kind = ?`, session, EgressLogPrunedKind); err != nil {
			return fmt.Errorf("store: trim the egress log of %s: %w", session, err)
		}
		rows, err := tx.QueryContext(ctx,
			`SELECT id, count, length(CAST(kind AS BLOB)) + length(CAST(host AS BLOB)) + length(CAST(reason AS BLOB)) + length(CAST(data AS BLOB)) + ?
			 FROM egress_log WHERE session = ? ORDER BY id DESC`, egressRowOverhead, session)
		if err != nil {
			return fmt.Errorf("store: trim the egress log of %s: %w", session, err)
		}
		// Newest first: keep rows while they fit (less the marker's own
		// cost), the first that does not fit and all older go.
		const marker = 512
		var cut, decisions int64
		cutting := false
		for rows.Next() {
			var id, count, n int64
			if err := rows.Scan(&id, &count, &n); err != nil {
				rows.Close()
				return fmt.Errorf("store: trim the egress log of %s: %w", session, err)
			}
			if !cutting && size+n+marker <= keep {
				size += n
				continue
			}
			if !cutting {
				cutting, cut = true, id
			}
			removed++
			decisions += count
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("store: trim the egress log of %s: %w", session, err)
		}
		if cutting {
			if _, err := tx.ExecContext(ctx, `DELETE FROM egress_log WHERE session = ? AND id <= ?`, session, cut); err != nil {
				return fmt.Errorf("store: trim the egress log of %s: %w", session, err)
			}
		}
		total := prevRows + removed
		if total == 0 {
			return nil
		}
		data, _ := json.Marshal(map[string]any{"rows_pruned": total, "decisions_pruned": prevDecisions + decisions,
			"reason": fmt.Sprintf("the session's egress log is kept under %d bytes; its oldest rows were removed", keep)})
		r := EgressLogRow{Session: session, Kind: EgressLogPrunedKind, Count: total, Summary: true, Data: data}
		size += r.Size()
		_, err = tx.ExecContext(ctx,
			`INSERT INTO egress_log (session, time, last_time, kind, host, reason, count, summary, data) VALUES (?, ?, ?, ?, '', '', ?, 1, ?)`,
			session, formatTime(now), formatTime(now), EgressLogPrunedKind, total, string(data))
		if err != nil {
			return fmt.Errorf("store: trim the egress log of %s: %w", session, err)
		}
		return nil
	})
	return removed, size, err
}
