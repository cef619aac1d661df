package api_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
)

const token = "pdk_test_token_0123456789"

// daemon runs the real thing behind httptest: SQLite store, ledger,
// procbox sandboxes.
func daemon(t *testing.T) (*client.Client, string) {
	t.Helper()
	testutil.RequiresRoot(t)
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	led := ledger.New(st)
	b, err := procbox.New(hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mgr := session.New(session.Config{Store: st, Ledger: led, Backend: b, DefaultImage: testutil.MiniImageName})
	t.Cleanup(func() { mgr.Shutdown(context.Background()) })
	srv := httptest.NewServer(api.New(mgr, sha256.Sum256([]byte(token)), nil))
	t.Cleanup(srv.Close)
	return client.New(srv.URL, token), srv.URL
}

func status(err error) int {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// TestWalkthrough is the 60-second walkthrough, through the API, on a
// real sandbox.
func TestWalkthrough(t *testing.T) {
	c, _ := daemon(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, session.CreateRequest{Agent: "claude-code", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if s.State != session.StateRunning || s.Workspace.Path != "/workspace" || s.Revision < 1 {
		t.Errorf("created: %+v", s)
	}
	r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "uname -s && mkdir -p /workspace/demo && echo hi > /workspace/demo/a.txt"})
	if err != nil || r.ExitCode != 0 || r.Stdout != "Linux\n" {
		t.Fatalf("exec: %+v %v", r, err)
	}
	cp, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "before-change"})
	if err != nil || cp.Tag != "before-change" {
		t.Fatalf("checkpoint: %+v %v", cp, err)
	}
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "before-change"}); status(err) != 409 {
		t.Errorf("duplicate tag: %v, want 409", err)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo changed > /workspace/demo/a.txt; echo new > /workspace/b.txt"}); err != nil {
		t.Fatal(err)
	}
	a, err := c.Artifacts(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.Added, ",") != "b.txt,demo,demo/a.txt" || len(a.Modified) != 0 {
		t.Errorf("artifacts: added %v modified %v deleted %v", a.Added, a.Modified, a.Deleted)
	}
	if _, err := c.Restore(ctx, s.ID, -1, "before-change"); err != nil {
		t.Fatal(err)
	}
	r, err = c.Exec(ctx, s.ID, session.ExecRequest{Command: "cat demo/a.txt; test -e b.txt && echo b-exists; true"})
	if err != nil || r.Stdout != "hi\n" {
		t.Errorf("after restore: %+v %v", r, err)
	}
	if _, err := c.Restore(ctx, s.ID, -1, "nope"); status(err) != 404 {
		t.Errorf("restore of an unknown tag: %v, want 404", err)
	}
	got, err := c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx, s.ID, got.Revision-1, session.CheckpointRequest{Tag: "stale"}); status(err) != 412 {
		t.Errorf("stale If-Match: %v, want 412", err)
	}
	kids, err := c.Fork(ctx, s.ID, -1, 2)
	if err != nil || len(kids) != 2 {
		t.Fatalf("fork: %v %v", kids, err)
	}
	for i, k := range kids {
		r, err := c.Exec(ctx, k.ID, session.ExecRequest{Command: "cat demo/a.txt"})
		if err != nil || r.Stdout != "hi\n" || k.Parent != s.ID {
			t.Errorf("child %d: %+v %v", i, r, err)
		}
		if err := c.DeleteSession(ctx, k.ID); err != nil {
			t.Error(err)
		}
	}
	es, err := c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind)
	}
	want := "session.create,exec,checkpoint,exec,restore,exec,fork"
	if strings.Join(kinds, ",") != want {
		t.Errorf("timeline %v, want %s", kinds, want)
	}
	list, err := c.ListSessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != s.ID {
		t.Errorf("list after deleting the children: %v %v", list, err)
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Errorf("second delete: %v, want 204", err)
	}
	if _, err := c.GetSession(ctx, s.ID); status(err) != 404 {
		t.Errorf("get after delete: %v, want 404", err)
	}
}

func TestRefusals(t *testing.T) {
	c, url := daemon(t)
	ctx := context.Background()
	if _, err := client.New(url, "wrong-token-0000000").ListSessions(ctx); status(err) != 401 {
		t.Errorf("wrong token: %v, want 401", err)
	}
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{"unknown field", `{"agent":"a","color":"red"}`, 400},
		{"bad json", `{`, 400},
		{"bad agent", `{"agent":"a b"}`, 400},
		{"ttl too long", `{"ttl_seconds":99999999}`, 400},
		{"workspace climbs", `{"workspace":{"path":"/a/../etc"}}`, 400},
		{"unknown image", `{"runtime":{"image":"nope"}}`, 400},
		{"body too large", `{"agent":"` + strings.Repeat("a", 2<<20) + `"}`, 413},
	} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/agents/sessions", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	if _, err := c.Exec(ctx, "ses-missing", session.ExecRequest{Command: "true"}); status(err) != 404 {
		t.Errorf("exec on a missing session: %v, want 404", err)
	}
	s, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "  "}); status(err) != 400 {
		t.Errorf("empty command: %v, want 400", err)
	}
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "../x"}); status(err) != 400 {
		t.Errorf("bad tag: %v, want 400", err)
	}
	mem := true
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "m", Memory: &mem}); status(err) != 409 {
		t.Errorf("memory checkpoint without support: %v, want 409", err)
	}
	if _, err := c.Fork(ctx, s.ID, -1, 33); status(err) != 400 {
		t.Errorf("fork 33: %v, want 400", err)
	}
}
