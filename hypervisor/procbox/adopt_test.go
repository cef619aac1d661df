package procbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

// TestAdoptAcrossBackends plays a daemon restart inside one test process:
// backend a detaches its machines, backend b (same state dir) adopts one,
// finds its files and its running job, checkpoints and restores it, and
// stops it leaving nothing; a machine whose init died meanwhile is not
// adopted and is swept. On both stores.
func TestAdoptAcrossBackends(t *testing.T) {
	testutil.RequiresRoot(t)
	for _, kind := range []string{StoreBtrfs, StoreTmpfs} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			state := t.TempDir()
			cfg := hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t),
				Options: map[string]string{"store": kind}, AdoptLeftovers: true}
			a, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			keep, err := a.create(ctx, hypervisor.MachineSpec{Image: "mini"})
			if err != nil {
				t.Fatal(err)
			}
			dies, err := a.create(ctx, hypervisor.MachineSpec{Image: "mini"})
			if err != nil {
				keep.Stop(ctx)
				t.Fatal(err)
			}
			c := clientFor(keep)
			mustRun(t, c, "echo before > /workspace/f")
			job, err := c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "echo started; sleep 600"}})
			if err != nil {
				t.Fatal(err)
			}
			keepID, diesID, diesPID := keep.ID(), dies.ID(), dies.PID()
			a.Detach()
			a.Close()
			if _, err := keep.Dial(ctx); !errors.Is(err, hypervisor.ErrStopped) {
				t.Errorf("a detached machine still dials from its old backend: %v", err)
			}
			// Still running with nobody owning it; one of them dies now.
			if err := syscall.Kill(diesPID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}

			b, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			m, err := b.Adopt(ctx, keepID)
			if err != nil {
				t.Fatalf("adopt: %v", err)
			}
			defer m.Stop(ctx)
			c = clientFor(m)
			if out := mustRun(t, c, "cat /workspace/f"); out != "before\n" {
				t.Errorf("adopted machine lost its file: %q", out)
			}
			jobs, err := c.Jobs(ctx)
			if err != nil || len(jobs) != 1 || jobs[0].ID != job.ID || jobs[0].State != api.JobRunning {
				t.Errorf("the job did not survive the restart: %+v %v", jobs, err)
			}
			if _, err := b.Adopt(ctx, keepID); err == nil {
				t.Error("adopted the same machine twice")
			}
			if _, err := b.Adopt(ctx, diesID); !errors.Is(err, hypervisor.ErrNotFound) {
				t.Errorf("adopting a dead machine: %v", err)
			}
			if _, err := b.Adopt(ctx, "never-was"); !errors.Is(err, hypervisor.ErrNotFound) {
				t.Errorf("adopting an unknown machine: %v", err)
			}
			b.SweepLeftovers()
			if _, err := os.Stat(filepath.Join(state, Name, "machines", diesID)); !os.IsNotExist(err) {
				t.Errorf("the dead machine's directory was not swept: %v", err)
			}
			if cgroupExists(diesID) {
				t.Error("the dead machine's cgroup was not swept")
			}
			// The adopted machine is a full machine: checkpoint, change,
			// restore, and its lifecycle works as one booted here.
			s, err := m.Checkpoint(ctx, "after-adopt", false)
			if err != nil {
				t.Fatal(err)
			}
			mustRun(t, c, "echo changed > /workspace/f")
			if err := m.Restore(ctx, s); err != nil {
				t.Fatal(err)
			}
			if out := mustRun(t, c, "cat /workspace/f"); out != "before\n" {
				t.Errorf("restore after adoption: %q", out)
			}
			// Its init dying is noticed without being its parent.
			pid := m.(*Machine).PID()
			syscall.Kill(pid, syscall.SIGKILL)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := m.Wait(wctx); err != nil {
				t.Errorf("the end of the restored init was not noticed: %v", err)
			}
			if err := m.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(state, Name, "machines", keepID)); !os.IsNotExist(err) {
				t.Errorf("stop left the machine directory: %v", err)
			}
			if cgroupExists(keepID) {
				t.Error("stop left the cgroup")
			}
			if err := m.DeleteSnapshot(ctx, s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// daemonConfig is a backend on a fresh state dir (tmpfs store) opened as
// `paddock serve` opens it: leftovers are kept for Adopt.
func daemonConfig(t *testing.T) hypervisor.Config {
	return hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t),
		Options: map[string]string{"store": StoreTmpfs}, AdoptLeftovers: true}
}

