package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

func session(id, tenant string, created time.Time) SessionRow {
	return SessionRow{
		ID: id, Tenant: tenant, State: "running",
		CreatedAt: created, ExpiresAt: created.Add(time.Hour),
		Record: json.RawMessage(fmt.Sprintf(`{"id":%q,"tenant":%q}`, id, tenant)),
	}
}

func mustCreate(t *testing.T, s *Store, rows ...SessionRow) {
	t.Helper()
	for _, r := range rows {
		if err := s.CreateSession(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func migrationVersions(t *testing.T, s *Store) []int {
	t.Helper()
	rows, err := s.db.Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func TestOpenMigratesOnceAndReopens(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	want := make([]int, SchemaVersion())
	for i := range want {
		want[i] = i + 1
	}
	if diff := cmp.Diff(want, migrationVersions(t, s)); diff != "" {
		t.Fatalf("versions after first open (-want +got):\n%s", diff)
	}
	var mode string
	var fk, busy int
	if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow(`PRAGMA busy_timeout`).Scan(&busy); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || fk != 1 || busy != int(BusyTimeout.Milliseconds()) {
		t.Errorf("journal_mode=%s foreign_keys=%d busy_timeout=%d", mode, fk, busy)
	}
	mustCreate(t, s, session("s1", "acme", t0))
	s.Close()

	for range 2 { // reopening applies nothing and keeps the data
		s2, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, migrationVersions(t, s2)); diff != "" {
			t.Errorf("versions after reopen (-want +got):\n%s", diff)
		}
		got, err := s2.GetSession(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(session("s1", "acme", t0), got); diff != "" {
			t.Errorf("session after reopen (-want +got):\n%s", diff)
		}
		s2.Close()
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	s, path := openTest(t)
	if _, err := s.db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, SchemaVersion()+1, formatTime(t0)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "newer paddock") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

func TestOpenRefusesURIPaths(t *testing.T) {
	for _, p := range []string{"", "file:x.db", "x.db?mode=ro", "a#b"} {
		if _, err := Open(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", p, err)
		}
	}
}

func TestSessions(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	a1 := session("a1", "acme", t0.Add(2*time.Second))
	a2 := session("a2", "acme", t0)
	b1 := session("b1", "beta", t0.Add(time.Second))
	a3 := session("a3", "acme", t0.In(time.FixedZone("X", 3600)).Add(time.Second)) // same instant rule, other zone
	mustCreate(t, s, a1, a2, b1, a3)
	a3.CreatedAt, a3.ExpiresAt = a3.CreatedAt.UTC(), a3.ExpiresAt.UTC()

	if err := s.CreateSession(ctx, a1); !errors.Is(err, ErrConflict) {
		t.Errorf("duplicate create: %v, want ErrConflict", err)
	}
	if _, err := s.GetSession(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get missing: %v, want ErrNotFound", err)
	}
	for _, tc := range []struct {
		tenant string
		want   []SessionRow
	}{
		{"acme", []SessionRow{a2, a3, a1}},
		{"beta", []SessionRow{b1}},
		{"", []SessionRow{a2, a3, b1, a1}},
		{"nobody", nil},
	} {
		got, err := s.ListSessions(ctx, tc.tenant)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ListSessions(%q) (-want +got):\n%s", tc.tenant, diff)
		}
	}

	// Deleting a session takes its checkpoints, jobs and uploads with it.
	if err := s.PutCheckpoint(ctx, CheckpointRow{SessionID: "a1", Tag: "c", Snapshot: json.RawMessage(`{}`), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutJob(ctx, JobRow{SessionID: "a1", JobID: "j", Command: "ls", Record: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutUpload(ctx, UploadRow{SessionID: "a1", UploadID: "u", Record: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "a1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := s.GetSession(ctx, "a1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get deleted: %v, want ErrNotFound", err)
	}
	for table, q := range map[string]string{
		"checkpoints": `SELECT count(*) FROM checkpoints WHERE session_id = 'a1'`,
		"jobs":        `SELECT count(*) FROM jobs WHERE session_id = 'a1'`,
		"uploads":     `SELECT count(*) FROM uploads WHERE session_id = 'a1'`,
	} {
		var n int
		if err := s.db.QueryRow(q).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s of a deleted session: %d rows, err %v", table, n, err)
		}
	}
}

func TestUpdateSession(t *testing.T) {
	ctx := context.Background()
	errBoom := errors.New("boom")
	big := json.RawMessage(`"` + strings.Repeat("x", MaxRecordBytes) + `"`)
	tests := []struct {
		name    string
		id      string
		expect  int64
		fn      func(*SessionRow) error
		wantErr error
		wantRev int64 // revision stored afterwards
	}{
		{"any revision", "s", -1, func(r *SessionRow) error { r.State = "stopped"; return nil }, nil, 1},
		{"matching revision", "s", 0, func(r *SessionRow) error { r.State = "stopped"; return nil }, nil, 1},
		{"stale revision", "s", 3, func(r *SessionRow) error { r.State = "stopped"; return nil }, ErrRevision, 0},
		{"missing session", "nope", -1, func(r *SessionRow) error { return nil }, ErrNotFound, 0},
		{"fn error aborts", "s", -1, func(r *SessionRow) error { r.State = "half"; return errBoom }, errBoom, 0},
		{"id is immutable", "s", -1, func(r *SessionRow) error { r.ID = "other"; return nil }, ErrInvalid, 0},
		{"record too large", "s", -1, func(r *SessionRow) error { r.Record = big; return nil }, ErrTooLarge, 0},
		{"record not JSON", "s", -1, func(r *SessionRow) error { r.Record = json.RawMessage(`{`); return nil }, ErrInvalid, 0},
		{"revision set by fn is ignored", "s", -1, func(r *SessionRow) error { r.Revision = 99; return nil }, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTest(t)
			orig := session("s", "acme", t0)
			mustCreate(t, s, orig)
			got, err := s.UpdateSession(ctx, tc.id, tc.expect, tc.fn)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("UpdateSession: %v, want %v", err, tc.wantErr)
			}
			stored, err := s.GetSession(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			if stored.Revision != tc.wantRev {
				t.Errorf("stored revision %d, want %d", stored.Revision, tc.wantRev)
			}
			if tc.wantErr != nil {
				if diff := cmp.Diff(orig, stored); diff != "" {
					t.Errorf("a failed update changed the row (-orig +stored):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(stored, got); diff != "" {
				t.Errorf("returned row differs from stored (-stored +returned):\n%s", diff)
			}
		})
	}
}

// TestUpdateSessionCompareAndSet: of many writers that read revision 0,
// exactly one wins; the rest get ErrRevision.
func TestUpdateSessionCompareAndSet(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustCreate(t, s, session("s", "acme", t0))
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.UpdateSession(ctx, "s", 0, func(r *SessionRow) error {
				r.State = fmt.Sprint("writer-", i)
				return nil
			})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrRevision):
			t.Errorf("loser got %v, want ErrRevision", err)
		}
	}
	if won != 1 {
		t.Errorf("%d writers won, want 1", won)
	}
}

// TestUpdateSessionConcurrent: 20 unconditional updates each apply exactly
// once, none lost to another's read-modify-write.
func TestUpdateSessionConcurrent(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	row := session("s", "acme", t0)
	row.Record = json.RawMessage(`{"seen":[]}`)
	mustCreate(t, s, row)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := s.UpdateSession(ctx, "s", -1, func(r *SessionRow) error {
				var rec struct{ Seen []int }
				if err := json.Unmarshal(r.Record, &rec); err != nil {
					return err
				}
				rec.Seen = append(rec.Seen, i)
				b, err := json.Marshal(map[string]any{"seen": rec.Seen})
				r.Record = b
				return err
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := s.GetSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != n {
		t.Errorf("revision %d, want %d", got.Revision, n)
	}
	var rec struct{ Seen []int }
	if err := json.Unmarshal(got.Record, &rec); err != nil {
		t.Fatal(err)
	}
	sort.Ints(rec.Seen)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if diff := cmp.Diff(want, rec.Seen); diff != "" {
		t.Errorf("updates applied (-want +got):\n%s", diff)
	}
}

func TestRecordLimits(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustCreate(t, s, session("s", "acme", t0))
	// A JSON string of exactly n bytes, quotes included.
	jsonOf := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("a", n-2) + `"`) }
	atLimit, overLimit := jsonOf(MaxRecordBytes), jsonOf(MaxRecordBytes+1)
	tests := []struct {
		name string
		put  func(json.RawMessage) error
	}{
		{"session", func(r json.RawMessage) error {
			row := session(fmt.Sprint("n", len(r)), "acme", t0)
			row.Record = r
			return s.CreateSession(ctx, row)
		}},
		{"checkpoint", func(r json.RawMessage) error {
			return s.PutCheckpoint(ctx, CheckpointRow{SessionID: "s", Tag: fmt.Sprint(len(r)), Snapshot: r, CreatedAt: t0})
		}},
		{"job", func(r json.RawMessage) error { return s.PutJob(ctx, JobRow{SessionID: "s", JobID: "j", Record: r}) }},
		{"upload", func(r json.RawMessage) error {
			return s.PutUpload(ctx, UploadRow{SessionID: "s", UploadID: "u", Record: r})
		}},
		{"idempotency", func(r json.RawMessage) error {
			return s.PutIdempotency(ctx, Idempotency{Scope: "s", Key: fmt.Sprint(len(r)), Response: r})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.put(atLimit); err != nil {
				t.Errorf("a record of exactly 1 MiB: %v", err)
			}
			err := tc.put(overLimit)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("a record over 1 MiB: %v, want ErrTooLarge", err)
			}
			if !strings.Contains(err.Error(), "limit is 1048576") {
				t.Errorf("error does not say the limit: %v", err)
			}
		})
	}
}

func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustCreate(t, s, session("s", "acme", t0))
	c1 := CheckpointRow{SessionID: "s", Tag: "one", Snapshot: json.RawMessage(`{"layer":1}`), CreatedAt: t0}
	c2 := CheckpointRow{SessionID: "s", Tag: "two", Snapshot: json.RawMessage(`{"layer":2}`), CreatedAt: t0.Add(time.Minute)}
	for _, c := range []CheckpointRow{c2, c1} {
		if err := s.PutCheckpoint(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		c    CheckpointRow
		want error
	}{
		{"duplicate tag", c1, ErrConflict},
		{"no such session", CheckpointRow{SessionID: "x", Tag: "t", Snapshot: json.RawMessage(`{}`)}, ErrNotFound},
		{"empty tag", CheckpointRow{SessionID: "s", Snapshot: json.RawMessage(`{}`)}, ErrInvalid},
		{"bad snapshot", CheckpointRow{SessionID: "s", Tag: "t", Snapshot: json.RawMessage(`nope`)}, ErrInvalid},
	} {
		if err := s.PutCheckpoint(ctx, tc.c); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	got, err := s.GetCheckpoint(ctx, "s", "one")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c1, got); diff != "" {
		t.Errorf("GetCheckpoint (-want +got):\n%s", diff)
	}
	list, err := s.ListCheckpoints(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]CheckpointRow{c1, c2}, list); diff != "" {
		t.Errorf("ListCheckpoints, oldest first (-want +got):\n%s", diff)
	}
	if err := s.DeleteCheckpoint(ctx, "s", "one"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCheckpoint(ctx, "s", "one"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := s.GetCheckpoint(ctx, "s", "one"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get deleted: %v, want ErrNotFound", err)
	}
}

func TestJobsAndUploads(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustCreate(t, s, session("s", "acme", t0), session("t", "acme", t0))
	j1 := JobRow{SessionID: "s", JobID: "j1", Command: "make", Record: json.RawMessage(`{"status":"running"}`)}
	j2 := JobRow{SessionID: "s", JobID: "j2", Command: "ls", Record: json.RawMessage(`{"status":"running"}`)}
	jt := JobRow{SessionID: "t", JobID: "j1", Command: "true", Record: json.RawMessage(`{}`)}
	for _, j := range []JobRow{j1, j2, jt} {
		if err := s.PutJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	j1.Record = json.RawMessage(`{"status":"exited","code":0}`)
	if err := s.PutJob(ctx, j1); err != nil { // replaces, keeps its place
		t.Fatal(err)
	}
	if err := s.PutJob(ctx, JobRow{SessionID: "x", JobID: "j", Record: json.RawMessage(`{}`)}); !errors.Is(err, ErrNotFound) {
		t.Errorf("job of a missing session: %v, want ErrNotFound", err)
	}
	got, err := s.GetJob(ctx, "s", "j1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(j1, got); diff != "" {
		t.Errorf("GetJob (-want +got):\n%s", diff)
	}
	jobs, err := s.ListJobs(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]JobRow{j1, j2}, jobs); diff != "" {
		t.Errorf("ListJobs (-want +got):\n%s", diff)
	}
	if n, err := s.DeleteJobs(ctx, "s"); err != nil || n != 2 {
		t.Errorf("DeleteJobs = %d, %v; want 2", n, err)
	}
	if _, err := s.GetJob(ctx, "s", "j1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get deleted job: %v, want ErrNotFound", err)
	}
	if _, err := s.GetJob(ctx, "t", "j1"); err != nil {
		t.Errorf("another session's job went too: %v", err)
	}

	u1 := UploadRow{SessionID: "s", UploadID: "u1", Record: json.RawMessage(`{"parts":1}`)}
	u2 := UploadRow{SessionID: "s", UploadID: "u2", Record: json.RawMessage(`{"parts":0}`)}
	for _, u := range []UploadRow{u1, u2} {
		if err := s.PutUpload(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	u1.Record = json.RawMessage(`{"parts":2}`)
	if err := s.PutUpload(ctx, u1); err != nil {
		t.Fatal(err)
	}
	gotU, err := s.GetUpload(ctx, "s", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(u1, gotU); diff != "" {
		t.Errorf("GetUpload (-want +got):\n%s", diff)
	}
	if err := s.DeleteUpload(ctx, "s", "u2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUpload(ctx, "s", "u2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	uploads, err := s.ListUploads(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]UploadRow{u1}, uploads); diff != "" {
		t.Errorf("ListUploads (-want +got):\n%s", diff)
	}
}

func TestIdempotency(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	now := t0
	s.now = func() time.Time { return now }

	reserve := Idempotency{Scope: "sess", Key: "k1", RequestHash: "h1"}
	if err := s.PutIdempotency(ctx, reserve); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIdempotency(ctx, reserve); !errors.Is(err, ErrConflict) {
		t.Errorf("second reserve: %v, want ErrConflict", err)
	}
	if err := s.PutIdempotency(ctx, Idempotency{Scope: "other", Key: "k1", RequestHash: "h1"}); err != nil {
		t.Errorf("same key in another scope: %v", err)
	}
	got, err := s.GetIdempotency(ctx, "sess", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Idempotency{Scope: "sess", Key: "k1", RequestHash: "h1", CreatedAt: t0}, got); diff != "" {
		t.Errorf("reserved key (-want +got):\n%s", diff)
	}
	if err := s.CompleteIdempotency(ctx, "sess", "k1", []byte(`{"status":201}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteIdempotency(ctx, "sess", "nope", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("complete unknown key: %v, want ErrNotFound", err)
	}
	got, err = s.GetIdempotency(ctx, "sess", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Idempotency{Scope: "sess", Key: "k1", RequestHash: "h1", Done: true, Response: []byte(`{"status":201}`), CreatedAt: t0}, got); diff != "" {
		t.Errorf("completed key (-want +got):\n%s", diff)
	}

	// A released key can be reserved again.
	if err := s.PutIdempotency(ctx, Idempotency{Scope: "sess", Key: "k2", RequestHash: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteIdempotency(ctx, "sess", "k2"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIdempotency(ctx, Idempotency{Scope: "sess", Key: "k2", RequestHash: "h"}); err != nil {
		t.Errorf("reserve after release: %v", err)
	}

	// After 24 h a key is gone for Get, can be reserved again, and is swept.
	now = t0.Add(IdempotencyTTL + time.Second)
	if _, err := s.GetIdempotency(ctx, "sess", "k1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired key: %v, want ErrNotFound", err)
	}
	if err := s.PutIdempotency(ctx, Idempotency{Scope: "sess", Key: "k1", RequestHash: "h2"}); err != nil {
		t.Errorf("reserve over an expired key: %v", err)
	}
	n, err := s.CleanupIdempotency(ctx)
	if err != nil || n != 2 { // "other"/k1 and sess/k2; the new sess/k1 stays
		t.Errorf("CleanupIdempotency = %d, %v; want 2", n, err)
	}
	if got, err := s.GetIdempotency(ctx, "sess", "k1"); err != nil || got.RequestHash != "h2" {
		t.Errorf("fresh key after cleanup: %+v, %v", got, err)
	}
}
