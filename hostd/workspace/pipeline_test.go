package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
)

// The session's names the tests use.
type CreateRequest = session.CreateRequest

// testWS is the manager and its workspace under one name: the
// workspace's methods and the manager's (Create, Exec, Restore) are both
// m's.
type testWS struct {
	*Service
	*session.Manager
}

// sandboxManager is a session manager on procbox with the built-in
// policy (sessiontest), and its workspace.
func sandboxManager(t *testing.T) testWS {
	t.Helper()
	m := sessiontest.New(t, sessiontest.Procbox())
	return testWS{New(m), m}
}

// fakeManager is a session manager on the fake backend (hypervisor/fake:
// the real guest agent in the test's process, no namespaces, no root)
// with the built-in policy (sessiontest), and its workspace. Its commands
// run on the host as the test's user, so the tests give them relative
// paths only.
func fakeManager(t *testing.T) testWS {
	t.Helper()
	m := sessiontest.New(t)
	return testWS{New(m), m}
}

// ledgerKinds is the kinds of session id's ledger, in order.
func ledgerKinds(t *testing.T, m testWS, id string) []string {
	t.Helper()
	es, err := m.Events(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Kind)
	}
	return out
}

// lastEntry is the data of the last entry of kind in session id's ledger.
func lastEntry(t *testing.T, m testWS, id, kind string) map[string]any {
	t.Helper()
	es, err := m.Events(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Kind == kind {
			var d map[string]any
			if err := json.Unmarshal(es[i].Data, &d); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no %s entry in %v", kind, ledgerKinds(t, m, id))
	return nil
}

// stepTrace records the steps the workspace's entries walk, per kind.
type stepTrace struct {
	mu    sync.Mutex
	steps map[session.CommandKind][]string
}

func traceSteps(m testWS) *stepTrace {
	tr := &stepTrace{steps: map[session.CommandKind][]string{}}
	m.TraceSteps(func(kind session.CommandKind, step string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.steps[kind] = append(tr.steps[kind], step)
	})
	return tr
}

// take returns the steps kind walked since the last take, and forgets them.
func (tr *stepTrace) take(kind session.CommandKind) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := strings.Join(tr.steps[kind], " ")
	delete(tr.steps, kind)
	return out
}

// TestWorkspacePipelineSteps: the workspace's entries (a git verb, a
// file write, delete and upload's completion) walk the core's pipeline
// (session.Manager.WalkVerb) through their named steps in order, and the
// command hooks see each of them with its kind and text. TestPipelineSteps
// in hostd/session holds the core's own entries. It runs on procbox, not
// on the fake backend: the fake runs commands on the host, where the git
// verbs would run git in the host's /workspace.
func TestWorkspacePipelineSteps(t *testing.T) {
	m := sandboxManager(t)
	tr := traceSteps(m)
	var seenMu sync.Mutex
	var seen []string
	m.AddCommandHook("watch", func(_ context.Context, c *session.Command) error {
		seenMu.Lock()
		defer seenMu.Unlock()
		seen = append(seen, string(c.Kind)+":"+c.Verb+":"+c.Text)
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	// The mini image may have no git: the verb then fails in run, which
	// still walks to record (a git verb is ledgered once git ran).
	m.GitStatus(ctx, "", s.ID, "")
	gitStatus := tr.take(session.CommandGit)
	m.GitCommit(ctx, "", s.ID, GitRequest{Message: "m"})
	gitCommit := tr.take(session.CommandGit)
	if _, err := m.WriteFile(ctx, "", s.ID, FileWrite{Path: "/workspace/f", ContentBase64: "aGk="}); err != nil {
		t.Fatal(err)
	}
	fileWrite := tr.take(session.CommandFile)
	if err := m.DeleteFile(ctx, "", s.ID, "/workspace/f", false); err != nil {
		t.Fatal(err)
	}
	fileDelete := tr.take(session.CommandFile)
	up, err := m.OpenUpload(ctx, "", s.ID, UploadRequest{Path: "/workspace/u", Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.UploadChunk(ctx, "", s.ID, up.ID, 0, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CompleteUpload(ctx, "", s.ID, up.ID); err != nil {
		t.Fatal(err)
	}
	upload := tr.take(session.CommandFile)
	// Completing it again answers at the gate, the upload being done.
	if _, err := m.CompleteUpload(ctx, "", s.ID, up.ID); err != nil {
		t.Fatal(err)
	}
	again := tr.take(session.CommandFile)
	// A refused one stops at the step that refuses: bad base64 at
	// validate, a session that is not there at load.
	m.WriteFile(ctx, "", s.ID, FileWrite{Path: "/workspace/f", ContentBase64: "!"})
	m.WriteFile(ctx, "", "ses-0000000000000000", FileWrite{Path: "/workspace/f", ContentBase64: "aGk="})
	refused := tr.take(session.CommandFile)
	for _, c := range []struct{ name, got, want string }{
		{"git status", gitStatus, "load hooks run record"},
		{"git commit", gitCommit, "validate load gate admit hooks run record usage"},
		{"file write", fileWrite, "validate load gate admit hooks run record"},
		{"file delete", fileDelete, "load gate hooks run record"},
		{"upload complete", upload, "load gate admit hooks run record"},
		{"upload complete again", again, "load gate"},
		{"refused writes", refused, "validate validate load"},
	} {
		if c.got != c.want {
			t.Errorf("%s walked %q, want %q", c.name, c.got, c.want)
		}
	}
	want := []string{"git:status:git status", "git:commit:git commit",
		"file:write:/workspace/f", "file:delete:/workspace/f", "file:upload:/workspace/u"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("the hook saw (-want +got):\n%s", diff)
	}
}

// TestWorkspaceHookRefuses runs on the fake backend (no root), with
// relative paths only. A file write refused by a command hook never
// reaches the guest and is ledgered as file.refused naming the hook; a
// git verb refused by it never starts git (git.refused); a hook's
// annotation lands in a file change's ledger entry.
func TestWorkspaceHookRefuses(t *testing.T) {
	m := fakeManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m.AddCommandHook("rewind", func(_ context.Context, c *session.Command) error {
		if strings.Contains(c.Text, "refuse-me") || c.Verb == "branch" {
			return errors.New("no point could be taken")
		}
		c.Annotate("point", 7)
		return nil
	})
	s, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	var hr *session.HookRefused
	if _, err := m.WriteFile(ctx, "", s.ID, FileWrite{Path: "/workspace/refuse-me", ContentBase64: "aGk="}); !errors.As(err, &hr) || hr.Hook != "rewind" || !errors.Is(err, ErrForbidden) {
		t.Errorf("file write: %v, want the hook's refusal (403)", err)
	}
	if e := lastEntry(t, m, s.ID, "file.refused"); e["command"] != "/workspace/refuse-me" || e["hook"] != "rewind" {
		t.Errorf("file.refused: %v", e)
	}
	if _, err := m.ReadFile(ctx, "", s.ID, "/workspace/refuse-me"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused write was written: %v", err)
	}
	if slices.Contains(ledgerKinds(t, m, s.ID), "file.write") {
		t.Errorf("a refused write is ledgered as written: %v", ledgerKinds(t, m, s.ID))
	}
	// One the hook lets through carries its note.
	if _, err := m.WriteFile(ctx, "", s.ID, FileWrite{Path: "/workspace/ok", ContentBase64: "aGk="}); err != nil {
		t.Fatal(err)
	}
	if e := lastEntry(t, m, s.ID, "file.write"); e["path"] != "/workspace/ok" || e["hooks"].(map[string]any)["point"] != float64(7) {
		t.Errorf("file.write without the hook's note: %v", e)
	}
	// A git verb refused by the hook never starts git.
	if _, err := m.GitBranch(ctx, "", s.ID, GitRequest{Name: "refuse-me"}); !errors.As(err, &hr) {
		t.Errorf("git branch: %v, want the hook's refusal", err)
	}
	if e := lastEntry(t, m, s.ID, "git.refused"); e["command"] != "git branch" {
		t.Errorf("git.refused: %v", e)
	}
	if slices.Contains(ledgerKinds(t, m, s.ID), "git.branch") {
		t.Errorf("a refused git verb is ledgered as run: %v", ledgerKinds(t, m, s.ID))
	}
}

// TestAttackFileRecordAfterDisconnect: a file write that reached the
// guest is ledgered even when its caller goes away as the record step
// starts (the caller's context is cancelled then), on the fake backend.
func TestAttackFileRecordAfterDisconnect(t *testing.T) {
	m := fakeManager(t)
	base, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	s, err := m.Create(base, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	m.TraceSteps(func(_ session.CommandKind, step string) {
		if step == session.StepRecord {
			cancel()
		}
	})
	if _, err := m.WriteFile(ctx, "", s.ID, FileWrite{Path: s.Workspace.Path + "/gone.txt", ContentBase64: "aGk="}); err != nil {
		t.Fatalf("write: %v", err)
	}
	m.TraceSteps(nil)
	if d := lastEntry(t, m, s.ID, "file.write"); d["path"] != s.Workspace.Path+"/gone.txt" {
		t.Errorf("the file write that happened is not ledgered as it was: %v", d)
	}
}

// TestRestoreWaitsForFileWrites: a file write (or delete, or upload
// chunk) in flight keeps a restore from replacing the machine under it
// (409 naming it), and lets it go once it is done; a fork, which leaves
// the machine as it is, goes ahead.
func TestRestoreWaitsForFileWrites(t *testing.T) {
	m := sandboxManager(t)
	ctx := context.Background()
	s, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Checkpoint(ctx, "", s.ID, -1, session.CheckpointRequest{Tag: "t1"}); err != nil {
		t.Fatal(err)
	}
	_, done, err := m.writeTarget(ctx, "", s.ID, "/workspace/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Restore(ctx, "", s.ID, -1, session.RestoreRequest{Tag: "t1"}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "file write") {
		t.Errorf("restore during a file write: %v, want 409 naming it", err)
	}
	if kids, err := m.Fork(ctx, "", s.ID, -1, session.ForkRequest{Count: 1}); err != nil {
		t.Errorf("fork during a file write: %v, want it to go ahead (the parent is not replaced)", err)
	} else {
		m.Delete(ctx, "", kids[0].ID)
	}
	_, wdone, err := m.machineForWrite(ctx, "", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	done()
	if _, err := m.Restore(ctx, "", s.ID, -1, session.RestoreRequest{Tag: "t1"}); !errors.Is(err, ErrConflict) {
		t.Errorf("restore during an upload chunk: %v, want 409", err)
	}
	wdone()
	if _, err := m.Restore(ctx, "", s.ID, -1, session.RestoreRequest{Tag: "t1"}); err != nil {
		t.Errorf("restore once the writes are done: %v", err)
	}
}
