package promote_test

import (
	"context"
	"slices"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	_ "paddock.dev/paddock/hypervisor/qemu" // registers the qemu backend
)

// TestPromoteQEMU is the promotion between two microVMs (qemu, TCG where
// KVM is unusable) through a real daemon: the child's edit, deletion and
// new executable file reach the parent, the path both changed is skipped
// as a conflict, and restoring the pre-promote checkpoint (a disk
// checkpoint of the VM) gives the parent back.
func TestPromoteQEMU(t *testing.T) {
	d := daemontest.New(t, daemontest.WithBackend("procbox", "qemu"))
	c := d.Client
	ctx := context.Background()
	parent, err := c.CreateSession(ctx, apiv1.CreateRequest{Runtime: apiv1.Runtime{Backend: "qemu"}})
	if err != nil {
		t.Fatal(err)
	}
	ws := parent.Workspace.Path
	daemontest.Sh(t, c, parent.ID, "cd "+ws+" && echo one > a && echo two > b && echo base > both")
	kids, err := c.Fork(ctx, parent.ID, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	child := kids[0].ID
	daemontest.Sh(t, c, child, "cd "+ws+" && echo ONE > a && rm b && printf '#!/bin/sh\\necho hi\\n' > run && chmod 755 run && echo child > both")
	daemontest.Sh(t, c, parent.ID, "echo parent > "+ws+"/both")

	dry, err := c.Promote(ctx, child, apiv1.PromoteRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(dry.Plan.Apply); got != "modified:a,deleted:b,added:run" || len(dry.Plan.Conflicts) != 1 {
		t.Fatalf("plan: apply %s conflicts %+v", got, dry.Plan.Conflicts)
	}
	res, err := c.Promote(ctx, child, apiv1.PromoteRequest{PlanID: dry.PlanID, SkipConflicts: true})
	if err != nil || !slices.Equal(res.Skipped, []string{"both"}) || res.Checkpoint == "" {
		t.Fatalf("apply: %v %+v", err, res)
	}
	if out := daemontest.Sh(t, c, parent.ID, "cd "+ws+" && cat a both && ./run && test ! -e b && echo no-b"); out != "ONE\nparent\nhi\nno-b\n" {
		t.Errorf("the parent after the promotion: %q", out)
	}
	if _, err := c.Restore(ctx, parent.ID, -1, res.Checkpoint); err != nil {
		t.Fatal(err)
	}
	if out := daemontest.Sh(t, c, parent.ID, "cd "+ws+" && cat a b both && ls"); out != "one\ntwo\nparent\na\nb\nboth\n" {
		t.Errorf("the parent after restoring %s: %q", res.Checkpoint, out)
	}
}

// TestEvaluateQEMU is TestEvaluateLive's evaluate and promote between
// microVMs (qemu, TCG where KVM is unusable): three candidates, each a
// VM forked from the parent's disk; the passing one wins, the two losers
// are deleted and promoting the winner applies its change; a rollout
// into 3 runs in 3 VMs and leaves none.
func TestEvaluateQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("boots seven VMs")
	}
	d := daemontest.New(t, daemontest.WithBackend("procbox", "qemu"))
	evaluateLive(t, d, apiv1.Runtime{Backend: "qemu", MemoryMB: 256})
}
