package procbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

func TestCheckOverlays(t *testing.T) {
	ok := []hypervisor.Overlay{{Lower: "/opt/src", Target: "/workspace"}, {Lower: "/etc", Target: "/srv/etc-view"}}
	if err := checkOverlays(ok); err != nil {
		t.Fatal(err)
	}
	for _, tc := range [][]hypervisor.Overlay{
		{{Lower: "opt", Target: "/w"}},
		{{Lower: "/opt/../etc", Target: "/w"}},
		{{Lower: "/opt/", Target: "/w"}},
		{{Lower: "/a:b", Target: "/w"}},
		{{Lower: "/a,b", Target: "/w"}},
		{{Lower: "/a", Target: "/"}},
		{{Lower: "/opt", Target: "/opt/w"}},
		{{Lower: "/opt/w", Target: "/opt"}},
		{{Lower: "/proc/self", Target: "/w"}},
		{{Lower: "/a", Target: "/dev/x"}},
		{{Lower: "/a", Target: "/w"}, {Lower: "/b", Target: "/w/x"}},
		{{Lower: "/a", Target: "/1"}, {Lower: "/a", Target: "/2"}, {Lower: "/a", Target: "/3"}, {Lower: "/a", Target: "/4"}, {Lower: "/a", Target: "/5"}},
	} {
		if err := checkOverlays(tc); !errors.Is(err, hypervisor.ErrInvalidSpec) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
}

// TestOverlayView mounts a view of the image's /etc on both stores: the
// guest user writes and deletes in the view, /etc stays as it was, a
// checkpoint keeps the view's changes through restore and fork, and a
// lower that does not exist, or that a checkpoint turned into a symbolic
// link, makes the create fail with nothing left.
func TestOverlayView(t *testing.T) {
	testutil.RequiresRoot(t)
	for _, kind := range []string{StoreBtrfs, StoreTmpfs} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			b, err := New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), Options: map[string]string{"store": kind}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ov := []hypervisor.Overlay{{Lower: "/etc", Target: "/srv/view"}}
			m, err := b.create(ctx, hypervisor.MachineSpec{Image: "mini", Overlays: ov})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop(ctx)
			c := clientFor(m)
			if out := mustRun(t, c, "cat /srv/view/passwd"); out != mustRun(t, c, "cat /etc/passwd") || out == "" {
				t.Errorf("the view does not show the lower: %q", out)
			}
			mustRun(t, c, "id -u > /srv/view/new && rm /srv/view/hosts && mkdir /srv/view/d && echo 1 > /srv/view/d/f")
			if out := mustRun(t, c, "ls /etc; ls -a /srv/view"); !strings.Contains(out, "hosts\n") || strings.Contains(out[:strings.Index(out, ".\n")], "new") {
				t.Errorf("writes in the view reached the lower: %q", out)
			}
			if out := mustRun(t, c, "cat /srv/view/new; test -e /srv/view/hosts || echo gone"); out != "1000\ngone\n" {
				t.Errorf("the view after writes: %q", out)
			}
			if res := run(t, c, "echo x >> /srv/view/passwd"); res.ExitCode == 0 {
				t.Error("the guest user modified a root-owned file of the lower through the view")
			}
			s, err := m.Checkpoint(ctx, "v", false)
			if err != nil {
				t.Fatal(err)
			}
			mustRun(t, c, "rm /srv/view/new; echo 2 > /srv/view/d/f")
			if err := m.Restore(ctx, s); err != nil {
				t.Fatal(err)
			}
			want := "1000\n1\ngone\n"
			if out := mustRun(t, c, "cat /srv/view/new /srv/view/d/f; test -e /srv/view/hosts || echo gone"); out != want {
				t.Errorf("the view after restore: %q, want %q", out, want)
			}
			kids, err := m.Fork(ctx, s, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer kids[0].Stop(ctx)
			if out := mustRun(t, clientFor(kids[0]), "cat /srv/view/new /srv/view/d/f; test -e /srv/view/hosts || echo gone; cat /etc/hosts >/dev/null && echo lower-intact"); out != want+"lower-intact\n" {
				t.Errorf("the view in a fork child: %q", out)
			}

			// A lower the image lacks: the create fails, nothing stays.
			if _, err := b.create(ctx, hypervisor.MachineSpec{Image: "mini", Overlays: []hypervisor.Overlay{{Lower: "/nope", Target: "/srv/x"}}}); err == nil || !strings.Contains(err.Error(), "does not exist") {
				t.Errorf("missing lower: %v", err)
			}
			// A lower that a checkpoint made a symbolic link to the
			// host's root is refused, not followed.
			mustRun(t, c, "ln -s / /workspace/evil")
			s2, err := m.Checkpoint(ctx, "evil", false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.create(ctx, hypervisor.MachineSpec{From: &s2, Overlays: []hypervisor.Overlay{{Lower: "/workspace/evil", Target: "/srv/x"}}}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("symlinked lower: %v", err)
			}
			if ents, _ := os.ReadDir(filepath.Join(b.dir, "machines")); len(ents) != 2 {
				t.Errorf("failed creates left machine directories: %v", ents)
			}
		})
	}
}

func run(t *testing.T, c *client.Client, line string) *api.ExecResult {
	t.Helper()
	res, err := c.Exec(context.Background(), api.ExecRequest{Command: api.Command{Shell: line, TimeoutSeconds: 60}})
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return res
}
