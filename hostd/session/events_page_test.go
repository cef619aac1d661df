package session_test

import (
	"context"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
)

// TestEventsSinceIsOnePage: events?since= with more entries than the page
// answers exactly the page and says more follow; LedgerSeqBefore finds
// the seq before the first newer entry, or the newest seq when none is.
func TestEventsSinceIsOnePage(t *testing.T) {
	m := sessiontest.New(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	s, err := m.Create(ctx, "", session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := m.EventsPage(ctx, "", s.ID, session.EventsQuery{Since: before})
	if err != nil || all.LedgerMore || len(all.Ledger) < 5 {
		t.Fatalf("every entry: %d entries, more %v, %v", len(all.Ledger), all.LedgerMore, err)
	}
	page, err := m.EventsPage(ctx, "", s.ID, session.EventsQuery{Since: before, Limit: 3})
	if err != nil || len(page.Ledger) != 3 || !page.LedgerMore || page.Ledger[0].Seq != all.Ledger[0].Seq {
		t.Errorf("a page of 3: %d entries, more %v, %v", len(page.Ledger), page.LedgerMore, err)
	}
	last, err := m.EventsPage(ctx, "", s.ID, session.EventsQuery{Since: before, Limit: len(all.Ledger)})
	if err != nil || len(last.Ledger) != len(all.Ledger) || last.LedgerMore {
		t.Errorf("a page that holds them all: %d entries, more %v, %v", len(last.Ledger), last.LedgerMore, err)
	}
	if seq, err := m.LedgerSeqBefore(ctx, "", s.ID, before); err != nil || seq != all.Ledger[0].Seq-1 {
		t.Errorf("LedgerSeqBefore(before all): %d, %v", seq, err)
	}
	newest := all.Ledger[len(all.Ledger)-1].Seq
	if seq, err := m.LedgerSeqBefore(ctx, "", s.ID, time.Now().Add(time.Hour)); err != nil || seq != newest {
		t.Errorf("LedgerSeqBefore(after all): %d, %v, want the newest seq %d", seq, err, newest)
	}
}
