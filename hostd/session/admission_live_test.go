package session_test

import (
	"context"
	"path/filepath"
	"testing"

	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
)

// TestAdmissionAfterReattach: a daemon that restarts counts again what
// its adopted sandboxes and their checkpoints hold (a tenant's session of
// 300 MiB with a checkpoint of about 20 MiB, the admin's sandbox at the
// backend's defaults), so a restart does not hand out the disk twice.
func TestAdmissionAfterReattach(t *testing.T) {
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
		b, err := procbox.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return session.New(session.Config{Store: st, Ledger: ledger.New(st), Backend: b, DefaultImage: testutil.MiniImageName}), func() { b.Close() }
	}
	m1, close1 := open()
	s, err := m1.Create(ctx, "acme", session.CreateRequest{Runtime: session.Runtime{DiskMB: 300, MemoryMB: 256, CPUs: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Exec(ctx, "acme", s.ID, session.ExecRequest{Command: "head -c 20000000 /dev/urandom > /workspace/f && sync"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Checkpoint(ctx, "acme", s.ID, -1, session.CheckpointRequest{Tag: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.CreateKind(ctx, "", session.CreateRequest{Agent: session.KindSandbox}, session.KindSandbox); err != nil {
		t.Fatal(err)
	}
	before := m1.HeldNow()
	acme := before.Tenants["acme"]
	if acme.DiskMB < 300+19 || acme.DiskMB > 300+25 || acme.MemoryMB != 256 || acme.CPUs != 0.5 ||
		before.BackendDiskMB["procbox"] != acme.DiskMB+procbox.DefaultDiskMB {
		t.Fatalf("held before the restart: %+v", before)
	}
	m1.Detach(ctx)
	close1()

	m2, close2 := open()
	defer close2()
	defer m2.Shutdown(ctx)
	if adopted, _ := m2.Reattach(ctx); adopted != 2 {
		t.Fatalf("adopted %d", adopted)
	}
	after := m2.HeldNow()
	if after.BackendDiskMB["procbox"] != before.BackendDiskMB["procbox"] || after.Tenants["acme"] != acme {
		t.Errorf("held after the restart %+v, before %+v", after, before)
	}
	if err := m2.Delete(ctx, "acme", s.ID); err != nil {
		t.Fatal(err)
	}
	if h := m2.HeldNow(); h.BackendDiskMB["procbox"] != procbox.DefaultDiskMB || len(h.Tenants) != 0 {
		t.Errorf("held after the tenant's session was deleted: %+v", h)
	}
}
