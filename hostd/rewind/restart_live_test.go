package rewind_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/internal/testutil"
)

// TestRewindAcrossRestartLive: the ring outlives a daemon restart. Rewind
// on, four execs (four points), the daemon stops leaving its sandboxes
// for the next one, and the newest point's snapshot is removed while no
// daemon runs. The next daemon on the state dir adopts the session: the
// ring lists the first three points as before, the fourth is dropped
// with a rewind.point_lost ledger entry, an undo restores the files as
// they were before the third exec, and the next exec takes rw-5 (the tag
// counter came back too). A clean stop that leaves the sandboxes keeps
// the points' snapshots; the session's deletion after the restart
// deletes them and the stored ring. A session whose sandbox died while
// no daemon ran is lost after the restart; its points stay until it is
// deleted, and then go.
func TestRewindAcrossRestartLive(t *testing.T) {
	state := t.TempDir()
	opts := []daemontest.Option{daemontest.WithImage(testutil.MiniImageName, testutil.MiniImages(t)), daemontest.WithStateDir(state)}
	d1 := daemontest.New(t, append(opts, daemontest.KeepSandboxes())...)
	c := d1.Client
	ctx := context.Background()
	s := newSession(t, c)
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true), MaxPoints: ptr(8)}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"mkdir -p /workspace && echo a > /workspace/a", "echo b > /workspace/b", "echo c > /workspace/c", "echo d > /workspace/d"} {
		mustExec(t, c, s.ID, cmd)
	}
	before, err := c.Rewind(ctx, s.ID)
	if err != nil || pointTags(before) != "rw-1,rw-2,rw-3,rw-4" {
		t.Fatalf("ring before the restart: %+v %v", before, err)
	}
	// A second session whose sandbox dies while no daemon runs: lost
	// after the restart, its two points stay until it is deleted.
	lost := newSession(t, c)
	if _, err := c.RewindConfig(ctx, lost.ID, api.RewindConfigRequest{Enabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, lost.ID, "true")
	mustExec(t, c, lost.ID, "true")
	if _, err := c.RewindPin(ctx, s.ID, "rw-1", true); err != nil {
		t.Fatal(err)
	}
	var snapID string
	for _, e := range ledgerOf(t, d1, s.ID) {
		var data struct {
			Tag        string `json:"tag"`
			SnapshotID string `json:"snapshot_id"`
		}
		if e.Kind == "rewind.point" && json.Unmarshal(e.Data, &data) == nil && data.Tag == "rw-4" {
			snapID = data.SnapshotID
		}
	}
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	if n := liveSnapshots(t, d1); n != 6 {
		t.Fatalf("%d point snapshots after a clean stop that leaves the sandboxes, want the 6 kept", n)
	}
	testutil.KillSandbox(t, lost.SandboxID)
	// While no daemon runs, the newest point's snapshot goes.
	dirs, _ := filepath.Glob(filepath.Join(state, "*", "snapshots", snapID))
	if snapID == "" || len(dirs) != 1 {
		t.Fatalf("rw-4's snapshot %q: found %v under %s", snapID, dirs, state)
	}
	if err := os.RemoveAll(dirs[0]); err != nil {
		t.Fatal(err)
	}

	d2 := daemontest.New(t, opts...)
	c = d2.Client
	after, err := c.Rewind(ctx, s.ID)
	if err != nil || pointTags(after) != "rw-1*,rw-2,rw-3" || !after.Config.Enabled || after.Config.MaxPoints != 8 {
		t.Fatalf("ring after the restart: %+v %v, want rw-1*,rw-2,rw-3 enabled with 8 slots", after, err)
	}
	for i, p := range after.Points {
		b := before.Points[i]
		if p.Tag != b.Tag || p.Command != b.Command || p.Trigger != b.Trigger || !p.CreatedAt.Equal(b.CreatedAt) || p.Memory != b.Memory {
			t.Errorf("point %d: %+v, was %+v", i, p, b)
		}
	}
	noted := 0
	for _, e := range ledgerOf(t, d2, s.ID) {
		if e.Kind == "rewind.point_lost" && strings.Contains(string(e.Data), `"tag":"rw-4"`) {
			noted++
		}
	}
	if noted != 1 {
		t.Errorf("%d rewind.point_lost entries for rw-4, want 1", noted)
	}
	if g, err := c.GetSession(ctx, lost.ID); err != nil || g.State != api.StateLost {
		t.Fatalf("the session whose sandbox died: %+v %v, want lost", g, err)
	}
	u, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{})
	if err != nil || u.Restored.Tag != "rw-3" {
		t.Fatalf("undo after the restart: %+v %v", u, err)
	}
	if got := mustExec(t, c, s.ID, "cat /workspace/a /workspace/b; ls /workspace").Stdout; got != "a\nb\na\nb\n" {
		t.Errorf("files after the undo: %q, want a and b only", got)
	}
	rw, err := c.Rewind(ctx, s.ID)
	if err != nil || pointTags(rw) != "rw-1*,rw-2,rw-5" {
		t.Errorf("ring after the undo and an exec: %+v %v, want rw-1*,rw-2,rw-5", rw, err)
	}
	if n := liveSnapshots(t, d2); n != 5 {
		t.Errorf("%d point snapshots, want 5 (rw-1, rw-2, rw-5, and the lost session's 2)", n)
	}
	// The session's deletion still deletes its points, and its stored ring.
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if n := liveSnapshots(t, d2); n != 2 {
		t.Errorf("%d point snapshots after the delete, want the lost session's 2", n)
	}
	if r, err := d2.Manager().Store().GetRewindRing(ctx, s.ID); err == nil {
		t.Errorf("stored ring after the delete: %d points", len(r.Points))
	}
	// The lost session's deletion deletes the points this daemon never
	// loaded.
	if err := c.DeleteSession(ctx, lost.ID); err != nil {
		t.Fatal(err)
	}
	if n := liveSnapshots(t, d2); n != 0 {
		t.Errorf("%d point snapshots after the lost session's delete, want 0", n)
	}
	if r, err := d2.Manager().Store().GetRewindRing(ctx, lost.ID); err == nil {
		t.Errorf("the lost session's stored ring after its delete: %d points", len(r.Points))
	}
}
