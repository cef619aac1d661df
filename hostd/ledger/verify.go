package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"paddock.dev/paddock/hostd/store"
)

// Reason says why a chain is broken.
type Reason string

const (
	// ReasonSeqGap: an entry is missing, or one is out of place (the seq
	// found is not the next one).
	ReasonSeqGap Reason = "seq gap"
	// ReasonPrevMismatch: an entry's Prev is not the Hash of the entry
	// before it (an entry before it was changed and rehashed, or entries
	// were reordered).
	ReasonPrevMismatch Reason = "prev mismatch"
	// ReasonHashMismatch: an entry's fields do not hash to its Hash (the
	// entry was changed).
	ReasonHashMismatch Reason = "hash mismatch"
	// ReasonSessionMismatch: an entry belongs to another session (only
	// possible in a list of entries, such as an export).
	ReasonSessionMismatch Reason = "session mismatch"
	// ReasonTruncated: the chain holds together but ends before the head
	// recorded as entries were appended: the newest entries are gone, or
	// all of them (an emptied ledger).
	ReasonTruncated Reason = "truncated"
	// ReasonHeadMismatch: the chain goes past the recorded head, or ends
	// at its seq with another hash (the newest entries were replaced).
	ReasonHeadMismatch Reason = "head mismatch"
	// ReasonNoHead: the session has entries or a record, but no head was
	// recorded for its ledger, so nothing shows whether its newest entries
	// are all there.
	ReasonNoHead Reason = "no head"
	// ReasonUnknownSession: the database has no session of that id: no
	// record, no recorded head, no entry. There is nothing to verify.
	ReasonUnknownSession Reason = "unknown session"
)

// VerifyResult is the outcome of checking one session's chain.
type VerifyResult struct {
	OK bool `json:"ok"`
	// Entries is how many entries verified, from seq 1, before the break.
	Entries int64 `json:"entries"`
	// Head is the Hash of the last entry that verified ("" for none).
	Head string `json:"head"`
	// BrokenSeq is the seq where the chain breaks: the entry that fails,
	// or, for a gap, the seq that should have come next.
	BrokenSeq int64  `json:"broken_seq,omitempty"`
	Reason    Reason `json:"reason,omitempty"`
	Detail    string `json:"detail,omitempty"`
	// Recorded and RecordedHead are the head recorded with the appends
	// (Verify only): how many entries the ledger should hold and the hash
	// of the last. 0 and "" when none was recorded.
	Recorded     int64  `json:"recorded"`
	RecordedHead string `json:"recorded_head,omitempty"`
}

// verifier checks entries one at a time, in the order given.
type verifier struct {
	session string
	res     VerifyResult
}

// step checks the next entry and reports whether to go on.
func (v *verifier) step(e Entry, timeErr error) bool {
	next := v.res.Entries + 1
	fail := func(seq int64, r Reason, format string, args ...any) bool {
		v.res.OK, v.res.BrokenSeq, v.res.Reason, v.res.Detail = false, seq, r, fmt.Sprintf(format, args...)
		return false
	}
	if v.session == "" {
		v.session = e.Session
	}
	switch {
	case e.Session != v.session:
		return fail(e.Seq, ReasonSessionMismatch, "entry seq %d is of session %q, not %q", e.Seq, e.Session, v.session)
	case e.Seq != next:
		return fail(next, ReasonSeqGap, "expected seq %d, found seq %d", next, e.Seq)
	case e.Prev != v.res.Head:
		return fail(e.Seq, ReasonPrevMismatch, "prev is %q, the hash of seq %d is %q", e.Prev, e.Seq-1, v.res.Head)
	case timeErr != nil:
		return fail(e.Seq, ReasonHashMismatch, "%v", timeErr)
	}
	if got := Hash(e); got != e.Hash {
		return fail(e.Seq, ReasonHashMismatch, "stored hash %q, the fields hash to %q", e.Hash, got)
	}
	v.res.Entries, v.res.Head = next, e.Hash
	return true
}

// VerifyEntries checks a chain given as a list (for example an export read
// back), which must start at seq 1.
func VerifyEntries(entries []Entry) VerifyResult {
	v := verifier{res: VerifyResult{OK: true}}
	for _, e := range entries {
		if !v.step(e, nil) {
			break
		}
	}
	return v.res
}

