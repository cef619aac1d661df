package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCLISessionBudget: session run --budget (inline and @FILE), a
// refusal past it (403, exit code 5, naming the limit), and usage beside
// the limits in session get and ls.
func TestCLISessionBudget(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	out, se, code := pd("--json", "session", "run", "--budget", `{"max_execs": 1, "max_children": 2}`)
	var s struct {
		ID     string
		Budget map[string]int64
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || s.Budget["max_execs"] != 1 || s.Budget["max_children"] != 2 {
		t.Fatalf("run --budget: %d %q %q", code, out, se)
	}
	defer pd("session", "rm", s.ID)
	if _, _, code := pd("session", "exec", s.ID, "--", "true"); code != 0 {
		t.Fatalf("first exec: %d", code)
	}
	if _, se, code := pd("session", "exec", s.ID, "--", "true"); code != exitForbidden || !strings.Contains(se, "max_execs") || !strings.Contains(se, "1 of 1") {
		t.Errorf("exec past max_execs: code %d %q, want %d naming the limit", code, se, exitForbidden)
	}
	out, _, _ = pd("session", "get", s.ID)
	for _, re := range []string{`(?m)^execs\s+1\s+1$`, `(?m)^fork children\s+0\s+2$`, `(?m)^jobs\s+0\s+-$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("session get does not show %s:\n%s", re, out)
		}
	}
	if out, _, _ := pd("session", "ls"); !strings.Contains(out, "EXECS") || !regexp.MustCompile(s.ID+`.*\s1/1\s`).MatchString(out) {
		t.Errorf("session ls does not show execs against the limit:\n%s", out)
	}
	file := filepath.Join(t.TempDir(), "budget.json")
	os.WriteFile(file, []byte(`{"max_jobs": 3}`), 0o644)
	out, _, code = pd("--json", "session", "run", "--budget", "@"+file)
	var s2 struct {
		ID     string
		Budget map[string]int64
	}
	if json.Unmarshal([]byte(out), &s2); code != 0 || s2.Budget["max_jobs"] != 3 {
		t.Errorf("run --budget @FILE: %d %q", code, out)
	}
	pd("session", "rm", s2.ID)
	for _, bad := range []string{`{"max_exec": 1}`, `{"max_execs": -1}`, `[1]`, "@" + filepath.Join(t.TempDir(), "none.json")} {
		if _, se, code := pd("session", "run", "--budget", bad); code != exitUsage {
			t.Errorf("--budget %s: code %d %q, want %d", bad, code, se, exitUsage)
		}
	}
}

// TestCLIServeInterruptedFork kills a real daemon (SIGKILL) in the middle
// of a fork (held there by the test-only fork-pause hook, after its
// marker is written): the next daemon shows interrupted_op on the
// session, ledgers lifecycle.interrupted once, keeps the session usable,
// and clears the report when a checkpoint completes. The hook itself is
// refused outside test mode.
func TestCLIServeInterruptedFork(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	hooked := append(append([]string(nil), env...), "PADDOCK_TEST_HOOKS=fork-pause:60s")
	refused := exec.Command(bin, "--state-dir", state, "serve", "--listen", addr)
	refused.Env = hooked
	if out, err := refused.CombinedOutput(); err == nil || refused.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), "PADDOCK_TEST_MODE") {
		t.Fatalf("serve with test hooks outside test mode: %v %s", err, out)
	}
	srv := startServe(t, bin, state, addr, append(hooked, "PADDOCK_TEST_MODE=1"))
	pd := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, env, nil, args...)
	}
	out, _, _ := pd("--json", "session", "run", "--budget", `{"max_children": 4}`)
	var s struct{ ID string }
	if json.Unmarshal([]byte(out), &s); s.ID == "" {
		t.Fatalf("session run: %q", out)
	}
	pd("session", "exec", s.ID, "--", "echo before > /workspace/f")
	forked := make(chan int, 1)
	var forkErr atomic.Value
	go func() {
		// The probe below is a file write, which holds the session's
		// work slot for a moment: a fork that starts just then is
		// refused (409, commands running) and is simply asked again.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, se, code := runCLI(t, bin, env, nil, "session", "fork", s.ID, "--count", "2")
			forkErr.Store(se)
			if code == exitConflict && strings.Contains(se, "commands are running") && time.Now().Before(deadline) {
				continue
			}
			forked <- code
			return
		}
	}()
	// The fork holds the session once its marker is written. The probe
	// is a file write, not a command: a command in flight would make the
	// fork refuse to start.
	probe := filepath.Join(t.TempDir(), "probe")
	os.WriteFile(probe, []byte("x"), 0o644)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// The session is held (409) a moment before the marker is on
		// disk; the test hook's log line comes after it.
		_, se, code := pd("session", "put", s.ID, probe, "/tmp/probe")
		if code == exitConflict && strings.Contains(se, "fork is in progress") &&
			strings.Contains(serveLogs(srv), "pausing a lifecycle operation after its marker") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fork never held the session (last write: %d %q; the fork said %q)\n%s", code, se, forkErr.Load(), serveLogs(srv))
		}
	}
	srv.Process.Kill()
	srv.Wait()
	if code := <-forked; code == 0 {
		t.Errorf("the fork reported success though its daemon was killed")
	}

	srv = startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)
	type rec struct {
		State         string
		InterruptedOp *struct {
			Op        string    `json:"op"`
			StartedAt time.Time `json:"started_at"`
		} `json:"interrupted_op"`
		Usage    struct{ Children int64 }
		Children []string
	}
	get := func() rec {
		t.Helper()
		out, _, code := pd("--json", "session", "get", s.ID)
		var r rec
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
			t.Fatalf("session get: %d %q", code, out)
		}
		return r
	}
	for range 3 {
		r := get()
		if r.State != "running" || r.InterruptedOp == nil || r.InterruptedOp.Op != "fork" || time.Since(r.InterruptedOp.StartedAt) > 5*time.Minute {
			t.Fatalf("after the crash: %+v %+v", r, r.InterruptedOp)
		}
		if r.Usage.Children != 0 || len(r.Children) != 0 {
			t.Errorf("the interrupted fork counted children: %+v %v", r.Usage, r.Children)
		}
	}
	if out, _, _ := pd("session", "get", s.ID); !strings.Contains(out, "interrupted: a fork started") {
		t.Errorf("session get does not say the fork was interrupted:\n%s", out)
	}
	interrupted := func() int {
		t.Helper()
		out, _, _ := pd("--json", "session", "timeline", s.ID)
		var es []struct{ Kind string }
		json.Unmarshal([]byte(out), &es)
		n := 0
		for _, e := range es {
			if e.Kind == "lifecycle.interrupted" {
				n++
			}
		}
		return n
	}
	if n := interrupted(); n != 1 {
		t.Errorf("lifecycle.interrupted ledgered %d times, want once", n)
	}
	// It reports, it does not repair: the adopted session still works.
	if out, _, code := pd("session", "exec", s.ID, "--", "cat /workspace/f"); code != 0 || out != "before\n" {
		t.Errorf("exec after the crash: %d %q", code, out)
	}
	if _, se, code := pd("session", "checkpoint", s.ID, "--tag", "after-crash"); code != 0 {
		t.Fatalf("checkpoint: %d %q", code, se)
	}
	if r := get(); r.InterruptedOp != nil {
		t.Errorf("a completed checkpoint did not clear the report: %+v", r.InterruptedOp)
	}
	if n := interrupted(); n != 1 {
		t.Errorf("lifecycle.interrupted ledgered %d times after the clear, want once", n)
	}
	// The fork now goes through, and the child gets what is left.
	out, se, code := pd("--json", "session", "fork", s.ID, "--count", "1")
	var fr struct {
		Children []struct {
			ID     string
			Budget map[string]int64
		}
	}
	json.Unmarshal([]byte(out), &fr)
	kids := fr.Children
	if code != 0 || len(kids) != 1 || kids[0].Budget["max_children"] != 3 {
		t.Errorf("fork after the crash: %d %q %q", code, out, se)
	}
	for _, k := range kids {
		pd("session", "rm", k.ID)
	}
	if out, code := runLedgerVerify(t, bin, env, state, s.ID); code != 0 || !strings.Contains(out, "ok:") {
		t.Errorf("ledger verify: %d %q", code, out)
	}
	pd("session", "rm", s.ID)
}

func runLedgerVerify(t *testing.T, bin string, env []string, state, id string) (string, int) {
	t.Helper()
	out, _, code := runCLI(t, bin, env, nil, "--state-dir", state, "ledger", "verify", id)
	return out, code
}
