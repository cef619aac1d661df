package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/store"
)

// TestEgressLogKeepsCount: decisions reach the ledger off the request
// path; a burst past the queue is not lost silently: every decision is
// either in the ledger or counted in an egress.dropped entry.
func TestEgressLogKeepsCount(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := New(Config{Store: st, Ledger: ledger.New(st)})
	const n = egressQueue * 3
	for i := 0; i < n; i++ {
		m.recordEgress(egress.Event{Sandbox: "ses-burst", Kind: "egress.allow", Host: "a.example", Port: 443})
	}
	m.flushEgressLog()
	m.recordEgress(egress.Event{Sandbox: "ses-burst", Kind: "egress.allow"}) // after the flush: ignored, no panic
	es, err := ledger.New(st).List(context.Background(), "ses-burst", 0, n+10)
	if err != nil {
		t.Fatal(err)
	}
	written, dropped := 0, 0
	for _, e := range es {
		switch e.Kind {
		case "egress.allow":
			written++
		case "egress.dropped":
			var d struct{ Count int }
			json.Unmarshal(e.Data, &d)
			dropped += d.Count
		}
	}
	if written+dropped != n {
		t.Errorf("%d written + %d counted as dropped, want %d", written, dropped, n)
	}
	if written == 0 {
		t.Error("nothing reached the ledger")
	}
	t.Logf("%d written, %d counted as dropped", written, dropped)
}
