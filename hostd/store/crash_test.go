package store

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The crash test runs this test binary again as a child (TestCrashChild,
// selected by PADDOCK_STORE_CRASH), lets it get to a point in a write, and
// SIGKILLs it there. The parent then reopens the database.

const crashEnv = "PADDOCK_STORE_CRASH"

// bigRecord is a valid JSON record of about 900 KiB, so that a write of it
// spans hundreds of pages.
func bigRecord(fill string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"fill":%q}`, strings.Repeat(fill, 900<<10)))
}

// TestCrashChild is the child's side; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	mode, path, ok := strings.Cut(os.Getenv(crashEnv), ":")
	if !ok {
		t.Skip("only runs as the crash test's child")
	}
	ctx := context.Background()
	s, err := Open(path)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	switch mode {
	case "mid-transaction":
		err = s.WithTx(ctx, func(tx *sql.Tx) error {
			// A tiny page cache makes SQLite spill the uncommitted pages
			// to the -wal file, so the kill lands with them on disk.
			if _, err := tx.ExecContext(ctx, `PRAGMA cache_size = 8`); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET revision = 1, state = 'new', record = ? WHERE id = 's'`, string(bigRecord("n"))); err != nil {
				return err
			}
			fmt.Println("ready")
			select {} // wait for SIGKILL, transaction open
		})
	case "committed":
		_, err = s.UpdateSession(ctx, "s", 0, func(r *SessionRow) error {
			r.State, r.Record = "new", bigRecord("n")
			return nil
		})
		if err == nil {
			fmt.Println("ready")
			select {} // wait for SIGKILL, database still open
		}
	}
	fmt.Println("error:", err)
	os.Exit(1)
}

func TestCrashLeavesOldOrNewRecord(t *testing.T) {
	tests := []struct {
		mode      string
		wantState string
		wantRev   int64
		wantFill  string
	}{
		{"mid-transaction", "old", 0, "o"},
		{"committed", "new", 1, "n"},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := context.Background()
			s, path := openTest(t)
			row := session("s", "acme", t0)
			row.State, row.Record = "old", bigRecord("o")
			mustCreate(t, s, row)
			s.Close() // checkpoints and removes the -wal file

			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashEnv+"="+tc.mode+":"+path)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || line != "ready\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child said %q, %v", line, err)
			}
			if tc.mode == "mid-transaction" {
				fi, err := os.Stat(path + "-wal")
				if err != nil || fi.Size() < 100<<10 {
					t.Errorf("expected uncommitted pages in the -wal file before the kill: %v %v", fi, err)
				}
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()

			s2, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			var check string
			if err := s2.db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
				t.Errorf("integrity_check: %q, %v", check, err)
			}
			got, err := s2.GetSession(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			want := row
			want.State, want.Revision, want.Record = tc.wantState, tc.wantRev, bigRecord(tc.wantFill)
			if got.State != want.State || got.Revision != want.Revision || string(got.Record) != string(want.Record) {
				t.Errorf("after the kill: state %q revision %d record %d bytes starting %.20q; want state %q revision %d fill %q",
					got.State, got.Revision, len(got.Record), got.Record, want.State, want.Revision, tc.wantFill)
			}
			got.Record, want.Record = nil, nil
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("row after the kill (-want +got):\n%s", diff)
			}
		})
	}
}
