package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

// TestCLILedgerVerifyWhatItCannotProve runs a real `paddock serve`, gives
// three sessions a ledger, stops it, and then cuts rows out of the SQLite
// database of its state dir as someone with the file could: the newest
// entries of one ledger, every entry of another, every entry and the
// recorded head of a third. `paddock ledger verify` must say what it
// cannot prove and exit 1 for each, exit 3 for a session id the database
// does not know, and still say ok (exit 0) for a ledger nobody touched.
// While the daemon runs, its database files are 0600.
func TestCLILedgerVerifyWhatItCannotProve(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	ctx := context.Background()
	sdk := daemonSDK(t, state, addr, "pdk_cli_test_token_0123456789")
	var ids []string
	for range 4 {
		s, err := sdk.CreateSession(ctx, session.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"echo one", "echo two", "echo three"} {
			if _, err := sdk.Exec(ctx, s.ID, session.ExecRequest{Command: cmd}); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, s.ID)
	}
	db := filepath.Join(state, "paddock.db")
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatalf("%v (the running daemon's database files must all exist to be checked)", err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %04o, want 0600", filepath.Base(f), fi.Mode().Perm())
		}
	}
	stopServe(t, srv)

	verify := func(id string, json bool) (string, int) {
		t.Helper()
		args := []string{"--state-dir", state, "ledger", "verify", id}
		if json {
			args = append([]string{"--json"}, args...)
		}
		out, se, code := runCLI(t, bin, env, nil, args...)
		return out + se, code
	}
	entries := map[string]int{}
	for _, id := range ids {
		out, code := verify(id, false)
		if code != 0 || !strings.HasPrefix(out, "ok: ") {
			t.Fatalf("%s before anything was cut: %d %q", id, code, out)
		}
		var res ledger.VerifyResult
		out, _ = verify(id, true)
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Entries < 4 || res.Recorded != res.Entries {
			t.Fatalf("%s: --json %q: %+v %v", id, out, res, err)
		}
		entries[id] = int(res.Entries)
	}

	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	// The append-only triggers only stop SQLite's normal paths: someone
	// with the file drops them first.
	for _, q := range []string{
		`DROP TRIGGER ledger_no_delete`, `DROP TRIGGER ledger_heads_no_delete`,
		`DELETE FROM ledger WHERE session = '` + ids[0] + `' AND seq > 2`,
		`DELETE FROM ledger WHERE session = '` + ids[1] + `'`,
		`DELETE FROM ledger WHERE session = '` + ids[2] + `'`,
		`DELETE FROM ledger_heads WHERE session = '` + ids[2] + `'`,
	} {
		if _, err := st.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st.Close()

	for _, tc := range []struct {
		name, id string
		code     int
		says     []string
	}{
		{"truncated tail", ids[0], 1, []string{"cannot prove the ledger whole: truncated", "the chain ends at seq 2", "seq 3 to"}},
		{"emptied ledger", ids[1], 1, []string{"cannot prove the ledger whole: truncated", "the ledger is empty, but"}},
		{"emptied with its head", ids[2], 1, []string{"cannot prove the ledger whole: no head", "has a record but no ledger entry"}},
		{"unknown session", "ses-0123456789abcdef", 3, []string{"unknown session", "no session ses-0123456789abcdef", "--state-dir"}},
		{"untouched", ids[3], 0, []string{"ok: "}},
	} {
		out, code := verify(tc.id, false)
		for _, s := range tc.says {
			if !strings.Contains(out, s) {
				t.Errorf("%s: %q lacks %q", tc.name, out, s)
			}
		}
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d (%q)", tc.name, code, tc.code, out)
		}
	}
	var res ledger.VerifyResult
	out, code := verify(ids[0], true)
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.OK || res.Reason != ledger.ReasonTruncated ||
		res.Entries != 2 || res.BrokenSeq != 3 || int(res.Recorded) != entries[ids[0]] {
		t.Errorf("--json of the truncated ledger: %d %q %+v", code, out, res)
	}
}
