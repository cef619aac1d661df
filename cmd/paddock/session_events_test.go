package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/store"
)

// TestCLISessionEvents: `paddock session events` against `paddock
// serve`: the table shows the ledger's entries and the machine's events
// in time order; --since as a time shows only what came after it, as a
// duration ago (1h) everything of a new session; --json writes one
// object a line; --follow prints an exec run after it started and ends
// with exit 0 when the session is deleted; a bad --since is a usage
// error (exit 2) and another tenant's or an unknown session exits 3.
func TestCLISessionEvents(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	id := c.newSession()
	if out, se, code := pd("session", "exec", id, "--", "echo first"); code != 0 {
		t.Fatalf("exec: %d %q %q", code, out, se)
	}
	out, se, code := pd("session", "events", id)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 3 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[0], "SOURCE") || !strings.Contains(lines[0], "DETAIL") ||
		!strings.Contains(out, " vm ") || !strings.Contains(out, "boot") || !strings.Contains(out, "session.create") || !strings.Contains(out, "echo first") {
		t.Fatalf("events: %d %q %q", code, out, se)
	}
	// --json: one object a line, in time order.
	out, _, code = pd("--json", "session", "events", id, "--since", "1h")
	var last time.Time
	var sources = map[string]int{}
	var execTime time.Time
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e eventLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		if e.Time.Before(last) {
			t.Errorf("%s %s comes before the line above it", e.Source, e.Kind)
		}
		last = e.Time
		sources[e.Source]++
		if e.Kind == "exec" {
			execTime = e.Time
		}
	}
	if code != 0 || sources["ledger"] < 2 || sources["vm"] < 1 || execTime.IsZero() {
		t.Fatalf("--json --since 1h: %d %v %q", code, sources, out)
	}
	// --since the exec: nothing of what came before it.
	if out, se, code = pd("session", "events", id, "--since", execTime.Format(time.RFC3339Nano)); code != 0 || strings.Contains(out, "session.create") || strings.Contains(out, "echo first") {
		t.Errorf("--since the exec: %d %q %q", code, out, se)
	}
	for _, bad := range []string{"yesterday", "-5m", "0s", "100000h"} {
		if out, se, code := pd("session", "events", id, "--since", bad); code != exitUsage || !strings.Contains(se, "--since") {
			t.Errorf("--since %s: %d %q %q, want exit %d", bad, code, out, se, exitUsage)
		}
	}
	if _, _, code := pd("session", "events", "ses-0000000000000000"); code != exitNotFound {
		t.Errorf("an unknown session: exit %d, want %d", code, exitNotFound)
	}

	// --follow: starts, then an exec shows up, then the delete ends it.
	f := exec.Command(c.bin, "--json", "session", "events", id, "--follow", "--since", "1s")
	f.Env = c.env
	stdout, err := f.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var ferr strings.Builder
	f.Stderr = &ferr
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Process.Kill()
	got := make(chan eventLine, 100)
	go func() {
		defer close(got)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e eventLine
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				got <- e
			}
		}
	}()
	time.Sleep(700 * time.Millisecond) // the stream is open
	if out, se, code := pd("session", "exec", id, "--", "echo followed"); code != 0 {
		t.Fatalf("exec: %d %q %q", code, out, se)
	}
	wait := func(what string, ok func(eventLine) bool) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case e, open := <-got:
				if !open {
					t.Fatalf("--follow ended before %s: %s", what, ferr.String())
				}
				if ok(e) {
					return
				}
			case <-deadline:
				t.Fatalf("--follow: no %s in 20s", what)
			}
		}
	}
	wait("the exec run after it started", func(e eventLine) bool {
		return e.Kind == "exec" && strings.Contains(string(e.Data), "echo followed")
	})
	if _, se, code := pd("session", "rm", id); code != 0 {
		t.Fatalf("rm: %d %q", code, se)
	}
	wait("the stop event", func(e eventLine) bool { return e.Source == "vm" && e.Kind == "stop" })
	done := make(chan error, 1)
	go func() { done <- f.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(ferr.String(), "the session ended") {
			t.Errorf("--follow after the delete: %v %q, want exit 0 saying the session ended", err, ferr.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("--follow did not end after the session was deleted")
	}
}

// TestCLISessionVerify: `paddock session verify` against `paddock serve`
// says ok (exit 0) for an untouched ledger, prints the daemon's answer
// with --json, exits 3 for an unknown session, and exits 1 naming the
// seq and the reason once an entry was changed in the database.
func TestCLISessionVerify(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	id := c.newSession()
	if out, se, code := pd("session", "exec", id, "--", "echo first"); code != 0 {
		t.Fatalf("exec: %d %q %q", code, out, se)
	}
	if out, se, code := pd("session", "verify", id); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("verify: %d %q %q", code, out, se)
	}
	out, se, code := pd("--json", "session", "verify", id)
	var v apiv1.LedgerVerification
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || !v.OK || v.Entries < 2 || v.RecordedHead != v.Head {
		t.Fatalf("verify --json: %d %q %q %v", code, out, se, err)
	}
	if out, se, code := pd("session", "verify", "ses-0123456789abcdef"); code != exitNotFound {
		t.Errorf("unknown session: %d %q %q, want %d", code, out, se, exitNotFound)
	}
	st, err := store.Open(filepath.Join(c.state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER ledger_no_update`, `UPDATE ledger SET actor = 'someone-else' WHERE session = '` + id + `' AND seq = 2`} {
		if _, err := st.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st.Close()
	if out, se, code := pd("session", "verify", id); code != exitError || !strings.Contains(out, "hash mismatch at seq 2") {
		t.Errorf("after a changed entry: %d %q %q, want exit %d naming seq 2", code, out, se, exitError)
	}
}
