package procbox

import (
	"context"
	"testing"
	"time"

	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

// TestCPUTimeAndStopCommands: a machine's CPU time counts a busy loop a
// command left behind in its own session, survives a restore (the old
// cgroup's time is kept) and an adoption by another backend (the state
// file carries it); StopCommands kills the loop and the time stands
// still, while the agent goes on answering.
func TestCPUTimeAndStopCommands(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	cfg := hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t),
		Options: map[string]string{"store": StoreTmpfs}, AdoptLeftovers: true}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.create(ctx, hypervisor.MachineSpec{Image: "mini"})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	spin := func(c *Machine) time.Duration {
		t.Helper()
		before, err := c.CPUTime()
		if err != nil {
			t.Fatal(err)
		}
		mustRun(t, clientFor(c), "setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &")
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if now, _ := c.CPUTime(); now-before > 500*time.Millisecond {
				return now
			}
		}
		t.Fatalf("the loop did not show in the CPU time")
		return 0
	}
	spin(m)
	n, err := m.StopCommands(ctx)
	if err != nil || n < 1 {
		t.Fatalf("stop commands: %d %v", n, err)
	}
	stopped, _ := m.CPUTime()
	time.Sleep(time.Second)
	if now, _ := m.CPUTime(); now-stopped > 200*time.Millisecond {
		t.Errorf("CPU time grew by %s in a second after StopCommands", now-stopped)
	}
	if out := mustRun(t, clientFor(m), "echo alive"); out != "alive\n" {
		t.Errorf("the agent after StopCommands: %q", out)
	}
	// A restore reboots the machine in a new cgroup: the time goes on.
	s, err := m.Checkpoint(ctx, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	spun := spin(m)
	if err := m.Restore(ctx, s); err != nil {
		t.Fatal(err)
	}
	if after, _ := m.CPUTime(); after < spun {
		t.Errorf("CPU time after a restore %s, before it %s", after, spun)
	}
	m.StopCommands(ctx) // nothing to stop after the restore
	before, _ := m.CPUTime()
	id := m.ID()
	a.Detach()
	a.Close()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	adopted, err := b.Adopt(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer adopted.Stop(ctx)
	if after, _ := adopted.(*Machine).CPUTime(); after < before {
		t.Errorf("CPU time after an adoption %s, before it %s", after, before)
	}
}
