package speculate_test

import (
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hypervisor/qemu"
	"paddock.dev/paddock/internal/testutil"
)

// TestSpeculateQEMU: a speculation on a qemu microVM (TCG here) forks it
// into a copy VM, shows the change without making it (the session's file
// and its running counter go on untouched), and approve and apply make
// it.
func TestSpeculateQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("boots VMs")
	}
	d, s, base := liveSession(t, apiv1.CreateRequest{}, daemontest.WithBackend(qemu.Name), daemontest.WithImage(testutil.MiniImageName, testutil.MiniImages(t)))
	c := d.Client
	daemontest.Sh(t, c, s.ID, "mkdir -p /workspace/app && echo v1 > /workspace/app/main.txt")
	daemontest.Sh(t, c, s.ID, "setsid sh -c 'n=0; while true; do n=$((n+1)); echo $n > /tmp/tick; sleep 0.2; done' >/dev/null 2>&1 < /dev/null &")
	t0 := time.Now()
	var cs apiv1.Changeset
	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "echo v2 > /workspace/app/main.txt && echo n > /workspace/app/new.txt", Paths: []string{"/workspace/app"}}, &cs); st != 201 {
		t.Fatalf("speculate: %d", st)
	}
	t.Logf("the speculation took %v (took_ms %d)", time.Since(t0), cs.TookMS)
	if got := ops(&cs); got != "modified:/workspace/app/main.txt,added:/workspace/app/new.txt" || !cs.Complete {
		t.Fatalf("changeset %s complete=%v", got, cs.Complete)
	}
	if out := daemontest.Sh(t, c, s.ID, "cat /workspace/app/main.txt; ls /workspace/app"); out != "v1\nmain.txt\n" {
		t.Errorf("the session after a speculation: %q", out)
	}
	a := daemontest.Sh(t, c, s.ID, "cat /tmp/tick")
	time.Sleep(time.Second)
	if b := daemontest.Sh(t, c, s.ID, "cat /tmp/tick"); a == b {
		t.Errorf("the session's counter stopped: %s then %s", a, b)
	}
	call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil)
	if st, _ := call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/apply", nil, nil); st != 200 {
		t.Fatalf("apply: %d", st)
	}
	if out := daemontest.Sh(t, c, s.ID, "cat /workspace/app/main.txt /workspace/app/new.txt"); out != "v2\nn\n" {
		t.Errorf("the session after apply: %q", out)
	}
}
