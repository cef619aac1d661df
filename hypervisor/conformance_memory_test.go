package hypervisor_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
)

// counter reads the counter file a background loop in the machine bumps.
func counter(t *testing.T, c *client.Client) int {
	t.Helper()
	// (not there yet: the job has not written it)
	n, err := strconv.Atoi(strings.TrimSpace(mustOK(t, c, "cat /tmp/counter 2>/dev/null || echo 0")))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitAbove polls the counter until it passes n.
func waitAbove(t *testing.T, c *client.Client, n int) int {
	t.Helper()
	// A VM under TCG on a loaded machine counts slowly (each step starts
	// two programs): allow two minutes.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if v := counter(t, c); v > n {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counter stayed at or below %d for 2 minutes", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestConformanceMemoryFork checkpoints a machine with memory while a
// process counts, forks two running children from it and restores the
// parent: the counting process lives on in each, from the checkpoint's
// value (not from zero, not from the parent's later value), and the
// children's files and identities part ways.
func TestConformanceMemoryFork(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		caps := e.b.Capabilities()
		if !caps.MemoryCheckpoint || !caps.Fork {
			t.Skipf("no memory checkpoints here: %s", caps.MemoryCheckpointReason)
		}
		m, c := e.create(t, hypervisor.MachineSpec{})
		ctx := ctxT(t)
		mustOK(t, c, "echo before > /workspace/file")
		// A job outlives the exec that would otherwise own it.
		if _, err := c.StartJob(ctx, api.JobRequest{Command: api.Command{
			Shell: "i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done"}}); err != nil {
			t.Fatal(err)
		}
		waitAbove(t, c, 3)
		s, err := m.Checkpoint(ctx, "mem", true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.DeleteSnapshot(context.Background(), s) })
		if !s.Memory {
			t.Fatal("snapshot says it has no memory")
		}
		atCheckpoint := counter(t, c) // read right after: the parent ran on a little
		// The parent keeps counting and changes its files.
		later := waitAbove(t, c, atCheckpoint+40)
		mustOK(t, c, "echo after > /workspace/file")

		start := time.Now()
		kids, err := m.Fork(ctx, s, 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("fork of 2 from memory in %v", time.Since(start).Round(time.Millisecond))
		// Each child counts on from the checkpoint: by now it may have
		// added one per 100 ms since the fork began, never the parent's
		// lead.
		firsts := make([]int, len(kids))
		for i, k := range kids {
			t.Cleanup(func() { k.Stop(context.Background()) })
			firsts[i] = counter(t, clientFor(k))
		}
		slack := 5 + int(time.Since(start)/(100*time.Millisecond))
		ids := map[string]bool{strings.TrimSpace(mustOK(t, c, "cat /etc/machine-id")): true}
		for i, k := range kids {
			kc := clientFor(k)
			first := firsts[i]
			if first > atCheckpoint+slack || first >= later {
				t.Errorf("child %d counts at %d: the checkpoint was near %d (slack %d), the parent is past %d", i, first, atCheckpoint, slack, later)
			}
			if first < 3 {
				t.Errorf("child %d counts from %d: its process started over", i, first)
			}
			waitAbove(t, kc, first+3)
			if out := mustOK(t, kc, "cat /workspace/file"); out != "before\n" {
				t.Errorf("child %d sees %q", i, out)
			}
			mustOK(t, kc, fmt.Sprintf("echo child-%d > /workspace/file", i))
			ids[strings.TrimSpace(mustOK(t, kc, "cat /etc/machine-id"))] = true
			if h := strings.TrimSpace(mustOK(t, kc, "hostname")); h != k.ID() {
				t.Errorf("child %d hostname %q, want %q", i, h, k.ID())
			}
		}
		if len(ids) != 3 {
			t.Errorf("machine-ids shared: %v", ids)
		}
		for i, k := range kids {
			if out := mustOK(t, clientFor(k), "cat /workspace/file"); out != fmt.Sprintf("child-%d\n", i) {
				t.Errorf("child %d diverged wrongly: %q", i, out)
			}
		}
		// The children have their own random state.
		r0 := mustOK(t, clientFor(kids[0]), "head -c 16 /dev/urandom | od -An -tx1")
		r1 := mustOK(t, clientFor(kids[1]), "head -c 16 /dev/urandom | od -An -tx1")
		if r0 == r1 {
			t.Error("two children read the same random bytes")
		}
		// Restoring the parent brings back its counter and file.
		start = time.Now()
		if err := m.Restore(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Logf("restore from memory in %v", time.Since(start).Round(time.Millisecond))
		c = clientFor(m)
		if v := counter(t, c); v >= later {
			t.Errorf("after restore the parent counts at %d, past its pre-restore %d", v, later)
		}
		if out := mustOK(t, c, "cat /workspace/file"); out != "before\n" {
			t.Errorf("after restore the parent's file is %q", out)
		}
	})
}
