package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
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

// TestCLIEventsTail: `session events` and `session timeline` against a
// fake daemon: --tail N asks for the newest N (?tail=N) and nothing
// else; without it the answer's ledger_more makes a note on stderr that
// more entries follow; --tail out of range or with --since/--follow is a
// usage error sent nowhere.
func TestCLIEventsTail(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		ev := apiv1.Events{Ledger: []apiv1.LedgerEntry{{Seq: 10007, Kind: "newest", Data: json.RawMessage(`{}`)}}, VMEvents: []apiv1.VMEvent{}}
		if r.URL.Query().Get("tail") == "" {
			ev = apiv1.Events{Ledger: []apiv1.LedgerEntry{{Seq: 1, Kind: "oldest", Data: json.RawMessage(`{}`)}}, VMEvents: []apiv1.VMEvent{}, LedgerMore: true}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ev)
	}))
	defer daemon.Close()
	run := func(args ...string) (string, string, error) {
		root := newRoot()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append(args, "--url", daemon.URL, "--token", "pdk_fake"))
		err := root.ExecuteContext(t.Context())
		return out.String(), errOut.String(), err
	}
	for _, verb := range []string{"events", "timeline"} {
		queries = nil
		out, se, err := run("session", verb, "ses-1", "--tail", "5")
		if err != nil || !strings.Contains(out, "newest") || strings.Contains(se, "more ledger entries") || len(queries) != 1 || queries[0] != "tail=5" {
			t.Errorf("%s --tail 5: %v %q %q, queries %q", verb, err, out, se, queries)
		}
		out, se, err = run("session", verb, "ses-1")
		if err != nil || !strings.Contains(out, "oldest") || !strings.Contains(se, "more ledger entries follow") || !strings.Contains(se, "--tail") {
			t.Errorf("%s with more to come: %v %q %q", verb, err, out, se)
		}
		queries = nil
		for _, bad := range [][]string{{"--tail", "10001"}, {"--tail", "-1"}} {
			if _, _, err := run(append([]string{"session", verb, "ses-1"}, bad...)...); exitCode(err) != exitUsage {
				t.Errorf("%s %v: %v, want a usage error", verb, bad, err)
			}
		}
		if len(queries) != 0 {
			t.Errorf("%s: a refused --tail reached the daemon: %q", verb, queries)
		}
	}
	for _, bad := range [][]string{{"--tail", "5", "--since", "1h"}, {"--tail", "5", "--follow"}} {
		if _, _, err := run(append([]string{"session", "events", "ses-1"}, bad...)...); exitCode(err) != exitUsage {
			t.Errorf("events %v: %v, want a usage error", bad, err)
		}
	}
}
