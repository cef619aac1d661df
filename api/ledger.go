package api

import (
	"encoding/json"
	"time"
)

// LedgerEntry is one ledger entry. Time is UTC.
type LedgerEntry struct {
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Session string          `json:"session"`
	Kind    string          `json:"kind"`
	Actor   string          `json:"actor"`
	Data    json.RawMessage `json:"data"`
	Prev    string          `json:"prev"`
	Hash    string          `json:"hash"`
}

// LedgerVerification is the answer of GET .../ledger/verify: whether the
// session's ledger still holds together (every entry hashes to its hash,
// links to the one before, and the chain reaches the head recorded with
// the appends). It mirrors hostd/ledger.VerifyResult.
type LedgerVerification struct {
	OK bool `json:"ok"`
	// Entries is how many entries verified, from seq 1, before any break.
	Entries int64 `json:"entries"`
	// Head is the hash of the last entry that verified ("" for none).
	Head string `json:"head"`
	// BrokenSeq, Reason and Detail say where and why the chain breaks
	// (absent when OK). Reason is one of hostd/ledger's Reason values,
	// such as "hash mismatch" or "truncated".
	BrokenSeq int64  `json:"broken_seq,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Detail    string `json:"detail,omitempty"`
	// Recorded and RecordedHead are the head recorded with the appends.
	Recorded     int64  `json:"recorded"`
	RecordedHead string `json:"recorded_head,omitempty"`
}
