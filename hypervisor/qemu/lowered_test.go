package qemu

import (
	"context"
	"strings"
	"testing"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

// TestAgentThreadsLowered boots a VM and reads, as the guest user, the
// status of every thread of every user-space process but PID 1: the
// agent (vm-serve lowers its privileges on all its threads at once, with
// no re-exec) and what it started must all have no_new_privs, the seccomp
// filter and the reduced bounding set; PID 1 alone keeps root's.
func TestAgentThreadsLowered(t *testing.T) {
	testutil.RequiresRoot(t)
	if testing.Short() {
		t.Skip("boots a VM under TCG")
	}
	b, err := New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t)})
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Capabilities(); !c.Available {
		t.Skipf("qemu cannot run here: %s", c.Reason)
	}
	ctx := context.Background()
	m, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx)
	// A kernel thread has an empty cmdline.
	script := `for t in /proc/[0-9]*/task/*; do p=${t%/task/*}; [ -n "$(tr -d '\0' < $p/cmdline 2>/dev/null | head -c1)" ] || continue; ` +
		`echo "${p#/proc/} ${t##*/} $(grep -E '^(CapBnd|NoNewPrivs|Seccomp):' $t/status | tr '\t\n' '  ')"; done`
	res, err := vmClient(m).Exec(ctx, api.ExecRequest{Command: api.Command{Shell: script, TimeoutSeconds: 60}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	agentThreads, pid1 := 0, false
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			t.Fatalf("line %q", line)
		}
		if f[0] == "1" {
			pid1 = true
			if f[5] != "0" {
				t.Errorf("PID 1 has no_new_privs: %s", line)
			}
			continue
		}
		agentThreads++
		if f[3] == "000001ffffffffff" || f[5] != "1" || f[7] != "2" {
			t.Errorf("a thread not lowered: %s", line)
		}
	}
	if !pid1 || agentThreads < 4 {
		t.Errorf("saw PID 1 %v and %d other threads:\n%s", pid1, agentThreads, res.Stdout)
	}
}
