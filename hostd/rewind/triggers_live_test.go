package rewind_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

// TestRewindTriggersLive: the triggers choose what takes a point: with
// exec off and file and job on, a file write, a file delete and a job
// start each take one (their command reads write /path, delete /path and
// the job's line) and an exec takes none; an undo of the delete's point
// brings the file back.
func TestRewindTriggersLive(t *testing.T) {
	d := liveDaemon(t)
	c := d.Client
	ctx := context.Background()
	s := newSession(t, c)
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true), Triggers: []string{"job", "file", "file"}}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, s.ID, "echo not a point > /workspace/x")
	w := api.FileWrite{Path: "/workspace/notes.txt", ContentBase64: base64.StdEncoding.EncodeToString([]byte("keep me\n"))}
	if err := c.Call(ctx, "PUT", s.ID, "/files/content", nil, w, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "DELETE", s.ID, "/files", url.Values{"path": {"/workspace/notes.txt"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	var job api.Job
	if err := c.Call(ctx, "POST", s.ID, "/jobs", nil, api.JobStart{Command: "echo job"}, &job); err != nil {
		t.Fatal(err)
	}
	rw, err := c.Rewind(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range rw.Points {
		got = append(got, p.Trigger+": "+p.Command)
	}
	want := "file: write /workspace/notes.txt|file: delete /workspace/notes.txt|job: echo job"
	if strings.Join(got, "|") != want || strings.Join(rw.Config.Triggers, ",") != "file,job" {
		t.Fatalf("points %q (triggers %v), want %q", strings.Join(got, "|"), rw.Config.Triggers, want)
	}
	// An undo is a restore: refused while a job runs (it would replace
	// the machine under it), and nothing is dropped.
	var long api.Job
	if err := c.Call(ctx, "POST", s.ID, "/jobs", nil, api.JobStart{Command: "sleep 30"}, &long); err != nil {
		t.Fatal(err)
	}
	_, err = c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{To: rw.Points[1].Tag})
	if e := clientErr(err); e == nil || e.Status != 409 || !strings.Contains(e.Message, "jobs") {
		t.Errorf("undo while a job runs: %v", err)
	}
	if err := c.Call(ctx, "DELETE", s.ID, "/jobs/"+long.ID, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if rw2, err := c.Rewind(ctx, s.ID); err != nil || len(rw2.Points) != 4 {
		t.Errorf("after the refused undo: %q %v (the sleep's start is the 4th point)", pointTags(rw2), err)
	}
	// Let the jobs end, then go back to before the delete.
	waitJobsDone(t, d, s.ID)
	if _, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{To: rw.Points[1].Tag}); err != nil {
		t.Fatal(err)
	}
	if r := mustExec(t, c, s.ID, "cat /workspace/notes.txt"); r.Stdout != "keep me\n" {
		t.Errorf("after undo of the delete: %q", r.Stdout)
	}
}

func waitJobsDone(t *testing.T, d *daemontest.Daemon, id string) {
	t.Helper()
	for range 100 {
		var out struct{ Jobs []api.Job }
		if err := d.Client.Call(context.Background(), "GET", id, "/jobs", nil, nil, &out); err != nil {
			t.Fatal(err)
		}
		running := false
		for _, j := range out.Jobs {
			running = running || j.State == "running"
		}
		if !running {
			return
		}
		mustExec(t, d.Client, id, "sleep 0.05")
	}
	t.Fatal("the job did not end")
}

// TestRewindConcurrentExecsLive: execs that overlap on one session are
// never refused because another's point is being taken (a point lets
// commands through the work slot); each one either took a point or is
// ledgered rewind.skipped, and its command ran.
func TestRewindConcurrentExecsLive(t *testing.T) {
	d := liveDaemon(t)
	c := d.Client
	ctx := context.Background()
	s := newSession(t, c)
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true), MaxPoints: ptr(50)}); err != nil {
		t.Fatal(err)
	}
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Exec(ctx, s.ID, api.ExecRequest{Command: fmt.Sprintf("echo %d > /workspace/c%d; sleep 0.2", i, i)})
			if err == nil && r.ExitCode != 0 {
				err = fmt.Errorf("exit %d", r.ExitCode)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("an exec beside others with rewind on: %v", err)
		}
	}
	k := kinds(t, d, s.ID)
	if k["exec"] != n || k["rewind.point"]+k["rewind.skipped"] != n || k["rewind.point"] == 0 {
		t.Errorf("ledger: %v, want %d execs, each with a point or a skip", k, n)
	}
	t.Logf("%d points, %d skipped", k["rewind.point"], k["rewind.skipped"])
	if r := mustExec(t, c, s.ID, "ls /workspace | grep -c '^c'"); strings.TrimSpace(r.Stdout) != fmt.Sprint(n) {
		t.Errorf("files written: %q", r.Stdout)
	}
}

