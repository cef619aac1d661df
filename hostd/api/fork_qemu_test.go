package api_test

import (
	"context"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/internal/testutil"

	_ "paddock.dev/paddock/hypervisor/qemu" // registers the qemu backend for WithBackend
)

// TestForkMemoryQEMULive, through a real daemon on qemu (TCG where KVM
// does not work): a counter runs as a job, a memory checkpoint is taken,
// and a fork into 2 from it goes ahead. Both children's counters go on
// from the checkpoint's value; each child answers for the parent's jobs
// (read, stdin, kill); nothing is listed as not carried; the parent's
// counter keeps going. A fork of the state now is from memory too.
func TestForkMemoryQEMULive(t *testing.T) {
	testutil.RequiresRoot(t)
	if testing.Short() {
		t.Skip("boots three VMs")
	}
	d := newTestDaemon(t, daemontest.WithBackend("procbox", "qemu"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{Backend: "qemu"}})
	if err != nil {
		t.Skipf("no qemu session here: %v", err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if !s.Capabilities.MemoryCheckpoint {
		t.Fatalf("a qemu session without memory checkpoints: %s", s.Capabilities.MemoryCheckpointReason)
	}
	p := sp(s.ID)
	var counterJob, feedJob session.Job
	const counter = "i=0; while :; do i=$((i+1)); echo $i > /workspace/count; sleep 0.2; done"
	if code := call(t, d.url, "POST", p+"/jobs", map[string]any{"command": counter}, &counterJob); code != 201 {
		t.Fatalf("counter job: %d", code)
	}
	if code := call(t, d.url, "POST", p+"/jobs", map[string]any{"command": "cat > /workspace/fed", "stdin": true}, &feedJob); code != 201 {
		t.Fatalf("stdin job: %d", code)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
		if r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "test -s /workspace/count"}); err == nil && r.ExitCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the counter never wrote")
		}
	}
	mem := true
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "mem", Memory: &mem}); err != nil {
		t.Fatalf("memory checkpoint: %v", err)
	}
	atCheckpoint := counterValue(t, d.c, s.ID)
	fr, err := d.c.ForkWith(ctx, s.ID, -1, session.ForkRequest{Count: 2, From: "mem"})
	if err != nil {
		t.Fatalf("memory fork while jobs run: %v", err)
	}
	for _, k := range fr.Children {
		defer d.c.DeleteSession(ctx, k.ID)
	}
	if len(fr.Children) != 2 || !fr.Memory || len(fr.NotCarried) != 0 {
		t.Fatalf("fork answer: %+v, want 2 children from memory, nothing left behind", fr)
	}
	// best-effort on qemu: the handshake gives each child its own host
	// name and machine id, even from memory.
	if fr.IdentityNote != "" || len(fr.Identities) != 2 || fr.Identities[0].Hostname == fr.Identities[1].Hostname ||
		fr.Identities[0].MachineID == fr.Identities[1].MachineID || fr.Identities[0].MachineID == "" {
		t.Errorf("children's identities: %+v (note %q)", fr.Identities, fr.IdentityNote)
	}
	for _, k := range fr.Children {
		c1 := counterValue(t, d.c, k.ID)
		time.Sleep(2 * time.Second)
		c2 := counterValue(t, d.c, k.ID)
		if c2 <= c1 || c1 > atCheckpoint+1000 {
			t.Errorf("child %s counter %d → %d (checkpoint near %d): want it going on", k.ID, c1, c2, atCheckpoint)
		}
		var j session.Job
		if code := call(t, d.url, "GET", sp(k.ID)+"/jobs/"+counterJob.ID, nil, &j); code != 200 || j.State != "running" {
			t.Errorf("child %s reading job %s: %d %+v", k.ID, counterJob.ID, code, j)
		}
		if code := call(t, d.url, "POST", sp(k.ID)+"/jobs/"+feedJob.ID+"/stdin", map[string]any{"text": "to " + k.ID, "close": true}, nil); code != 200 {
			t.Errorf("child %s feeding job %s: %d", k.ID, feedJob.ID, code)
		}
		waitJobEnd(t, d.url, k.ID, feedJob.ID)
		if got := execOut(t, d.c, k.ID, "cat /workspace/fed"); got != "to "+k.ID {
			t.Errorf("child %s fed file: %q", k.ID, got)
		}
		if code := call(t, d.url, "DELETE", sp(k.ID)+"/jobs/"+counterJob.ID+"?signal=KILL", nil, nil); code != 200 {
			t.Errorf("child %s killing job %s: %d", k.ID, counterJob.ID, code)
		}
		waitJobEnd(t, d.url, k.ID, counterJob.ID)
		// The child holds the parent's job records: its ended jobs are
		// settled into its own usage.
		if ks, err := d.c.GetSession(ctx, k.ID); err != nil || ks.Usage.JobMS <= 0 {
			t.Errorf("child %s usage after its carried jobs ended: %+v %v, want job time", k.ID, ks, err)
		}
		c3 := counterValue(t, d.c, k.ID)
		time.Sleep(time.Second)
		if c4 := counterValue(t, d.c, k.ID); c4 != c3 {
			t.Errorf("child %s counter still moves after the kill: %d → %d", k.ID, c3, c4)
		}
	}
	c1 := counterValue(t, d.c, s.ID)
	time.Sleep(2 * time.Second)
	if c2 := counterValue(t, d.c, s.ID); c2 <= c1 {
		t.Errorf("the parent's counter stopped: %d → %d", c1, c2)
	}
	// A fork of the state now is taken with memory too: the counter goes
	// on in the child, from about where the parent was.
	now, err := d.c.ForkWith(ctx, s.ID, -1, session.ForkRequest{Count: 1})
	if err != nil || len(now.Children) != 1 || !now.Memory || len(now.NotCarried) != 0 {
		t.Fatalf("fork of the state now: %+v %v, want one child from memory", now, err)
	}
	defer d.c.DeleteSession(ctx, now.Children[0].ID)
	k1 := counterValue(t, d.c, now.Children[0].ID)
	time.Sleep(2 * time.Second)
	if k2 := counterValue(t, d.c, now.Children[0].ID); k2 <= k1 || k1 < c1 {
		t.Errorf("the counter in a fork of the state now: %d → %d (the parent was at %d before)", k1, k2, c1)
	}
	var j session.Job
	if code := call(t, d.url, "GET", p+"/jobs/"+counterJob.ID, nil, &j); code != 200 || j.State != "running" {
		t.Errorf("the parent's counter job after the children killed theirs: %d %+v", code, j)
	}
}

