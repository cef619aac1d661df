package procbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec hypervisor.MachineSpec
		err  error
		want string // substring of the error
	}{
		{"defaults", hypervisor.MachineSpec{Image: "mini"}, nil, ""},
		{"no image", hypervisor.MachineSpec{}, hypervisor.ErrInvalidSpec, "an image is required"},
		{"bad id", hypervisor.MachineSpec{Image: "mini", ID: "../x"}, hypervisor.ErrInvalidSpec, "id"},
		{"long id", hypervisor.MachineSpec{Image: "mini", ID: strings.Repeat("a", 65)}, hypervisor.ErrInvalidSpec, "id"},
		{"bad hostname", hypervisor.MachineSpec{Image: "mini", Hostname: "a b"}, hypervisor.ErrInvalidSpec, "hostname"},
		{"cpus", hypervisor.MachineSpec{Image: "mini", CPUs: 1000}, hypervisor.ErrInvalidSpec, "cpus"},
		{"memory", hypervisor.MachineSpec{Image: "mini", MemoryMB: 1}, hypervisor.ErrInvalidSpec, "memory_mb"},
		{"disk", hypervisor.MachineSpec{Image: "mini", DiskMB: -1}, hypervisor.ErrInvalidSpec, "disk_mb"},
		{"pids", hypervisor.MachineSpec{Image: "mini", PIDs: 2}, hypervisor.ErrInvalidSpec, "pids"},
		{"network", hypervisor.MachineSpec{Image: "mini", Network: "nat"}, hypervisor.ErrNotSupported, "network"},
		{"user", hypervisor.MachineSpec{Image: "mini", GuestUser: "root"}, hypervisor.ErrInvalidSpec, "uid:gid"},
		{"env", hypervisor.MachineSpec{Image: "mini", Env: []string{"NOEQUALS"}}, hypervisor.ErrInvalidSpec, "KEY=VALUE"},
		{"env newline", hypervisor.MachineSpec{Image: "mini", Env: []string{"A=b\nc"}}, hypervisor.ErrInvalidSpec, "KEY=VALUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := normalize(tc.spec)
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got.MemoryMB != DefaultMemoryMB || got.DiskMB != DefaultDiskMB || got.PIDs != DefaultPIDs || got.Network != hypervisor.NetworkOffline || got.GuestUser != "1000:1000" || got.Hostname != got.ID {
					t.Errorf("defaults not filled: %+v", got)
				}
				return
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %v containing %q", err, tc.err, tc.want)
			}
		})
	}
}

// TestCopyTreeKeepsLayerSemantics copies a tree holding what an overlayfs
// upper layer can hold and checks each kind survives.
func TestCopyTreeKeepsLayerSemantics(t *testing.T) {
	testutil.RequiresRoot(t)
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "layer")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "opaque/sub"), 0o750))
	must(unix.Setxattr(filepath.Join(src, "opaque"), "trusted.overlay.opaque", []byte("y"), 0))
	must(unix.Setxattr(filepath.Join(src, "opaque"), "trusted.overlay.origin", []byte("stale"), 0))
	must(os.WriteFile(filepath.Join(src, "opaque/sub/f"), []byte("data"), 0o640))
	must(os.Chown(filepath.Join(src, "opaque/sub/f"), 1000, 1000))
	must(os.Link(filepath.Join(src, "opaque/sub/f"), filepath.Join(src, "hard")))
	must(os.Symlink("opaque/sub/f", filepath.Join(src, "link")))
	must(unix.Mknod(filepath.Join(src, "whiteout"), unix.S_IFCHR, 0))
	must(unix.Mkfifo(filepath.Join(src, "fifo"), 0o600))
	n, err := copyTree(context.Background(), src, dst)
	must(err)
	if n != 4 {
		t.Errorf("copied %d bytes, want 4 (hard link counted once)", n)
	}
	b, err := os.ReadFile(filepath.Join(dst, "opaque/sub/f"))
	if err != nil || string(b) != "data" {
		t.Errorf("file: %q %v", b, err)
	}
	var st, st2 unix.Stat_t
	must(unix.Lstat(filepath.Join(dst, "opaque/sub/f"), &st))
	if st.Uid != 1000 || st.Mode&0o777 != 0o640 {
		t.Errorf("owner/mode: uid %d mode %o", st.Uid, st.Mode&0o777)
	}
	must(unix.Lstat(filepath.Join(dst, "hard"), &st2))
	if st.Ino != st2.Ino {
		t.Error("hard link became a copy")
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "opaque/sub/f" {
		t.Errorf("symlink: %q %v", l, err)
	}
	must(unix.Lstat(filepath.Join(dst, "whiteout"), &st))
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("whiteout: mode %o rdev %d", st.Mode, st.Rdev)
	}
	must(unix.Lstat(filepath.Join(dst, "fifo"), &st))
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Errorf("fifo: mode %o", st.Mode)
	}
	buf := make([]byte, 8)
	if sz, err := unix.Getxattr(filepath.Join(dst, "opaque"), "trusted.overlay.opaque", buf); err != nil || string(buf[:sz]) != "y" {
		t.Errorf("opaque xattr: %q %v", buf[:max(sz, 0)], err)
	}
	if _, err := unix.Getxattr(filepath.Join(dst, "opaque"), "trusted.overlay.origin", buf); err == nil {
		t.Error("stale overlay origin xattr was copied")
	}
	must(unix.Lstat(filepath.Join(dst, "opaque"), &st))
	if st.Mode&0o777 != 0o750 {
		t.Errorf("dir mode %o", st.Mode&0o777)
	}
}

func TestCreateRefusesUnknownImageAndSnapshot(t *testing.T) {
	testutil.RequiresRoot(t)
	b, err := New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(context.Background(), hypervisor.MachineSpec{Image: "nope"}); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("unknown image: %v", err)
	}
	bad := hypervisor.Snapshot{ID: "snap-x", Backend: Name, Image: "mini", Layers: []string{"/etc"}}
	if _, err := b.Create(context.Background(), hypervisor.MachineSpec{From: &bad}); !errors.Is(err, hypervisor.ErrInvalidSpec) {
		t.Errorf("layer outside the store: %v", err)
	}
	if _, err := b.LoadSnapshot("snap-missing"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("missing snapshot: %v", err)
	}
}