// failing makes a machine's snapshots fail while fail is set.
type failing struct {
	hypervisor.Backend
	fail *atomic.Bool
}

func (b failing) Create(ctx context.Context, spec hypervisor.MachineSpec) (hypervisor.Machine, error) {
	m, err := b.Backend.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return failingMachine{m, b.fail}, nil
}

type failingMachine struct {
	hypervisor.Machine
	fail *atomic.Bool
}

func (m failingMachine) Checkpoint(ctx context.Context, tag string, memory bool) (hypervisor.Snapshot, error) {
	if m.fail.Load() {
		return hypervisor.Snapshot{}, errors.New("injected: the snapshot failed")
	}
	return m.Machine.Checkpoint(ctx, tag, memory)
}

// TestRewindCaptureFailedLive: a point whose snapshot fails does not stop
// the command: it runs, and the ledger says rewind.capture_failed with
// the reason; the next one that works is a point again.
func TestRewindCaptureFailedLive(t *testing.T) {
	fail := &atomic.Bool{}
	d := daemontest.New(t, daemontest.WithImage(testutil.MiniImageName, testutil.MiniImages(t)),
		daemontest.WrapBackend(func(b hypervisor.Backend) hypervisor.Backend { return failing{b, fail} }))
	c := d.Client
	ctx := context.Background()
	s := newSession(t, c)
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if r := mustExec(t, c, s.ID, "echo ran > /workspace/r && cat /workspace/r"); r.Stdout != "ran\n" {
		t.Errorf("the exec whose point failed: %q", r.Stdout)
	}
	fail.Store(false)
	mustExec(t, c, s.ID, "true")
	var failed bool
	for _, e := range ledgerOf(t, d, s.ID) {
		if e.Kind == "rewind.capture_failed" && strings.Contains(string(e.Data), "injected: the snapshot failed") {
			failed = true
		}
	}
	rw, err := c.Rewind(ctx, s.ID)
	if !failed || err != nil || pointTags(rw) != "rw-2" {
		t.Errorf("capture_failed ledgered: %v; points %q %v", failed, pointTags(rw), err)
	}
}

// TestRewindRefusedTakesNoPointLive: the hook runs after judge and gate,
// so a command the process policy refuses takes no point, and neither
// does a bisect whose test the policy refuses (403, nothing restored).
func TestRewindRefusedTakesNoPointLive(t *testing.T) {
	d := liveDaemon(t)
	c := d.Client
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateRequest{TTLSeconds: 900,
		Policy: &api.PolicyRequest{Process: &api.ProcessRules{Allow: []string{"echo *", "true"}, Deny: []string{"rm *"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, s.ID, "echo allowed")
	if _, err := c.Exec(ctx, s.ID, api.ExecRequest{Command: "rm -rf /workspace"}); status(err) != 403 {
		t.Fatalf("a denied exec: %v", err)
	}
	mustExec(t, c, s.ID, "true")
	_, err = c.RewindBisect(ctx, s.ID, api.RewindBisectRequest{Test: "rm -f /workspace/x"})
	if status(err) != 403 {
		t.Errorf("a bisect whose test the policy denies: %v", err)
	}
	rw, err := c.Rewind(ctx, s.ID)
	if err != nil || pointTags(rw) != "rw-1,rw-2" || rw.Points[1].Command != "true" {
		t.Errorf("points: %q %v, want one per allowed exec", pointTags(rw), err)
	}
	if k := kinds(t, d, s.ID); k["restore"] != 0 || k["rewind.bisect"] != 0 || k["exec.refused"] != 2 {
		t.Errorf("ledger: %v", k)
	}
}

// liveSnapshots counts the procbox snapshots under the daemon's state dir
// that are not deleted.
func liveSnapshots(t *testing.T, d *daemontest.Daemon) int {
	t.Helper()
	metas, err := filepath.Glob(filepath.Join(d.StateDir, "procbox", "snapshots", "*", "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range metas {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // collected meanwhile
		}
		var meta struct{ Deleted bool }
		if json.Unmarshal(raw, &meta) == nil && !meta.Deleted {
			n++
		}
	}
	return n
}

// TestRewindSnapshotsGoLive: a point's snapshot is deleted when the ring
// evicts it, when an undo drops it and when the session is deleted, so
// the ring holds no more disk than its points.
func TestRewindSnapshotsGoLive(t *testing.T) {
	d := liveDaemon(t)
	c := d.Client
	ctx := context.Background()
	s := newSession(t, c)
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true), MaxPoints: ptr(3)}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		mustExec(t, c, s.ID, fmt.Sprintf("echo %d > /workspace/n", i))
	}
	if n := liveSnapshots(t, d); n != 3 {
		t.Errorf("%d live snapshots for a ring of 3 after 6 execs", n)
	}
	if _, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{Steps: 2}); err != nil {
		t.Fatal(err)
	}
	if n := liveSnapshots(t, d); n != 1 {
		t.Errorf("%d live snapshots after an undo of 2 of 3 points", n)
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if n := liveSnapshots(t, d); n != 0 {
		t.Errorf("%d live snapshots after the session was deleted", n)
	}
}

