package qemu

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

// TestSweepLeftovers: machines a detached backend left running are
// adopted only once, and what nobody adopts is swept (QEMU killed, layer,
// run directory and state removed); a machine whose QEMU died is not
// adoptable.
func TestSweepLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("boots VMs under TCG")
	}
	testutil.RequiresRoot(t)
	state := t.TempDir()
	cfg := hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t),
		AdoptLeftovers: true, Options: map[string]string{"cache": vmCache(t)}}
	b1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := b1.Capabilities(); !c.Available {
		t.Skipf("qemu cannot run here: %s", c.Reason)
	}
	ctx := context.Background()
	keep, err := b1.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	left, err := b1.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	leftDisk := b1.machines[left.ID()].disk
	b1.Detach()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	running := func() int {
		out, _ := exec.Command("pgrep", "-f", "qemu-system.*"+state).Output()
		n := 0
		for _, c := range out {
			if c == '\n' {
				n++
			}
		}
		return n
	}
	if n := running(); n != 2 {
		t.Fatalf("%d VMs run after Detach, want 2", n)
	}
	b2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	m, err := b2.Adopt(ctx, keep.ID())
	if err != nil {
		t.Fatal(err)
	}
	if out := vmMustExec(t, vmClient(m), "echo adopted"); out != "adopted\n" {
		t.Errorf("adopted machine: %q", out)
	}
	if _, err := b2.Adopt(ctx, keep.ID()); err == nil {
		t.Error("a machine was adopted twice")
	}
	b2.SweepLeftovers()
	if n := running(); n != 1 {
		t.Errorf("%d VMs run after the sweep, want the adopted one", n)
	}
	if _, err := os.Stat(leftDisk); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the swept machine's layer: %v", err)
	}
	if _, err := os.Stat(filepath.Join(b2.machinesDir(), left.ID()+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the swept machine's state: %v", err)
	}
	if _, err := b2.Adopt(ctx, left.ID()); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("adopting a swept machine: %v", err)
	}
	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := running(); n != 0 {
		t.Errorf("%d VMs run after Stop", n)
	}
}
