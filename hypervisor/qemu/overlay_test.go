package qemu

import (
	"context"
	"strings"
	"testing"

	"paddock.dev/paddock/hypervisor"
)

// TestOverlayView mounts a view of the image's /etc in a VM: the guest
// user writes and deletes in the view while /etc stays as it was and the
// uppers stay out of its reach; a disk checkpoint keeps the view's
// changes through a restore (a fresh boot that mounts the view again) and
// a memory checkpoint through a fork; a lower that a checkpoint made a
// symbolic link is refused.
func TestOverlayView(t *testing.T) {
	b := egressBackend(t)
	ctx := context.Background()
	ov := []hypervisor.Overlay{{Lower: "/etc", Target: "/srv/view"}}
	m, err := b.create(ctx, hypervisor.MachineSpec{Image: "mini", Overlays: ov})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx)
	c := vmClient(m)
	if out := vmMustExec(t, c, "cat /srv/view/passwd"); out != vmMustExec(t, c, "cat /etc/passwd") || out == "" {
		t.Errorf("the view does not show the lower: %q", out)
	}
	vmMustExec(t, c, "id -u > /srv/view/new && rm /srv/view/hosts && mkdir /srv/view/d && echo 1 > /srv/view/d/f")
	if out := vmMustExec(t, c, "ls /etc; echo --; ls -a /srv/view"); !strings.Contains(out, "hosts\n") || strings.Contains(out[:strings.Index(out, "--")], "new\n") {
		t.Errorf("writes in the view reached the lower: %q", out)
	}
	if out := vmMustExec(t, c, "cat /srv/view/new; test -e /srv/view/hosts || echo gone"); out != "1000\ngone\n" {
		t.Errorf("the view after writes: %q", out)
	}
	if res := vmExec(t, c, "echo x >> /srv/view/passwd"); res.ExitCode == 0 {
		t.Error("the guest user modified a root-owned file of the lower through the view")
	}
	if res := vmExec(t, c, "ls /var/lib/paddock-overlay"); res.ExitCode == 0 {
		t.Errorf("the guest user reaches the uppers: %s", res.Stdout)
	}
	s, err := m.Checkpoint(ctx, "v", false)
	if err != nil {
		t.Fatal(err)
	}
	vmMustExec(t, c, "rm /srv/view/new; echo 2 > /srv/view/d/f")
	if err := m.Restore(ctx, s); err != nil {
		t.Fatal(err)
	}
	want := "1000\n1\ngone\n"
	if out := vmMustExec(t, c, "cat /srv/view/new /srv/view/d/f; test -e /srv/view/hosts || echo gone"); out != want {
		t.Errorf("the view after a disk restore: %q, want %q", out, want)
	}
	mem, err := m.Checkpoint(ctx, "vm", true)
	if err != nil {
		t.Fatal(err)
	}
	kids, err := m.Fork(ctx, mem, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer kids[0].Stop(ctx)
	if out := vmMustExec(t, vmClient(kids[0]), "cat /srv/view/new /srv/view/d/f; test -e /srv/view/hosts || echo gone; test -e /etc/hosts && echo lower-intact"); out != want+"lower-intact\n" {
		t.Errorf("the view in a fork child: %q", out)
	}
	// A lower that a checkpoint made a symbolic link is refused at boot.
	vmMustExec(t, c, "ln -s / /workspace/evil")
	s2, err := m.Checkpoint(ctx, "evil", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.create(ctx, hypervisor.MachineSpec{From: &s2, Overlays: []hypervisor.Overlay{{Lower: "/workspace/evil", Target: "/srv/x"}}}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlinked lower: %v", err)
	}
}
