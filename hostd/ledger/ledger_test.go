package ledger

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/hostd/store"
)

func openTest(t *testing.T) (*store.Store, *Ledger) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, New(st)
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeClock advances a millisecond per reading.
func fakeClock(start time.Time) func() time.Time {
	var mu sync.Mutex
	now := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
}

// appendN appends n exec entries to session.
func appendN(t *testing.T, l *Ledger, session string, n int) []Entry {
	t.Helper()
	var out []Entry
	for i := range n {
		e, err := l.Append(context.Background(), session, "exec", "admin", map[string]any{"command": fmt.Sprint("echo ", i), "exit_code": 0})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestHashMatchesTheDocumentedEncoding(t *testing.T) {
	e := Entry{
		Seq: 7, Time: time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600)),
		Session: "s-1", Kind: "exec", Actor: "admin", Data: json.RawMessage(`{"command":"ls"}`), Prev: strings.Repeat("ab", 32),
	}
	var buf bytes.Buffer
	for _, f := range []string{"paddock.ledger.v1", "7", "2025-01-02T02:04:05.000000006Z", "s-1", "exec", "admin", `{"command":"ls"}`, strings.Repeat("ab", 32)} {
		binary.Write(&buf, binary.BigEndian, uint64(len(f)))
		buf.WriteString(f)
	}
	sum := sha256.Sum256(buf.Bytes())
	if got, want := Hash(e), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Hash = %s, the documented encoding gives %s", got, want)
	}
	// Pinned: changing the encoding breaks every stored ledger.
	if got, want := Hash(e), "cd0a9eebe3378ba20e15939d7d4bcc90c800b79fa2af7f2ad4bc1d37734699ea"; got != want {
		t.Errorf("pinned hash changed to %s (was %s): a new encoding needs a new domain", got, want)
	}
	// Moving bytes from one field to the next changes the hash.
	e2 := e
	e2.Kind, e2.Actor = "exe", "cadmin"
	if Hash(e) == Hash(e2) {
		t.Error("fields are not separated in the encoding")
	}
}

