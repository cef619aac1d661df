package workspace

import (
	"context"
	"errors"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/session"
)

// TestWorkspaceHangupLedgered: a caller that hangs up as its file write,
// file delete or upload completion reaches the guest cannot change the
// workspace with no ledger entry. The call may have done its work (the
// agent does not stop when the connection drops), so, as an exec cut off
// that way, it is ledgered as the verb's entry (file.write, file.delete,
// file.upload) with interrupted and the error. A command hook stands in
// for the hang-up: it cancels the caller's context just before the run
// step. The agent's own refusal (a 4xx: a delete of a missing file) did
// nothing and is not ledgered. It runs on the fake backend.
func TestWorkspaceHangupLedgered(t *testing.T) {
	m := fakeManager(t)
	var hangUp context.CancelFunc // set only around the hung-up calls
	m.AddCommandHook("hangup", func(_ context.Context, c *session.Command) error {
		if hangUp != nil {
			hangUp()
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	ws := s.Workspace.Path
	// What the hung-up delete and completion act on.
	if _, err := m.WriteFile(ctx, "", s.ID, FileWrite{Path: ws + "/doomed", ContentBase64: "aGk="}); err != nil {
		t.Fatal(err)
	}
	up, err := m.OpenUpload(ctx, "", s.ID, UploadRequest{Path: ws + "/uploaded", Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.UploadChunk(ctx, "", s.ID, up.ID, 0, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	hungUp := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		cctx, c := context.WithCancel(ctx)
		defer c()
		hangUp = c
		defer func() { hangUp = nil }()
		if err := call(cctx); err == nil {
			t.Errorf("%s went through a hung-up call", what)
		}
	}
	hungUp("the write", func(ctx context.Context) error {
		_, err := m.WriteFile(ctx, "", s.ID, FileWrite{Path: ws + "/./written", ContentBase64: "aGk="})
		return err
	})
	hungUp("the delete", func(ctx context.Context) error {
		return m.DeleteFile(ctx, "", s.ID, ws+"/doomed", false)
	})
	hungUp("the completion", func(ctx context.Context) error {
		_, err := m.CompleteUpload(ctx, "", s.ID, up.ID)
		return err
	})
	interrupted := func(kind string, want map[string]any) {
		t.Helper()
		e := lastEntry(t, m, s.ID, kind)
		for k, v := range want {
			if e[k] != v {
				t.Errorf("%s: %s is %v, want %v (entry %v)", kind, k, e[k], v, e)
			}
		}
		if e["interrupted"] != true || e["error"] == "" || e["error"] == nil {
			t.Errorf("%s of the hung-up call is not marked interrupted with its error: %v", kind, e)
		}
	}
	interrupted("file.write", map[string]any{"path": ws + "/written", "size": float64(2)})
	interrupted("file.delete", map[string]any{"path": ws + "/doomed"})
	interrupted("file.upload", map[string]any{"upload": up.ID, "path": ws + "/uploaded", "size": float64(2)})

	// The agent's refusal did nothing: no entry.
	before := len(ledgerKinds(t, m, s.ID))
	if err := m.DeleteFile(ctx, "", s.ID, ws+"/never-was", false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete of a missing file: %v, want 404", err)
	}
	if kinds := ledgerKinds(t, m, s.ID); len(kinds) != before {
		t.Errorf("the agent's refusal was ledgered: %v", kinds[before:])
	}
}
