package ledger

import (
	"context"
	"errors"
	"fmt"
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
// reporting the first broken seq and why. An empty ledger is OK. The error
// is for failing to read, never for a broken chain.
func (l *Ledger) Verify(ctx context.Context, session string) (VerifyResult, error) {
	v := verifier{session: session, res: VerifyResult{OK: true}}
	errStop := errors.New("stop")
	err := l.each(ctx, `WHERE session = ? ORDER BY seq`, []any{session}, func(r row) error {
		e, err := r.entry()
		if err != nil {
			e = r.e // a stored time that does not parse fails the entry, not the call
		}
		if !v.step(e, err) {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	if err != nil {
		return VerifyResult{}, err
	}
	return v.res, nil
}