func TestChainOf100Verifies(t *testing.T) {
	ctx := context.Background()
	_, l := openTest(t)
	l.now = fakeClock(t0)
	entries := appendN(t, l, "s", 100)
	appendN(t, l, "other", 3) // another session's chain is its own

	prev := ""
	for i, e := range entries {
		if e.Seq != int64(i+1) || e.Prev != prev || e.Hash != Hash(e) || e.Session != "s" {
			t.Fatalf("entry %d: %+v", i, e)
		}
		prev = e.Hash
	}
	res, err := l.Verify(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(VerifyResult{OK: true, Entries: 100, Head: entries[99].Hash, Recorded: 100, RecordedHead: entries[99].Hash}, res); diff != "" {
		t.Errorf("Verify (-want +got):\n%s", diff)
	}
	if res, _ := l.Verify(ctx, "empty"); res.OK || res.Reason != ReasonUnknownSession {
		t.Errorf("Verify of a session the database does not know: %+v, want %s", res, ReasonUnknownSession)
	}

	all, err := l.List(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(entries, all); diff != "" {
		t.Errorf("List returns what Append returned (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		after      int64
		limit      int
		first, len int64
	}{
		{0, 10, 1, 10},
		{40, 10, 41, 10},
		{95, 10, 96, 5},
		{100, 10, 0, 0},
	} {
		got, err := l.List(ctx, "s", tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != tc.len || (len(got) > 0 && got[0].Seq != tc.first) {
			t.Errorf("List(after %d, limit %d): %d entries from %v", tc.after, tc.limit, len(got), got)
		}
	}
}

func TestTamperingIsDetected(t *testing.T) {
	ctx := context.Background()
	st, l := openTest(t)
	l.now = fakeClock(t0)
	db := st.DB()
	// Someone with the file can drop the append-only triggers; the chain
	// is what catches them.
	if _, err := db.Exec(`DROP TRIGGER ledger_no_update; DROP TRIGGER ledger_no_delete`); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, l, "untouched", 5)
	tests := []struct {
		name   string
		tamper func(session string, entries []Entry)
		seq    int64
		reason Reason
	}{
		{"change data", func(s string, _ []Entry) {
			exec(`UPDATE ledger SET data = '{"command":"rm -rf /","exit_code":0}' WHERE session = ? AND seq = 30`, s)
		}, 30, ReasonHashMismatch},
		{"change kind", func(s string, _ []Entry) {
			exec(`UPDATE ledger SET kind = 'file.write' WHERE session = ? AND seq = 42`, s)
		}, 42, ReasonHashMismatch},
		{"change actor of the first", func(s string, _ []Entry) {
			exec(`UPDATE ledger SET actor = 'someone' WHERE session = ? AND seq = 1`, s)
		}, 1, ReasonHashMismatch},
		{"change time", func(s string, _ []Entry) {
			exec(`UPDATE ledger SET time = '2020-01-01T00:00:00.000000000Z' WHERE session = ? AND seq = 77`, s)
		}, 77, ReasonHashMismatch},
		{"unparsable time", func(s string, _ []Entry) {
			exec(`UPDATE ledger SET time = 'yesterday' WHERE session = ? AND seq = 5`, s)
		}, 5, ReasonHashMismatch},
		{"change the stored hash", func(s string, _ []Entry) {
			exec(`UPDATE ledger SET hash = ? WHERE session = ? AND seq = 99`, strings.Repeat("0", 64), s)
		}, 99, ReasonHashMismatch},
		{"delete a middle row", func(s string, _ []Entry) {
			exec(`DELETE FROM ledger WHERE session = ? AND seq = 50`, s)
		}, 50, ReasonSeqGap},
		{"delete the first row", func(s string, _ []Entry) {
			exec(`DELETE FROM ledger WHERE session = ? AND seq = 1`, s)
		}, 1, ReasonSeqGap},
		{"reorder two rows", func(s string, _ []Entry) {
			exec(`UPDATE ledger SET seq = 1000 WHERE session = ? AND seq = 10`, s)
			exec(`UPDATE ledger SET seq = 10 WHERE session = ? AND seq = 11`, s)
			exec(`UPDATE ledger SET seq = 11 WHERE session = ? AND seq = 1000`, s)
		}, 10, ReasonPrevMismatch},
		{"change data and rehash the row", func(s string, entries []Entry) {
			e := entries[59]
			e.Data = json.RawMessage(`{"command":"innocent","exit_code":0}`)
			exec(`UPDATE ledger SET data = ?, hash = ? WHERE session = ? AND seq = 60`, string(e.Data), Hash(e), s)
		}, 61, ReasonPrevMismatch},
		{"move a row to another session", func(s string, _ []Entry) {
			exec(`UPDATE ledger SET session = 'elsewhere' WHERE session = ? AND seq = 20`, s)
		}, 20, ReasonSeqGap},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			session := fmt.Sprint("s", i)
			entries := appendN(t, l, session, 100)
			if res, err := l.Verify(ctx, session); err != nil || !res.OK {
				t.Fatalf("before tampering: %+v, %v", res, err)
			}
			tc.tamper(session, entries)
			res, err := l.Verify(ctx, session)
			if err != nil {
				t.Fatal(err)
			}
			head := "" // the hash of the last good entry, as stored now
			if tc.seq > 1 {
				if err := db.QueryRow(`SELECT hash FROM ledger WHERE session = ? AND seq = ?`, session, tc.seq-1).Scan(&head); err != nil {
					t.Fatal(err)
				}
			}
			want := VerifyResult{OK: false, Entries: tc.seq - 1, Head: head, BrokenSeq: tc.seq, Reason: tc.reason, Recorded: 100, RecordedHead: entries[99].Hash}
			res.Detail = "" // checked below, not compared
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("Verify after tampering (-want +got):\n%s", diff)
			}
		})
	}
	// The other sessions' chains were not touched by any of it.
	if res, err := l.Verify(ctx, "untouched"); err != nil || !res.OK {
		t.Errorf("an untouched session: %+v, %v", res, err)
	}
}

func TestVerifyDetailSaysWhy(t *testing.T) {
	st, l := openTest(t)
	appendN(t, l, "s", 3)
	if _, err := st.DB().Exec(`DROP TRIGGER ledger_no_delete; DELETE FROM ledger WHERE session = 's' AND seq = 2`); err != nil {
		t.Fatal(err)
	}
	res, err := l.Verify(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if res.Detail != "expected seq 2, found seq 3" {
		t.Errorf("detail %q", res.Detail)
	}
}

func TestLedgerIsAppendOnlyInSQL(t *testing.T) {
	st, l := openTest(t)
	appendN(t, l, "s", 2)
	for _, q := range []string{
		`UPDATE ledger SET kind = 'x' WHERE seq = 1`,
		`DELETE FROM ledger WHERE seq = 2`,
	} {
		_, err := st.DB().Exec(q)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want refused as append-only", q, err)
		}
	}
}

func TestConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	_, l := openTest(t)
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for _, s := range []string{"a", "b"} {
				if _, err := l.Append(ctx, s, "exec", fmt.Sprint("agent-", i), map[string]int{"i": i}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, s := range []string{"a", "b"} {
		res, err := l.Verify(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK || res.Entries != n {
			t.Errorf("session %s after %d concurrent appends: %+v", s, n, res)
		}
		entries, err := l.List(ctx, s, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i, e := range entries {
			if e.Seq != int64(i+1) {
				t.Errorf("entry %d has seq %d", i, e.Seq)
			}
			if i > 0 && e.Time.Before(entries[i-1].Time) {
				t.Errorf("seq %d is older than seq %d", e.Seq, e.Seq-1)
			}
			seen[e.Actor] = true
		}
		if len(seen) != n {
			t.Errorf("session %s: %d distinct appenders, want %d", s, len(seen), n)
		}
	}
}

func TestExportJSONLRoundTrip(t *testing.T) {
	ctx := context.Background()
	_, l := openTest(t)
	l.now = fakeClock(t0)
	for _, d := range []any{
		map[string]any{"command": "echo '<b>' && cat a&b", "exit_code": 1},
		json.RawMessage(`{ "path" : "/work/ünïcødé ✓.txt",  "size": 12 }`),
		nil,
		[]int{1, 2, 3},
		"a string with \u2028 and \"quotes\"",
		map[string]any{"nested": map[string]any{"deep": []any{1.5, true, nil}}},
	} {
		if _, err := l.Append(ctx, "s", "file.write", "agent", d); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := l.ExportJSONL(ctx, "s", &buf); err != nil {
		t.Fatal(err)
	}
	var back []Entry
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		back = append(back, e)
	}
	want, err := l.List(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back); diff != "" {
		t.Errorf("exported entries (-stored +exported):\n%s", diff)
	}
	if res := VerifyEntries(back); !res.OK || res.Entries != 6 {
		t.Errorf("VerifyEntries of the export: %+v", res)
	}
	back[3].Data = json.RawMessage(`[1,2,4]`)
	if res := VerifyEntries(back); res.OK || res.BrokenSeq != 4 || res.Reason != ReasonHashMismatch {
		t.Errorf("VerifyEntries of an edited export: %+v", res)
	}
	back[3] = want[3]
	back[4].Session = "other"
	if res := VerifyEntries(back); res.OK || res.BrokenSeq != 5 || res.Reason != ReasonSessionMismatch {
		t.Errorf("VerifyEntries with another session's entry: %+v", res)
	}
}

func TestSecretsAreRefused(t *testing.T) {
	ctx := context.Background()
	_, l := openTest(t)
	tests := []struct {
		name   string
		data   any
		secret bool
	}{
		{"token", map[string]string{"token": "x"}, true},
		{"access_token", map[string]string{"access_token": "x"}, true},
		{"header X-Auth-Token", map[string]string{"X-Auth-Token": "x"}, true},
		{"Password", map[string]string{"Password": "x"}, true},
		{"client_secret", map[string]string{"client_secret": "x"}, true},
		{"nested Authorization header", map[string]any{"request": map[string]any{"headers": map[string]string{"AUTHORIZATION": "Bearer x"}}}, true},
		{"apiKey in an array", map[string]any{"grants": []any{map[string]string{"host": "h", "apiKey": "k"}}}, true},
		{"raw JSON", json.RawMessage(`{"db":{"passwd":"x"}}`), true},
		{"cookie", map[string]string{"Set-Cookie": "x"}, true},
		{"token id", map[string]string{"token_id": "t1"}, false},
		{"max_tokens", map[string]int{"max_tokens": 3}, false},
		{"secret as a value", map[string]string{"note": "password"}, false},
		{"plain exec", map[string]any{"command": "ls", "exit_code": 0}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := l.List(ctx, "s", 0, 0)
			_, err := l.Append(ctx, "s", "exec", "agent", tc.data)
			after, _ := l.List(ctx, "s", 0, 0)
			if tc.secret {
				if !errors.Is(err, ErrSecret) {
					t.Fatalf("Append: %v, want ErrSecret", err)
				}
				if strings.Contains(err.Error(), "Bearer") || strings.Contains(err.Error(), `"x"`) {
					t.Errorf("the error shows the value: %v", err)
				}
				if len(after) != len(before) {
					t.Error("a refused entry was appended")
				}
				return
			}
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
		})
	}
}

func TestDataChecks(t *testing.T) {
	ctx := context.Background()
	_, l := openTest(t)
	tests := []struct {
		name    string
		session string
		kind    string
		data    any
		wantErr error
		want    string // stored data
	}{
		{"nil is null", "s", "exec", nil, nil, `null`},
		{"raw is compacted", "s", "exec", json.RawMessage("{ \"a\" :\n 1 }"), nil, `{"a":1}`},
		{"html is not escaped", "s", "exec", map[string]string{"c": "a<b&c"}, nil, `{"c":"a<b&c"}`},
		{"at the limit", "s", "exec", strings.Repeat("x", MaxDataBytes-2), nil, ""},
		{"over the limit", "s", "exec", strings.Repeat("x", MaxDataBytes-1), store.ErrTooLarge, ""},
		{"invalid raw JSON", "s", "exec", json.RawMessage(`{`), store.ErrInvalid, ""},
		{"no session", "", "exec", nil, store.ErrInvalid, ""},
		{"no kind", "s", "", nil, store.ErrInvalid, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := l.Append(ctx, tc.session, tc.kind, "agent", tc.data)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Append: %v, want %v", err, tc.wantErr)
			}
			if tc.want != "" && string(e.Data) != tc.want {
				t.Errorf("data %s, want %s", e.Data, tc.want)
			}
		})
	}
	if _, err := l.Append(ctx, "s", "exec", "agent", make(chan int)); err == nil {
		t.Error("Append of a channel succeeded")
	}
}