// TestOOMEventQEMULive: in a qemu session (TCG where KVM does not work)
// of the smallest memory, a command that needs more runs the guest's
// kernel out of memory. The host cannot see that kill itself: the guest
// agent reports its kernel's count and the daemon's watcher turns the
// rise into an oom event, as it does for procbox's cgroup. A restore from
// memory brings back the older, lower count the snapshot held; that is
// the restored machine's new start, so it makes no event, and the next
// kill makes one.
func TestOOMEventQEMULive(t *testing.T) {
	testutil.RequiresRoot(t)
	if testing.Short() {
		t.Skip("boots a VM")
	}
	d := newTestDaemon(t, daemontest.WithBackend("procbox", "qemu"))
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{Backend: "qemu", MemoryMB: 128}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	t0 := time.Now()
	runOutOfMemory(t, d, s.ID)
	waitOOMEvents(t, d, s.ID, 1, time.Minute)
	t.Logf("the first oom event came %v after the command started", time.Since(t0))
	if !s.Capabilities.MemoryCheckpoint {
		t.Skipf("no memory checkpoints here: %s", s.Capabilities.MemoryCheckpointReason)
	}
	mem := true
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "one-kill", Memory: &mem}); err != nil {
		t.Fatal(err)
	}
	runOutOfMemory(t, d, s.ID)
	waitOOMEvents(t, d, s.ID, 2, time.Minute)
	// The guest now counts 2; the snapshot holds 1.
	if _, err := d.c.Restore(ctx, s.ID, -1, "one-kill"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second) // three of the watcher's polls
	waitOOMEvents(t, d, s.ID, 2, 0)
	if r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo alive"}); err != nil || r.Stdout != "alive\n" {
		t.Fatalf("after the restore: %+v %v", r, err)
	}
	runOutOfMemory(t, d, s.ID)
	waitOOMEvents(t, d, s.ID, 3, time.Minute)
}