// Verify recomputes every hash of session's ledger and checks each link,
// reporting the first broken seq and why; then it holds the chain to the
// head recorded with the appends, so a ledger whose newest entries were
// removed (or all of them) is not OK either (ReasonTruncated,
// ReasonHeadMismatch, ReasonNoHead), and neither is a session the database
// does not know (ReasonUnknownSession). The error is for failing to read,
// never for a ledger that does not verify.
func (l *Ledger) Verify(ctx context.Context, session string) (VerifyResult, error) {
	var (
		recSeq   int64
		recHash  string
		haveHead = true
	)
	err := l.st.DB().QueryRowContext(ctx, `SELECT seq, hash FROM ledger_heads WHERE session = ?`, session).Scan(&recSeq, &recHash)
	if errors.Is(err, sql.ErrNoRows) {
		haveHead, err = false, nil
	}
	if err != nil {
		return VerifyResult{}, fmt.Errorf("ledger: read the head of %s: %w", session, err)
	}
	res, err := l.verifyChain(ctx, session)
	if err != nil {
		return VerifyResult{}, err
	}
	res.Recorded, res.RecordedHead = recSeq, recHash
	if !res.OK {
		return res, nil // the chain's own break comes first
	}
	fail := func(seq int64, r Reason, format string, args ...any) (VerifyResult, error) {
		res.OK, res.BrokenSeq, res.Reason, res.Detail = false, seq, r, fmt.Sprintf(format, args...)
		return res, nil
	}
	switch {
	case !haveHead && res.Entries == 0:
		if _, err := l.st.GetSession(ctx, session); errors.Is(err, store.ErrNotFound) {
			return fail(0, ReasonUnknownSession, "the database has no session %s: no record, no ledger entry, no recorded head", session)
		} else if err != nil {
			return VerifyResult{}, err
		}
		return fail(1, ReasonNoHead, "session %s has a record but no ledger entry and no recorded head: its ledger was emptied, head and all", session)
	case !haveHead:
		return fail(res.Entries+1, ReasonNoHead, "%d entries hold together, but no head was recorded for this ledger, so nothing shows whether newer entries were removed", res.Entries)
	case res.Entries == 0:
		return fail(1, ReasonTruncated, "the ledger is empty, but %d entries were recorded (head %s)", recSeq, recHash)
	case res.Entries < recSeq:
		return fail(res.Entries+1, ReasonTruncated, "the chain ends at seq %d, but %d entries were recorded (head %s): seq %d to %d are gone", res.Entries, recSeq, recHash, res.Entries+1, recSeq)
	case res.Entries > recSeq:
		return fail(recSeq+1, ReasonHeadMismatch, "the chain goes on to seq %d, past the %d entries recorded", res.Entries, recSeq)
	case res.Head != recHash:
		return fail(res.Entries, ReasonHeadMismatch, "seq %d hashes to %s, but the recorded head is %s: the newest entries were replaced", res.Entries, res.Head, recHash)
	}
	return res, nil
}

// verifyPage is how many entries verifyChain reads at a time. Each page is
// read into memory and the connection goes back to the pool before any
// hashing, so a long ledger never holds a connection while it is checked.
var verifyPage = 1000

// verifyChain checks the links of session's stored entries, from seq 1,
// one page at a time.
func (l *Ledger) verifyChain(ctx context.Context, session string) (VerifyResult, error) {
	v := verifier{session: session, res: VerifyResult{OK: true}}
	var after int64
	for {
		var page []row
		err := l.each(ctx, `WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?`, []any{session, after, verifyPage}, func(r row) error {
			page = append(page, r)
			return nil
		})
		if err != nil {
			return VerifyResult{}, err
		}
		for _, r := range page {
			e, err := r.entry()
			if err != nil {
				e = r.e // a stored time that does not parse fails the entry, not the call
			}
			if !v.step(e, err) {
				return v.res, nil
			}
			after = e.Seq
		}
		if len(page) < verifyPage {
			return v.res, nil
		}
		if err := ctx.Err(); err != nil {
			return VerifyResult{}, err
		}
	}
}
