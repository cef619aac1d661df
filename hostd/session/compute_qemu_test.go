package session_test

import (
	"context"
	"errors"
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

// TestAttackBudgetBackgroundComputeQEMU: qemu machines do not report
// their CPU time, so the background loop of
// hostd/api.TestAttackBudgetBackgroundCompute (`setsid … &`, charged
// nothing by wall time) would burn past max_compute_seconds in a VM. A
// session with that budget is refused on qemu (409
// compute_budget_unmetered, naming the backend) before any VM starts
// (the check comes before admission);
// the same create is let through on procbox, and a qemu session without
// the budget is created.
func TestAttackBudgetBackgroundComputeQEMU(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t)}
	pb, err := procbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	qb, err := qemu.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer qb.Close()
	if c := qb.Capabilities(); !c.Available {
		t.Skipf("qemu cannot run here: %s", c.Reason)
	}
	m := session.New(session.Config{Store: st, Ledger: ledger.New(st), Backend: pb, Backends: []hypervisor.Backend{qb},
		DefaultImage: testutil.MiniImageName})
	defer m.Shutdown(ctx)

	limit := int64(60)
	budget := &session.Budget{MaxComputeSeconds: &limit}
	_, err = m.Create(ctx, "", session.CreateRequest{Runtime: session.Runtime{Backend: "qemu"}, Budget: budget})
	var ce *session.CodedError
	if !errors.Is(err, session.ErrConflict) || !errors.As(err, &ce) || ce.Code != session.CodeComputeBudgetUnmetered || !strings.Contains(err.Error(), "qemu backend") {
		t.Fatalf("a qemu session with max_compute_seconds: %v, want 409 %s naming the backend", err, session.CodeComputeBudgetUnmetered)
	}
	t.Logf("refused: %v", err)
	// The same budget on procbox, which meters CPU time.
	ps, err := m.Create(ctx, "", session.CreateRequest{Budget: budget})
	if err != nil {
		t.Fatalf("a procbox session with max_compute_seconds: %v", err)
	}
	defer m.Delete(ctx, "", ps.ID)
	// A qemu session without it, and with other budgets.
	execs := int64(10)
	vm, err := m.Create(ctx, "", session.CreateRequest{Runtime: session.Runtime{Backend: "qemu"}, Budget: &session.Budget{MaxExecs: &execs}})
	if err != nil {
		t.Fatalf("a qemu session without max_compute_seconds: %v", err)
	}
	defer m.Delete(ctx, "", vm.ID)
	if vm.Backend != "qemu" || vm.Capabilities.CPUMeter || !ps.Capabilities.CPUMeter {
		t.Errorf("capabilities: qemu session %q cpu_meter %v, procbox session cpu_meter %v", vm.Backend, vm.Capabilities.CPUMeter, ps.Capabilities.CPUMeter)
	}
}
