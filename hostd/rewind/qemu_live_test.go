package rewind_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hypervisor/qemu"
	"paddock.dev/paddock/internal/testutil"
)

// TestRewindMemoryPointsQEMU: on a backend with memory checkpoints (qemu,
// under TCG here) a point keeps memory: an undo of an `rm -rf` brings the
// files back and a process started before the point is running after
// it (it goes on counting), where a disk point would have rebooted.
func TestRewindMemoryPointsQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	d := daemontest.New(t, daemontest.WithBackend(qemu.Name), daemontest.WithImage(testutil.MiniImageName, testutil.MiniImages(t)))
	c := d.Client
	ctx := context.Background()
	s := newSession(t, c)
	if !s.Capabilities.MemoryCheckpoint {
		t.Skipf("qemu here has no memory checkpoints: %s", s.Capabilities.MemoryCheckpointReason)
	}
	mustExec(t, c, s.ID, "mkdir -p /workspace/app && echo v1 > /workspace/app/main.txt")
	mustExec(t, c, s.ID, "setsid sh -c 'n=0; while true; do n=$((n+1)); echo $n > /tmp/tick; sleep 0.2; done' >/dev/null 2>&1 < /dev/null &")
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	mustExec(t, c, s.ID, "rm -rf /workspace/app")
	t.Logf("an exec with a memory point took %v", time.Since(t0))
	rw, err := c.Rewind(ctx, s.ID)
	if err != nil || len(rw.Points) != 1 || !rw.Points[0].Memory {
		t.Fatalf("the point: %+v %v", rw, err)
	}
	t0 = time.Now()
	if _, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the undo took %v", time.Since(t0))
	if r := mustExec(t, c, s.ID, "cat /workspace/app/main.txt"); r.Stdout != "v1\n" {
		t.Errorf("after undo: %q", r.Stdout)
	}
	tick := func() int {
		r := mustExec(t, c, s.ID, "cat /tmp/tick")
		n, _ := strconv.Atoi(strings.TrimSpace(r.Stdout))
		return n
	}
	a := tick()
	time.Sleep(2 * time.Second)
	if b := tick(); a == 0 || b <= a {
		t.Errorf("the process started before the point is not running after the undo: tick %d then %d", a, b)
	}
}

// TestRewindBranchQEMU is TestRewindBranchLive between microVMs (qemu,
// TCG here): the points are memory points and the children start from
// them, holding only the state before the second write, while the
// parent and its ring carry on.
func TestRewindBranchQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("boots four VMs")
	}
	d := daemontest.New(t, daemontest.WithBackend(qemu.Name), daemontest.WithImage(testutil.MiniImageName, testutil.MiniImages(t)))
	rewindBranchLive(t, d, api.Runtime{Backend: qemu.Name, MemoryMB: 256})
}

// TestRewindBisectQEMU is TestRewindBisectLive in a microVM (qemu, TCG
// here): 16 memory points, the breaking command named with at most
// log2(17)+2 restores from memory, and the VM ends where it started.
func TestRewindBisectQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	d := daemontest.New(t, daemontest.WithBackend(qemu.Name), daemontest.WithImage(testutil.MiniImageName, testutil.MiniImages(t)))
	rewindBisectLive(t, d, api.Runtime{Backend: qemu.Name, MemoryMB: 256})
}

// TestRewindPinsQEMU is TestRewindPinsLive in a microVM (qemu, TCG
// here): a pinned memory point survives the ring's eviction and an undo
// past it, and still restores.
func TestRewindPinsQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	d := daemontest.New(t, daemontest.WithBackend(qemu.Name), daemontest.WithImage(testutil.MiniImageName, testutil.MiniImages(t)))
	rewindPinsLive(t, d, api.Runtime{Backend: qemu.Name, MemoryMB: 256})
}
