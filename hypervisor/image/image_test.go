package image_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
)

func TestValidName(t *testing.T) {
	for name, ok := range map[string]bool{
		"mini": true, "debian-12.1_x": true, "": false, "Upper": false, "../x": false,
		"-lead": false, strings.Repeat("a", 64): true, strings.Repeat("a", 65): false, "a b": false,
	} {
		if err := image.ValidName(name); (err == nil) != ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestBuildMini(t *testing.T) {
	testutil.RequiresRoot(t) // chown of /workspace to the guest user
	s := image.Store{Dir: t.TempDir()}
	var phases []string
	m, err := s.BuildMini(context.Background(), "m1", func(p string, done, total int) {
		if len(phases) == 0 || phases[len(phases)-1] != p {
			phases = append(phases, p)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Builder != "mini" || m.Format != image.FormatVersion || m.Files < 50 {
		t.Errorf("meta: %+v", m)
	}
	if len(phases) < 2 || phases[0] != "copying tools" || phases[len(phases)-1] != "done" {
		t.Errorf("progress phases: %v", phases)
	}
	root, err := s.Rootfs("m1")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"usr/bin/sh", "usr/bin/ls", "etc/machine-id", "etc/hosts"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), "agent:x:1000:1000:") {
		t.Errorf("no guest user in passwd: %q", passwd)
	}
	fi, err := os.Stat(filepath.Join(root, "workspace"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1000 {
		t.Errorf("/workspace not owned by the guest user: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(root, "tmp")); fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("/tmp mode %v", fi.Mode())
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Name != "m1" {
		t.Errorf("list: %v %v", list, err)
	}
	// A rebuild replaces the image in place.
	if _, err := s.BuildMini(context.Background(), "m1", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("m1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rootfs("m1"); !errors.Is(err, image.ErrNotFound) {
		t.Errorf("after remove: %v", err)
	}
	if _, err := s.BuildMini(context.Background(), "Bad Name", nil); !errors.Is(err, image.ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
}

// TestDebianImage builds the debootstrap image from Debian's mirror (about
// a minute and a half the first time on a machine, cached after) and runs
// its tools in a real sandbox.
func TestDebianImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Debian root filesystem from the network; not in -short")
	}
	dir, phases := testutil.DebianImages(t)
	if phases != nil {
		want := []string{"downloading", "unpacking", "configuring", "done"}
		for _, w := range want {
			found := false
			for _, p := range phases {
				found = found || p == w
			}
			if !found {
				t.Errorf("progress never reported %q: %v", w, phases)
			}
		}
	}
	b, err := procbox.New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := b.Create(context.Background(), hypervisor.MachineSpec{Image: testutil.DebianImageName})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	c := client.New(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) })
	res, err := c.Exec(context.Background(), api.ExecRequest{Command: api.Command{Shell: "python3 -c 'print(6*7)' && git --version && curl --version | head -1 && ps -o user= -p $$ && test -s /etc/ssl/certs/ca-certificates.crt && echo certs"}})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if res.ExitCode != 0 || !strings.HasPrefix(out, "42\ngit version ") || !strings.Contains(out, "curl ") || !strings.Contains(out, "agent\ncerts\n") {
		t.Errorf("exit %d stdout %q stderr %q", res.ExitCode, out, res.Stderr)
	}
	p, err := c.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !p.ReadyFor["git"] || !p.ReadyFor["promote"] || !p.ReadyFor["build_python"] {
		t.Errorf("probe: %+v", p)
	}
}

// TestRebuildKeepsBuildsInUse rebuilds an image while a user stands on its
// build: the old build stays until released, then goes.
func TestRebuildKeepsBuildsInUse(t *testing.T) {
	testutil.RequiresRoot(t)
	s := image.Store{Dir: t.TempDir()}
	if _, err := s.BuildMini(context.Background(), "m", nil); err != nil {
		t.Fatal(err)
	}
	old, err := s.Rootfs("m")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Use(old, "m-machine1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BuildMini(context.Background(), "m", nil); err != nil {
		t.Fatal(err)
	}
	cur, _ := s.Rootfs("m")
	if cur == old {
		t.Fatal("a rebuild reused the build directory")
	}
	if _, err := os.Stat(filepath.Join(old, "usr/bin/sh")); err != nil {
		t.Fatalf("the build in use was removed by the rebuild: %v", err)
	}
	// Removing the image keeps the used build too.
	if err := s.Remove("m"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(old, "usr/bin/sh")); err != nil {
		t.Fatalf("the build in use was removed by image rm: %v", err)
	}
	if _, err := os.Stat(cur); err == nil {
		t.Errorf("the unused current build survived image rm")
	}
	if err := s.Release(old, "m-machine1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(filepath.Dir(old)))); err == nil {
		t.Errorf("the image directory outlived its last user: %s", filepath.Dir(filepath.Dir(filepath.Dir(old))))
	}
	if err := s.Use(old, "../escape"); err == nil {
		t.Error("a user name with a slash was accepted")
	}
}