// leaveRunning boots n machines on a backend of cfg and lets go of them
// running, as a daemon that stops (or a process that dies, when cfg does
// not adopt) leaves them. Whatever a failing test leaves of them is swept
// when it ends, as the next daemon would.
func leaveRunning(t *testing.T, cfg hypervisor.Config, n int) []*Machine {
	t.Helper()
	t.Cleanup(func() {
		c := cfg
		c.AdoptLeftovers = true
		if b, err := New(c); err == nil {
			b.SweepLeftovers()
			b.Close()
		}
	})
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]*Machine, 0, n)
	for range n {
		m, err := a.create(context.Background(), hypervisor.MachineSpec{Image: "mini"})
		if err != nil {
			for _, m := range ms {
				m.Stop(context.Background())
			}
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	a.Detach()
	a.Close()
	return ms
}

// TestAdoptedInitExitIsNoticed: an adopted machine whose init ends on its
// own is reported by Wait, though this process is not its parent.
func TestAdoptedInitExitIsNoticed(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	cfg := daemonConfig(t)
	m0 := leaveRunning(t, cfg, 1)[0]
	id, pid := m0.ID(), m0.PID()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := b.Adopt(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx)
	if m.(*Machine).PID() != pid {
		t.Errorf("adopted pid %d, want %d", m.(*Machine).PID(), pid)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.Wait(wctx); err != nil {
		t.Fatalf("the adopted init's end was not noticed: %v", err)
	}
}

// TestStateFileNamesTheInit: a state file naming a recycled pid (another
// start time) is not adopted.
func TestStateFileNamesTheInit(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	cfg := daemonConfig(t)
	m0 := leaveRunning(t, cfg, 1)[0]
	id := m0.ID()
	path := filepath.Join(m0.dir, stateFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Point the state at this test process: alive, but not the init.
	forged := strings.Replace(string(raw), `"pid":`+strconv.Itoa(m0.PID()), `"pid":`+strconv.Itoa(os.Getpid()), 1)
	if forged == string(raw) {
		t.Fatal("could not forge the state file")
	}
	os.WriteFile(path, []byte(forged), 0o600)
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Adopt(ctx, id); !errors.Is(err, hypervisor.ErrNotFound) || !strings.Contains(err.Error(), "not running") {
		t.Errorf("adopted a machine whose state names another process: %v", err)
	}
	b.SweepLeftovers()
	if cgroupExists(id) {
		t.Error("the unadopted machine was not swept")
	}
}

// TestSecondBackendOnAnOpenStore: a backend opening a btrfs store that
// another one holds open (a CLI run beside a running daemon) gets it at
// once, instead of waiting for the other to close.
func TestSecondBackendOnAnOpenStore(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	cfg := hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), Options: map[string]string{"store": StoreBtrfs}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ma, err := a.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Stop(ctx)
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		mb, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
		if err == nil {
			err = mb.Stop(ctx)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a second backend waited for the first to close the store")
	}
	// The first backend's machine still works.
	if out := mustRun(t, clientFor(ma), "echo ok"); out != "ok\n" {
		t.Errorf("the first backend's machine after the second closed: %q", out)
	}
}

// TestStoreOpenKeepsAdoptableMachines: a backend that does not adopt (a
// `paddock sandbox run`) opening the store while a daemon restarts must
// not sweep the machines the daemon left running for the next one, or
// every session would be lost. What an owner did not mean to leave (a
// killed `paddock sandbox run`) is still swept on open, and
// SweepLeftovers, which a daemon calls after adopting, removes the rest.
func TestStoreOpenKeepsAdoptableMachines(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	daemon := daemonConfig(t)
	cli := daemon
	cli.AdoptLeftovers = false
	// The daemon stops, leaving both for the next one; a CLI run is
	// killed, its lock gone and its machine running.
	left := leaveRunning(t, daemon, 2)
	kept, unclaimed := left[0], left[1]
	orphan := leaveRunning(t, cli, 1)[0]

	d, err := New(cli) // the next `paddock sandbox run`
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.StoreKind(); err != nil { // opens the store, and sweeps
		t.Fatal(err)
	}
	defer d.Close()
	if cgroupExists(orphan.ID()) {
		t.Error("a killed CLI run's machine was not swept when the next one opened the store")
	}
	b, err := New(daemon) // the daemon starts again
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := b.Adopt(ctx, kept.ID())
	if err != nil {
		t.Fatalf("a store opened by a CLI run swept the daemon's machine: %v", err)
	}
	defer m.Stop(ctx)
	if out := mustRun(t, clientFor(m), "echo ok"); out != "ok\n" {
		t.Errorf("the adopted machine: %q", out)
	}
	b.SweepLeftovers()
	if cgroupExists(unclaimed.ID()) {
		t.Error("SweepLeftovers left a machine nobody adopted")
	}
	if _, err := os.Stat(filepath.Join(daemon.StateDir, Name, "machines", unclaimed.ID())); !os.IsNotExist(err) {
		t.Errorf("SweepLeftovers left the directory of a machine nobody adopted: %v", err)
	}
}

// TestAdoptCancelledLeavesMachine: an Adopt whose context ends before the
// guest answers (a daemon told to stop while it starts) gives up without
// stopping the machine, which is not at fault: the next process adopts it.
func TestAdoptCancelledLeavesMachine(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	cfg := daemonConfig(t)
	id := leaveRunning(t, cfg, 1)[0].ID()

	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Adopt(cancelled, id); !errors.Is(err, context.Canceled) {
		t.Errorf("adopt with a cancelled context: %v, want context.Canceled", err)
	}
	b.Close()

	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.Adopt(ctx, id)
	if err != nil {
		t.Fatalf("a cancelled adopt stopped the machine: %v", err)
	}
	defer m.Stop(ctx)
	if out := mustRun(t, clientFor(m), "echo ok"); out != "ok\n" {
		t.Errorf("the machine after a cancelled adopt: %q", out)
	}
}

// TestSweepSparesNewDirectories: a machine directory still being made
// (".new-…", its lock file created but not yet locked) is left alone by
// another process's sweep; one left by a maker that died long ago goes.
func TestSweepSparesNewDirectories(t *testing.T) {
	testutil.RequiresRoot(t)
	state := t.TempDir()
	b, err := New(hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), Options: map[string]string{"store": StoreTmpfs}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.layerStore()
	if err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(state, Name, "machines", ".new-fresh")
	old := filepath.Join(state, Name, "machines", ".new-old")
	for _, d := range []string{fresh, old} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "owner.lock"), nil, 0o600)
	}
	long := time.Now().Add(-2 * time.Minute)
	os.Chtimes(old, long, long)
	b.sweep(s, false)
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a directory being made was swept: %v", err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("a dead maker's directory was kept: %v", err)
	}
}