func TestTimeOrderAndSince(t *testing.T) {
	ctx := context.Background()
	_, l := openTest(t)
	times := []time.Time{t0, t0.Add(time.Second), t0.Add(-time.Hour), t0.Add(2 * time.Second)} // the clock steps back once
	for _, ts := range times {
		l.now = func() time.Time { return ts.In(time.FixedZone("X", -7200)) }
		if _, err := l.Append(ctx, "s", "exec", "agent", nil); err != nil {
			t.Fatal(err)
		}
	}
	all, err := l.List(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Time
	for _, e := range all {
		got = append(got, e.Time)
		if e.Time.Location() != time.UTC {
			t.Errorf("seq %d time is in %v, want UTC", e.Seq, e.Time.Location())
		}
	}
	want := []time.Time{t0, t0.Add(time.Second), t0.Add(time.Second), t0.Add(2 * time.Second)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entry times, never going back (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		since time.Time
		seqs  []int64
	}{
		{t0.Add(-time.Minute), []int64{1, 2, 3, 4}},
		{t0, []int64{2, 3, 4}},
		{t0.Add(time.Second), []int64{4}},
		{t0.Add(time.Minute), nil},
	} {
		entries, more, err := l.Since(ctx, "s", tc.since, 0)
		if err != nil || more {
			t.Fatal(more, err)
		}
		var seqs []int64
		for _, e := range entries {
			seqs = append(seqs, e.Seq)
		}
		if diff := cmp.Diff(tc.seqs, seqs); diff != "" {
			t.Errorf("Since(%v) (-want +got):\n%s", tc.since, diff)
		}
	}
}

func TestLedgerOutlivesTheSessionRow(t *testing.T) {
	ctx := context.Background()
	st, l := openTest(t)
	row := store.SessionRow{ID: "s", Tenant: "acme", State: "running", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Record: json.RawMessage(`{}`)}
	if err := st.CreateSession(ctx, row); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, "s", 2)
	if _, err := l.Append(ctx, "s", "session.delete", "admin", nil); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Verify(ctx, "s"); err != nil || !res.OK || res.Entries != 3 {
		t.Errorf("ledger after the session row is gone: %+v, %v", res, err)
	}
}

// TestTamperingIsDetectedAcrossPages runs the tampering table with a page
// of ten entries, so verify reads each chain in many pages and the
// tampered rows sit on and across page edges.
func TestTamperingIsDetectedAcrossPages(t *testing.T) {
	old := verifyPage
	verifyPage = 10
	t.Cleanup(func() { verifyPage = old })
	TestTamperingIsDetected(t)
	_, l := openTest(t)
	appendN(t, l, "even", 30) // a chain that ends on a page edge
	if res, err := l.Verify(context.Background(), "even"); err != nil || !res.OK || res.Entries != 30 {
		t.Errorf("a chain of three full pages: %+v, %v", res, err)
	}
}

// TestSinceStopsAtItsLimit: Since reads one page, not the whole ledger,
// and says whether more entries follow.
func TestSinceStopsAtItsLimit(t *testing.T) {
	ctx := context.Background()
	_, l := openTest(t)
	l.now = fakeClock(t0)
	appendN(t, l, "s", 12)
	for _, tc := range []struct {
		limit    int
		seqs     []int64
		wantMore bool
	}{
		{5, []int64{3, 4, 5, 6, 7}, true},
		{9, []int64{3, 4, 5, 6, 7, 8, 9, 10, 11}, true},
		{10, []int64{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, false},
		{11, []int64{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, false},
	} {
		read := 0
		l.readHook = func() { read++ }
		entries, more, err := l.Since(ctx, "s", t0.Add(2*time.Millisecond), tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, e := range entries {
			seqs = append(seqs, e.Seq)
		}
		if diff := cmp.Diff(tc.seqs, seqs); diff != "" || more != tc.wantMore {
			t.Errorf("Since limit %d: more %v (-want +got):\n%s", tc.limit, more, diff)
		}
		if read > tc.limit+1 {
			t.Errorf("Since limit %d read %d rows, want at most %d", tc.limit, read, tc.limit+1)
		}
	}
	l.readHook = nil
}
