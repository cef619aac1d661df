package ledger

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/store"
)

// TestVerifyHoldsTheChainToItsHead: what the chain alone cannot show,
// the head recorded with every append does. A tail cut off, a ledger
// emptied, a head removed, a tail replaced by a forged but well-linked
// entry, and a session nobody knows are each reported, with the seq and a
// detail saying what is missing; entries appended after a cut follow the
// recorded head, so the gap stays. A whole ledger is OK and says how many
// entries were recorded.
func TestVerifyHoldsTheChainToItsHead(t *testing.T) {
	ctx := context.Background()
	st, l := openTest(t)
	l.now = fakeClock(t0)
	db := st.DB()
	if _, err := db.Exec(`DROP TRIGGER ledger_no_delete; DROP TRIGGER ledger_no_update; DROP TRIGGER ledger_heads_no_delete`); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		record  bool // the session has a row in sessions
		tamper  func(s string, entries []Entry)
		ok      bool
		reason  Reason
		seq     int64
		entries int64
		detail  string
	}{
		{"whole", false, func(string, []Entry) {}, true, "", 0, 10, ""},
		{"tail cut", false, func(s string, _ []Entry) { exec(`DELETE FROM ledger WHERE session = ? AND seq > 7`, s) },
			false, ReasonTruncated, 8, 7, "seq 8 to 10 are gone"},
		{"last entry cut", false, func(s string, _ []Entry) { exec(`DELETE FROM ledger WHERE session = ? AND seq = 10`, s) },
			false, ReasonTruncated, 10, 9, "seq 10 to 10 are gone"},
		{"emptied", true, func(s string, _ []Entry) { exec(`DELETE FROM ledger WHERE session = ?`, s) },
			false, ReasonTruncated, 1, 0, "the ledger is empty, but 10 entries were recorded"},
		{"emptied, head and all", true, func(s string, _ []Entry) {
			exec(`DELETE FROM ledger WHERE session = ?`, s)
			exec(`DELETE FROM ledger_heads WHERE session = ?`, s)
		}, false, ReasonNoHead, 1, 0, "has a record but no ledger entry and no recorded head"},
		{"head removed", false, func(s string, _ []Entry) { exec(`DELETE FROM ledger_heads WHERE session = ?`, s) },
			false, ReasonNoHead, 11, 10, "no head was recorded"},
		{"tail replaced", false, func(s string, entries []Entry) {
			e := entries[9]
			e.Data = json.RawMessage(`{"command":"innocent","exit_code":0}`)
			e.Hash = Hash(e)
			exec(`UPDATE ledger SET data = ?, hash = ? WHERE session = ? AND seq = 10`, string(e.Data), e.Hash, s)
		}, false, ReasonHeadMismatch, 10, 10, "the newest entries were replaced"},
		{"tail cut, then appended to", false, func(s string, _ []Entry) {
			exec(`DELETE FROM ledger WHERE session = ? AND seq > 7`, s)
			if _, err := l.Append(ctx, s, "exec", "admin", map[string]any{"command": "after"}); err != nil {
				t.Fatal(err)
			}
		}, false, ReasonSeqGap, 8, 7, "expected seq 8, found seq 11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := "s-" + strings.ReplaceAll(tc.name, " ", "-")
			if tc.record {
				if err := st.CreateSession(ctx, store.SessionRow{ID: s, State: "running", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Record: json.RawMessage(`{}`)}); err != nil {
					t.Fatal(err)
				}
			}
			entries := appendN(t, l, s, 10)
			tc.tamper(s, entries)
			res, err := l.Verify(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != tc.ok || res.Reason != tc.reason || res.BrokenSeq != tc.seq || res.Entries != tc.entries || !strings.Contains(res.Detail, tc.detail) {
				t.Errorf("%+v, want ok %v, reason %q at seq %d after %d entries, detail with %q", res, tc.ok, tc.reason, tc.seq, tc.entries, tc.detail)
			}
		})
	}
	res, err := l.Verify(ctx, "ses-nobody")
	if err != nil || res.OK || res.Reason != ReasonUnknownSession || !strings.Contains(res.Detail, "no session ses-nobody") {
		t.Errorf("a session nobody knows: %+v %v", res, err)
	}
}

// TestHeadsOnlyMoveForward: through SQLite's normal paths a recorded head
// can neither go back nor be removed, and a head cannot be moved to another
// session.
func TestHeadsOnlyMoveForward(t *testing.T) {
	st, l := openTest(t)
	appendN(t, l, "s", 3)
	for _, q := range []string{
		`UPDATE ledger_heads SET seq = 2 WHERE session = 's'`,
		`UPDATE ledger_heads SET seq = 5 WHERE session = 's'`,
		`UPDATE ledger_heads SET session = 't' WHERE session = 's'`,
		`DELETE FROM ledger_heads WHERE session = 's'`,
	} {
		if _, err := st.DB().Exec(q); err == nil || !strings.Contains(err.Error(), "only moves forward") {
			t.Errorf("%s: %v, want refused", q, err)
		}
	}
	if res, err := l.Verify(context.Background(), "s"); err != nil || !res.OK || res.Recorded != 3 {
		t.Errorf("after the refused changes: %+v %v", res, err)
	}
}

// TestHeadsMigration: a database from before heads were recorded gets
// each ledger's head as it stands when it is opened, and goes on from it.
func TestHeadsMigration(t *testing.T) {
	ctx := context.Background()
	st, l := openTest(t)
	appendN(t, l, "a", 4)
	appendN(t, l, "b", 2)
	path := ""
	if err := st.DB().QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	// Back to schema 8: no heads table, and none of the later
	// migrations' tables either (they run again, in order, after 9).
	if _, err := st.DB().Exec(`DROP TABLE ledger_heads; DROP TABLE vm_events; DROP TABLE changesets; DROP TABLE rewind_rings; DROP TABLE rewind_points; DELETE FROM schema_migrations WHERE version >= 9`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st2, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	l2 := New(st2)
	for s, n := range map[string]int64{"a": 4, "b": 2} {
		if res, err := l2.Verify(ctx, s); err != nil || !res.OK || res.Recorded != n || res.RecordedHead != res.Head {
			t.Errorf("%s after the migration: %+v %v", s, res, err)
		}
	}
	appendN(t, l2, "a", 1)
	if res, err := l2.Verify(ctx, "a"); err != nil || !res.OK || res.Recorded != 5 {
		t.Errorf("a after one more entry: %+v %v", res, err)
	}
}
