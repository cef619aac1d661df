package session_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/hypervisor/qemu"
	"paddock.dev/paddock/internal/testutil"
)

// TestSessionsOnTwoBackends runs one daemon (session manager) with procbox
// as its default and qemu enabled beside it: a create that names no
// backend gets a procbox sandbox, runtime.backend "qemu" a virtual
// machine with its own kernel, an unknown name is 400 listing what is
// enabled; a qemu session's checkpoint files go with the session; and
// when the daemon lets go (Detach), both sandboxes run on and the next
// daemon adopts them, the VM with its files and hostname.
func TestSessionsOnTwoBackends(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), AdoptLeftovers: true}
	open := func() (*session.Manager, func()) {
		pb, err := procbox.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		qb, err := qemu.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if c := qb.Capabilities(); !c.Available {
			pb.Close()
			t.Skipf("qemu cannot run here: %s", c.Reason)
		}
		m := session.New(session.Config{Store: st, Ledger: ledger.New(st), Backend: pb, Backends: []hypervisor.Backend{qb},
			DefaultImage: testutil.MiniImageName})
		return m, func() { qb.Close(); pb.Close() }
	}
	m1, close1 := open()
	defer func() { m1.Shutdown(ctx); close1() }()

	if bs := m1.Backends(); len(bs) != 2 || bs[0].Name != "procbox" || !bs[0].Default || bs[1].Name != "qemu" || bs[1].Default || bs[1].Capabilities.Isolation != "vm" {
		t.Errorf("backends: %+v", bs)
	}
	_, err = m1.Create(ctx, "", session.CreateRequest{Runtime: session.Runtime{Backend: "firecracker"}})
	if !errors.Is(err, session.ErrBadRequest) || !strings.Contains(err.Error(), "enabled: procbox, qemu") {
		t.Errorf("unknown backend: %v", err)
	}

	host, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	kernel := func(id string) string {
		t.Helper()
		res, err := m1.Exec(ctx, "", id, session.ExecRequest{Command: "uname -r"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("uname in %s: %v %+v", id, err, res)
		}
		return strings.TrimSpace(res.Stdout)
	}
	pbs, err := m1.Create(ctx, "", session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if pbs.Backend != "procbox" || pbs.Runtime.Backend != "procbox" || pbs.Capabilities.Isolation != "namespaces" {
		t.Errorf("default create: backend %q runtime.backend %q isolation %q", pbs.Backend, pbs.Runtime.Backend, pbs.Capabilities.Isolation)
	}
	if k := kernel(pbs.ID); k != strings.TrimSpace(string(host)) {
		t.Errorf("a procbox sandbox runs kernel %q, the host %q", k, host)
	}
	vm, err := m1.Create(ctx, "", session.CreateRequest{Runtime: session.Runtime{Backend: "qemu"}})
	if err != nil {
		t.Fatal(err)
	}
	if vm.Backend != "qemu" || vm.Runtime.Backend != "qemu" || vm.Capabilities.Isolation != "vm" || !vm.Capabilities.MemoryCheckpoint {
		t.Errorf("qemu create: backend %q runtime.backend %q caps %+v", vm.Backend, vm.Runtime.Backend, vm.Capabilities)
	}
	if k := kernel(vm.ID); k == strings.TrimSpace(string(host)) || !strings.HasSuffix(k, "cloud-amd64") {
		t.Errorf("the VM runs kernel %q (host %q): not its own", k, host)
	}
	if got, err := m1.Get(ctx, "", vm.ID); err != nil || got.Backend != "qemu" {
		t.Errorf("get: %v %+v", err, got)
	}

	// A checkpoint of the VM, then delete: its snapshot directory goes.
	snaps := filepath.Join(state, "qemu", "snapshots")
	if _, err := m1.Checkpoint(ctx, "", vm.ID, -1, session.CheckpointRequest{Tag: "t1"}); err != nil {
		t.Fatal(err)
	}
	if n := entries(t, snaps); n != 1 {
		t.Fatalf("%d snapshot directories after a checkpoint, want 1", n)
	}
	if err := m1.Delete(ctx, "", vm.ID); err != nil {
		t.Fatal(err)
	}
	if n := entries(t, snaps); n != 0 {
		t.Errorf("%d snapshot directories left after delete", n)
	}

	// Detach: both sandboxes outlive the daemon, and the next one adopts
	// them: the VM goes on with what it had (a file, its hostname).
	vm2, err := m1.Create(ctx, "", session.CreateRequest{Runtime: session.Runtime{Backend: "qemu"}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := m1.Exec(ctx, "", vm2.ID, session.ExecRequest{Command: "echo kept > /workspace/f; hostname"})
	if err != nil || before.ExitCode != 0 {
		t.Fatalf("%v %+v", err, before)
	}
	m1.Detach(ctx)
	close1()
	if out, _ := exec.Command("pgrep", "-f", "qemu-system.*"+state).Output(); len(out) == 0 {
		t.Error("the VM did not outlive Detach")
	}
	m2, close2 := open()
	m1, close1 = m2, close2 // the deferred cleanup stops what m2 holds
	if adopted, lost := m2.Reattach(ctx); adopted != 2 || lost != 0 {
		t.Fatalf("reattach: adopted %d lost %d, want 2 and 0", adopted, lost)
	}
	if res, err := m2.Exec(ctx, "", pbs.ID, session.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
		t.Errorf("the adopted procbox session: %v %+v", err, res)
	}
	after, err := m2.Exec(ctx, "", vm2.ID, session.ExecRequest{Command: "cat /workspace/f; hostname"})
	if err != nil || after.Stdout != "kept\n"+before.Stdout {
		t.Errorf("the adopted VM: %v %+v, before %q", err, after, before.Stdout)
	}
	// Deleting the adopted VM's session leaves nothing of it.
	if err := m2.Delete(ctx, "", vm2.ID); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("pgrep", "-f", "qemu-system.*"+state).Output(); len(out) > 0 {
		t.Errorf("a qemu process outlived its session: %s", out)
	}
	if n := entries(t, filepath.Join(state, "qemu", "machines")); n != 0 {
		t.Errorf("%d machine state files left", n)
	}
}

func entries(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return len(es)
}
