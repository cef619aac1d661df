package api_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// The create-time probes of a read-only workspace and of an enforced
// execute list, reached with real guests that do not apply what was
// asked: the session is refused and nothing of it is left on the host.

// newProbeDaemon is a daemon on procbox with a policy engine, the given
// images and guest binary, and a backend that records its machines.
func newProbeDaemon(t *testing.T, images, guest string) *wsDaemon {
	t.Helper()
	var b *recordingBackend
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := daemontest.New(t, daemontest.WithToken(token), daemontest.WithImage(testutil.MiniImageName, images), daemontest.WithGuest(guest),
		daemontest.WithLogger(log), daemontest.WrapBackend(func(pb hypervisor.Backend) hypervisor.Backend {
			b = &recordingBackend{Backend: pb}
			return b
		}))
	if !b.Capabilities().Confinement {
		t.Skip("this kernel has no Landlock, so procbox reports no confinement and no probe runs")
	}
	return &wsDaemon{c: d.Client, url: d.URL, state: d.StateDir, backend: b, st: d.Store(), log: logs}
}

// refusedLeavesNothing checks that a refused create left no session
// record and that every machine it made is gone from the host: Wait
// returns, no machine directory, no cgroup in any hierarchy, no process
// in one.
func refusedLeavesNothing(t *testing.T, d *wsDaemon) {
	t.Helper()
	ctx := context.Background()
	if ss, err := d.c.ListAllSessions(ctx); err != nil || len(ss) != 0 {
		t.Errorf("the refused create left session records: %+v %v", ss, err)
	}
	made := d.backend.machines()
	if len(made) == 0 {
		t.Fatal("the refused create made no sandbox: the probe was never reached")
	}
	for _, m := range made {
		machineGone(t, d.state, m.ID())
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := m.Wait(wctx); err != nil {
			t.Errorf("machine %s: Wait: %v, want it stopped", m.ID(), err)
		}
		cancel()
	}
}

// machineGone checks that the procbox machine id left nothing behind: its
// directory, its agent's socket, a cgroup in any hierarchy, a process in
// one.
func machineGone(t *testing.T, state, id string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(state, "procbox", "machines", id)); !os.IsNotExist(err) {
		t.Errorf("machine %s: its directory is still there (%v)", id, err)
	}
	if socks, _ := filepath.Glob(filepath.Join(state, "procbox", "run", "*.sock")); len(socks) != 0 {
		t.Errorf("machine %s: agent sockets are left: %v", id, socks)
	}
	for _, cg := range procbox.LeftoverCgroups() {
		if strings.HasSuffix(cg, "/"+id) {
			t.Errorf("machine %s: cgroup %s is still there", id, cg)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "/"+id+"\n") {
			t.Errorf("machine %s: process %s is still in its cgroup", id, filepath.Base(filepath.Dir(p)))
		}
	}
}

// linkedWorkspaceImages is a copy of the mini image whose /workspace is a
// symbolic link to /tmp/ws. Landlock rules follow links to the directory
// they reach, so a read-only rule on /workspace lands inside /tmp, which
// every confined command may write: the guest cannot make this
// workspace read-only, and must say so.
func linkedWorkspaceImages(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// Hard links: only directories are new, and only the copy's root
	// directory is changed below.
	if out, err := exec.Command("cp", "-al", filepath.Join(testutil.MiniImages(t), testutil.MiniImageName), dir).CombinedOutput(); err != nil {
		t.Fatalf("copying the mini image: %v %s", err, out)
	}
	root, err := image.Store{Dir: dir}.Rootfs(testutil.MiniImageName)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "workspace")
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/tmp/ws", ws); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAttackReadOnlyWorkspaceThroughALink: a read-only workspace whose
// path is a link into /tmp. Before the guest compared where its paths
// lead, the probe passed and every command could write the "read-only"
// workspace through /tmp's rule; now the guest refuses the policy, the
// probe's failure branch refuses the session (409) and the sandbox is
// removed. The same image with a writable workspace still works, so the
// refusal is the read-only policy's.
func TestAttackReadOnlyWorkspaceThroughALink(t *testing.T) {
	d := newProbeDaemon(t, linkedWorkspaceImages(t), testutil.GuestBinary(t))
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Workspace: session.WorkspaceRequest{Mode: session.ModeReadOnly}})
	if err == nil {
		r, xerr := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo planted > /workspace/f && cat /tmp/ws/f"})
		d.c.DeleteSession(ctx, s.ID)
		t.Fatalf("a read-only workspace linked into /tmp was created (%s); a command wrote it: %+v %v", s.ID, r, xerr)
	}
	t.Logf("refused: %v", err)
	if status(err) != 409 || !strings.Contains(err.Error(), "cannot enforce a read-only workspace") || !strings.Contains(err.Error(), "/tmp") {
		t.Errorf("create: %v, want 409 saying the read-only workspace cannot be enforced, naming /tmp", err)
	}
	refusedLeavesNothing(t, d)
	// The image itself is fine for a writable workspace.
	w, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, w.ID)
	if r, err := d.c.Exec(ctx, w.ID, session.ExecRequest{Command: "echo ok > /workspace/f && cat /tmp/ws/f"}); err != nil || r.Stdout != "ok\n" {
		t.Errorf("a writable workspace on the linked image: %+v %v", r, err)
	}
}

// TestExecListProbeRefusesAnUnenforcingGuest: a guest built without
// execute lists (the paddock_guest_without_exec_lists tag, as a guest
// older than them would behave) runs the probe's command and reports
// no execute list. The create is refused (409 naming process.enforce)
// and nothing is left; the same guest still serves a session without
// the enforced list.
func TestExecListProbeRefusesAnUnenforcingGuest(t *testing.T) {
	d := newProbeDaemon(t, testutil.MiniImages(t), unenforcingGuest(t))
	ctx := context.Background()
	req := session.CreateRequest{Policy: &session.PolicyRequest{Process: &policy.ProcessRules{Allow: []string{"echo *", "cat *"}, Enforce: "exec"}}}
	s, err := d.c.CreateSession(ctx, req)
	if err == nil {
		d.c.DeleteSession(ctx, s.ID)
		t.Fatalf("a guest that does not enforce the execute list got session %s", s.ID)
	}
	t.Logf("refused: %v", err)
	if status(err) != 409 || !strings.Contains(err.Error(), `process.enforce "exec"`) || !strings.Contains(err.Error(), "did not enforce the execute list") {
		t.Errorf("create: %v, want 409 saying the sandbox did not enforce the execute list", err)
	}
	refusedLeavesNothing(t, d)
	w, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, w.ID)
	if r, err := d.c.Exec(ctx, w.ID, session.ExecRequest{Command: "echo ok"}); err != nil || r.Stdout != "ok\n" {
		t.Errorf("the same guest without an execute list: %+v %v", r, err)
	}
}

// unenforcingGuest builds paddock-guest with the
// paddock_guest_without_exec_lists tag, with the Makefile's flags for a
// static guest (about 10 s once the build cache has the rest).
func unenforcingGuest(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "paddock-guest")
	cmd := exec.Command("go", "build", "-tags", "netgo,osusergo,paddock_guest_without_exec_lists",
		"-ldflags", `-s -w -linkmode external -extldflags "-static"`, "-o", out, "./cmd/paddock-guest")
	cmd.Dir = testutil.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the guest without execute lists: %v\n%s", err, b)
	}
	return out
}
