package daemon_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/daemon/daemontest"
)

// TestSessionObjectLive drives the Go SDK's Session object through a real
// daemon on procbox: create, exec, a file written and read back and
// listed, a job started, read with a wait and killed, a checkpoint, a
// fork into 2 that hands back Session objects for the children, a
// promote of one child's change into the parent, a restore, an evaluate
// and a rollout from the session, and Close,
// after which the session is gone (and a second Close is quiet).
func TestSessionObjectLive(t *testing.T) {
	d := daemontest.New(t)
	c, ctx := d.Client, context.Background()

	s, err := c.NewSession(ctx, api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ID == "" || s.Info == nil || s.Info.ID != s.ID {
		t.Fatalf("new session: %+v", s)
	}
	ws := s.Info.Workspace.Path

	r, err := s.Exec(ctx, api.ExecRequest{Command: "echo hello; echo oops >&2; exit 3"})
	if err != nil || r.ExitCode != 3 || r.Stdout != "hello\n" || r.Stderr != "oops\n" {
		t.Fatalf("exec: %+v %v", r, err)
	}
	var out, errb strings.Builder
	if code, err := s.ExecStream(ctx, api.ExecRequest{Command: "echo streamed; exit 4"}, &out, &errb); err != nil || code != 4 || out.String() != "streamed\n" {
		t.Errorf("exec stream: %d %q %v", code, out.String(), err)
	}

	// Files: the write lands where an exec sees it, and comes back.
	f := s.Files()
	if _, err := f.Write(ctx, ws+"/dir/a.txt", []byte("from the sdk\n"), "0600"); err != nil {
		t.Fatal(err)
	}
	if got := daemontest.Sh(t, c, s.ID, "cat "+ws+"/dir/a.txt; stat -c %a "+ws+"/dir/a.txt"); got != "from the sdk\n600\n" {
		t.Errorf("the written file seen by exec: %q", got)
	}
	daemontest.Sh(t, c, s.ID, "echo by-exec > "+ws+"/dir/b.txt")
	if b, err := f.Read(ctx, ws+"/dir/b.txt"); err != nil || string(b) != "by-exec\n" {
		t.Errorf("read: %q %v", b, err)
	}
	l, err := f.List(ctx, ws+"/dir")
	if err != nil || l.Kind != "dir" || len(l.Entries) != 2 {
		t.Errorf("list: %+v %v", l, err)
	}
	if err := f.Delete(ctx, ws+"/dir/b.txt", false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(ctx, ws+"/dir/b.txt"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("read after delete: %v, want not_found", err)
	}

	// Jobs: one that echoes its stdin, then one killed.
	jobs := s.Jobs()
	j, err := jobs.Start(ctx, api.JobStart{Command: "read line; echo got $line", Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Stdin(ctx, j.ID, api.JobStdin{Text: "ping\n", Close: true}); err != nil {
		t.Fatal(err)
	}
	var got string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(got, "got ping") && time.Now().Before(deadline); {
		jr, err := jobs.Read(ctx, j.ID, 0, 0, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = jr.Output
	}
	if got != "got ping\n" {
		t.Errorf("job output %q, want got ping", got)
	}
	sleeper, err := jobs.Start(ctx, api.JobStart{Command: "sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Kill(ctx, sleeper.ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	// ExecStream ran as a job too, so the list has three.
	js, err := jobs.List(ctx)
	if err != nil || len(js) != 3 {
		t.Errorf("jobs: %+v %v", js, err)
	}
	for _, x := range js {
		if x.ID == sleeper.ID && (x.State != "killed" || x.Signal != "KILL") {
			t.Errorf("the killed job: %+v", x)
		}
	}

	// Checkpoint, fork into 2, promote one child's change.
	if _, err := s.Checkpoint(ctx, api.CheckpointRequest{Tag: "before"}); err != nil {
		t.Fatal(err)
	}
	kids, fr, err := s.ForkWith(ctx, api.ForkRequest{Count: 2})
	if err != nil || len(kids) != 2 || len(fr.Children) != 2 {
		t.Fatalf("fork: %v %+v %v", kids, fr, err)
	}
	for i, k := range kids {
		defer k.Close()
		if k.ID == s.ID || k.ID != fr.Children[i].ID || k.Info == nil || k.Client() != c {
			t.Errorf("child %d: %+v", i, k)
		}
		if b, err := k.Files().Read(ctx, ws+"/dir/a.txt"); err != nil || string(b) != "from the sdk\n" {
			t.Errorf("child %d sees %q %v, want the parent's file", i, b, err)
		}
	}
	if _, err := kids[0].Run(ctx, "echo winner > "+ws+"/won.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := kids[1].Run(ctx, "echo loser > "+ws+"/lost.txt"); err != nil {
		t.Fatal(err)
	}
	pr, err := kids[0].Promote(ctx, api.PromoteRequest{})
	if err != nil || len(pr.Applied) != 1 || pr.Applied[0] != "won.txt" {
		t.Fatalf("promote: %+v %v", pr, err)
	}
	if b, err := f.Read(ctx, ws+"/won.txt"); err != nil || string(b) != "winner\n" {
		t.Errorf("the parent after promote: %q %v", b, err)
	}
	if _, err := f.Read(ctx, ws+"/lost.txt"); err == nil {
		t.Error("the other child's file reached the parent")
	}

	// Restore takes the parent back to before the promote.
	if _, err := s.Restore(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(ctx, ws+"/won.txt"); err == nil {
		t.Error("won.txt is still there after the restore")
	}
	if evs, err := s.Events(ctx); err != nil || len(evs) == 0 {
		t.Errorf("events: %d %v", len(evs), err)
	}

	// Evaluate and Rollout fork the session themselves.
	ev, err := s.Evaluate(ctx, client.EvaluateRequest{Candidates: []string{"echo bad > " + ws + "/r", "echo ok > " + ws + "/r"}, Test: "grep -q ok " + ws + "/r"})
	if err != nil || ev.Parent != s.ID || len(ev.Results) != 2 || ev.Winner != 1 {
		t.Errorf("evaluate: %+v %v", ev, err)
	}
	ro, err := s.Rollout(ctx, client.RolloutRequest{Count: 2, Command: "echo run"})
	if err != nil || ro.Parent != s.ID || len(ro.Runs) != 2 || ro.Runs[0].StdoutTail != "run\n" || !ro.Runs[1].Deleted {
		t.Errorf("rollout: %+v %v", ro, err)
	}

	// A Session made from the id alone is the same session.
	if info, err := c.Session(s.ID).Refresh(ctx); err != nil || info.ID != s.ID {
		t.Errorf("refresh by id: %+v %v", info, err)
	}

	// Close deletes the child: it is gone, and Close again is quiet.
	if err := kids[1].Close(); err != nil {
		t.Fatal(err)
	}
	gone(t, c, kids[1].ID)
	if err := kids[1].Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	gone(t, c, s.ID)
}

// gone checks that session id was deleted: its record says so (the
// daemon keeps it, with the ledger, after DELETE) and an exec is refused.
func gone(t *testing.T, c *client.Client, id string) {
	t.Helper()
	info, err := c.GetSession(context.Background(), id)
	if err != nil || info.State != api.StateDeleted {
		t.Errorf("session %s after Close: %+v %v, want state deleted", id, info, err)
	}
	if _, err := c.Exec(context.Background(), id, api.ExecRequest{Command: "true"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("exec in the closed session %s: %v, want 409 conflict", id, err)
	}
}