// TestRewindExecStreamLive: exec/stream is an exec to the triggers: it
// takes a point, and an undo of it puts the file it removed back.
func TestRewindExecStreamLive(t *testing.T) {
	d := liveDaemon(t)
	c := d.Client
	ctx := context.Background()
	s := newSession(t, c)
	mustExec(t, c, s.ID, "echo kept > /workspace/k")
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if code, err := c.ExecStream(ctx, s.ID, api.ExecRequest{Command: "rm /workspace/k && echo gone"}, &out, &out); err != nil || code != 0 || out.String() != "gone\n" {
		t.Fatalf("exec/stream: %d %q %v", code, out.String(), err)
	}
	rw, err := c.Rewind(ctx, s.ID)
	if err != nil || len(rw.Points) != 1 || rw.Points[0].Trigger != "exec" || rw.Points[0].Command != "rm /workspace/k && echo gone" {
		t.Fatalf("the stream's point: %+v %v", rw, err)
	}
	waitJobsDone(t, d, s.ID)
	if _, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{To: rw.Points[0].Tag}); err != nil {
		t.Fatal(err)
	}
	if r := mustExec(t, c, s.ID, "cat /workspace/k"); r.Stdout != "kept\n" {
		t.Errorf("after undo of the stream: %q", r.Stdout)
	}
}

// TestRewindGitTriggerLive: with the git trigger a commit takes a point
// (its command reads git commit) and a status does not; an undo of the
// commit's point puts the repository back to before it.
func TestRewindGitTriggerLive(t *testing.T) {
	images, _ := testutil.DebianImages(t)
	d := daemontest.New(t, daemontest.WithImage(testutil.DebianImageName, images))
	c := d.Client
	ctx := context.Background()
	s := newSession(t, c)
	r, err := c.Exec(ctx, s.ID, api.ExecRequest{Command: "set -e; cd /workspace; git init -q -b main .; echo one > a.txt; " +
		"git add a.txt; git -c user.name=t -c user.email=t@example.com commit -qm one; echo two >> a.txt; git add a.txt", TimeoutSeconds: 60})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("set up the repository: %+v %v", r, err)
	}
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true), Triggers: []string{"git"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "GET", s.ID, "/git/status", url.Values{"repo": {"/workspace"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	var res struct{ Commit string }
	if err := c.Call(ctx, "POST", s.ID, "/git/commit", nil, map[string]any{"repo": "/workspace", "message": "two"}, &res); err != nil || len(res.Commit) != 40 {
		t.Fatalf("commit: %+v %v", res, err)
	}
	rw, err := c.Rewind(ctx, s.ID)
	if err != nil || len(rw.Points) != 1 || rw.Points[0].Trigger != "git" || rw.Points[0].Command != "git commit" {
		t.Fatalf("points after a status and a commit: %+v %v", rw, err)
	}
	if _, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{}); err != nil {
		t.Fatal(err)
	}
	if r := mustExec(t, c, s.ID, "cd /workspace && git log --format=%s"); r.Stdout != "one\n" {
		t.Errorf("after undo of the commit, the log reads %q", r.Stdout)
	}
}
