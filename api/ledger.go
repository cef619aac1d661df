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
