package procbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
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
		{"root user", hypervisor.MachineSpec{Image: "mini", GuestUser: "0:0"}, hypervisor.ErrInvalidSpec, "cannot run as root"},
		{"root group", hypervisor.MachineSpec{Image: "mini", GuestUser: "1000:0"}, hypervisor.ErrInvalidSpec, "cannot run as root"},
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
	defer b.Close()
	if _, err := b.Create(context.Background(), hypervisor.MachineSpec{Image: "nope"}); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("unknown image: %v", err)
	}
	bad := hypervisor.Snapshot{ID: "snap-x", Backend: Name, Image: "mini", Layers: []string{"/etc"}}
	if _, err := b.Create(context.Background(), hypervisor.MachineSpec{From: &bad}); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("unknown snapshot: %v", err)
	}
	other := bad
	other.Backend = "qemu"
	if _, err := b.Create(context.Background(), hypervisor.MachineSpec{From: &other}); !errors.Is(err, hypervisor.ErrInvalidSpec) {
		t.Errorf("another backend's snapshot: %v", err)
	}
	// A real snapshot with forged layer paths is used as recorded: the
	// caller's paths never reach the overlay.
	m, err := b.Create(context.Background(), hypervisor.MachineSpec{Image: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	s, err := m.Checkpoint(context.Background(), "real", false)
	if err != nil {
		t.Fatal(err)
	}
	forged := s
	forged.Layers = []string{"/etc", "/root"}
	rec, _, err := b.resolveSnapshot(forged)
	if err != nil || len(rec.Layers) != 1 || rec.Layers[0] != s.Layers[0] {
		t.Errorf("forged layers: %v %v", rec.Layers, err)
	}
	if _, err := b.LoadSnapshot("snap-missing"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("missing snapshot: %v", err)
	}
}

// TestStores runs the lifecycle on both layer stores and checks what makes
// them differ: btrfs snapshots copy nothing, tmpfs ones copy the changes.
func TestStores(t *testing.T) {
	testutil.RequiresRoot(t)
	for _, kind := range []string{StoreBtrfs, StoreTmpfs} {
		t.Run(kind, func(t *testing.T) {
			if kind == StoreBtrfs {
				testutil.RequiresCommand(t, "mkfs.btrfs")
			}
			state := t.TempDir()
			b, err := New(hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), Options: map[string]string{"store": kind}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := b.Close(); err != nil {
					t.Error(err)
				}
				raw, _ := os.ReadFile("/proc/self/mountinfo")
				if strings.Contains(string(raw), state) {
					t.Errorf("a mount under the state dir outlived Close")
				}
			}()
			ctx := context.Background()
			m, err := b.create(ctx, hypervisor.MachineSpec{Image: "mini", DiskMB: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop(ctx)
			if got, _, _ := b.StoreKind(); got != kind {
				t.Fatalf("store %s, want %s", got, kind)
			}
			c := clientFor(m)
			mustRun(t, c, "head -c 20000000 /dev/urandom > /workspace/big; echo one > /workspace/f")
			s1, err := m.Checkpoint(ctx, "one", false)
			if err != nil {
				t.Fatal(err)
			}
			switch kind {
			case StoreBtrfs:
				// Nothing copied: the snapshot shares all its data with
				// the machine (its qgroup's exclusive bytes are a few
				// tree blocks), while Bytes says what it may come to
				// hold once the machine writes over it.
				excl, err := btrfsQgroupBytes(filepath.Join(state, "procbox", "store", "snapshots", s1.ID), "exclusive")
				if err != nil || excl > 1<<20 {
					t.Errorf("btrfs checkpoint holds %d bytes of its own (%v), want nothing copied", excl, err)
				}
				if s1.Bytes < 20000000 {
					t.Errorf("btrfs checkpoint says it may hold %d bytes, want at least the 20 MB written", s1.Bytes)
				}
			case StoreTmpfs:
				if s1.Bytes < 20000000 {
					t.Errorf("tmpfs checkpoint copied %d bytes, want the 20 MB written", s1.Bytes)
				}
			}
			mustRun(t, c, "echo two > /workspace/f")
			s2, err := m.Checkpoint(ctx, "two", false)
			if err != nil {
				t.Fatal(err)
			}
			// The disk limit holds on this store too.
			if out := mustRun(t, c, "head -c 100000000 /dev/zero > /workspace/fill 2>&1; echo rc=$?; rm -f /workspace/fill"); strings.Contains(out, "rc=0") {
				t.Errorf("wrote 100 MB into a 64 MB disk: %s", out)
			}
			if err := m.Restore(ctx, s1); err != nil {
				t.Fatal(err)
			}
			if out := mustRun(t, clientFor(m), "cat /workspace/f; stat -c %s /workspace/big"); out != "one\n20000000\n" {
				t.Errorf("after restore to one: %q", out)
			}
			kids, err := m.Fork(ctx, s2, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range kids {
				if out := mustRun(t, clientFor(k), "cat /workspace/f"); out != "two\n" {
					t.Errorf("child sees %q", out)
				}
			}
			// s1 is under the running parent; s2 under the children. Deleting
			// both keeps their layers until nobody stands on them.
			if err := m.DeleteSnapshot(ctx, s1); err != nil {
				t.Fatal(err)
			}
			if err := m.DeleteSnapshot(ctx, s2); err != nil {
				t.Fatal(err)
			}
			for _, l := range append(s1.Layers, s2.Layers...) {
				if _, err := os.Stat(l); err != nil {
					t.Errorf("layer %s removed while in use: %v", l, err)
				}
			}
			if _, err := b.LoadSnapshot(s1.ID); !errors.Is(err, hypervisor.ErrNotFound) {
				t.Errorf("deleted snapshot still loads: %v", err)
			}
			for _, k := range kids {
				k.Stop(ctx)
			}
			m.Stop(ctx)
			for _, l := range append(s1.Layers, s2.Layers...) {
				if _, err := os.Stat(l); err == nil {
					t.Errorf("layer %s outlived every user", l)
				}
			}
			ents, _ := os.ReadDir(filepath.Join(state, "procbox", "snapshots"))
			if len(ents) != 0 {
				t.Errorf("%d snapshot records left", len(ents))
			}
		})
	}
}

func clientFor(m hypervisor.Machine) *client.Client {
	return client.New(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) })
}

func mustRun(t *testing.T, c *client.Client, line string) string {
	t.Helper()
	res, err := c.Exec(context.Background(), api.ExecRequest{Command: api.Command{Shell: line, TimeoutSeconds: 60}})
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%q: exit %d: %s", line, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

// TestLayersKeptForOtherBackends deletes a snapshot through one backend
// while a machine of another backend on the same state dir stands on it.
func TestLayersKeptForOtherBackends(t *testing.T) {
	testutil.RequiresRoot(t)
	state := t.TempDir()
	cfg := hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), Options: map[string]string{"store": StoreTmpfs}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	m, err := a.create(ctx, hypervisor.MachineSpec{Image: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx)
	mustRun(t, clientFor(m), "echo kept > /workspace/f")
	s, err := m.Checkpoint(ctx, "s", false)
	if err != nil {
		t.Fatal(err)
	}
	kids, err := m.Fork(ctx, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer kids[0].Stop(ctx)
	if err := b.DeleteSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, clientFor(kids[0]), "cat /workspace/f"); out != "kept\n" {
		t.Errorf("the child lost its layer to another backend's delete: %q", out)
	}
	kids[0].Stop(ctx)
	if err := b.DeleteSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Layers[0]); err == nil {
		t.Errorf("layer %s outlived its last user", s.Layers[0])
	}
}

// TestBtrfsQgroupsDoNotPileUp creates and stops machines on the btrfs
// store and checks their qgroups are destroyed (now or on a later call).
func TestBtrfsQgroupsDoNotPileUp(t *testing.T) {
	testutil.RequiresRoot(t)
	btrfsCLI := testutil.RequiresCommand(t, "btrfs")
	state := t.TempDir()
	b, err := New(hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), Options: map[string]string{"store": StoreBtrfs}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	for range 6 {
		m, err := b.create(ctx, hypervisor.MachineSpec{Image: "mini"})
		if err != nil {
			t.Fatal(err)
		}
		m.Stop(ctx)
	}
	// Wait for the kernel to finish dropping the deleted subvolumes, then
	// one more create retries whatever qgroup it still held.
	if out, err := exec.Command(btrfsCLI, "subvolume", "sync", filepath.Join(state, "procbox", "store")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m, err := b.create(ctx, hypervisor.MachineSpec{Image: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx)
	out, err := exec.Command(btrfsCLI, "qgroup", "show", filepath.Join(state, "procbox", "store")).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if stale := strings.Count(string(out), "<stale>"); stale > 0 {
		t.Errorf("%d stale qgroups after 6 machines came and went:\n%s", stale, out)
	}
}

// TestGuestBinarySealed checks that the guest agent runs from a sealed
// memfd: even root on the host cannot write, grow or shrink the file the
// sandbox's PID 1 executes, so nothing inside (which could at most reach
// /proc/1/exe) can change the agent, of this sandbox or the next.
func TestGuestBinarySealed(t *testing.T) {
	testutil.RequiresRoot(t)
	b, err := New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := b.Create(context.Background(), hypervisor.MachineSpec{Image: "mini"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	exe := fmt.Sprintf("/proc/%d/exe", m.(*Machine).PID())
	target, err := os.Readlink(exe)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(target, "/memfd:") {
		t.Errorf("PID 1 runs %q, want a memfd", target)
	}
	ro, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	seals, err := unix.FcntlInt(ro.Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []int{unix.F_SEAL_SEAL, unix.F_SEAL_WRITE, unix.F_SEAL_GROW, unix.F_SEAL_SHRINK} {
		if seals&s == 0 {
			t.Errorf("seals %#x lack %#x", seals, s)
		}
	}
	if _, err := unix.FcntlInt(ro.Fd(), unix.F_ADD_SEALS, 0); err == nil {
		t.Error("seals could still be changed")
	}
	if f, err := os.OpenFile(exe, os.O_WRONLY, 0); err == nil {
		_, werr := f.Write([]byte("x"))
		f.Close()
		t.Errorf("the sealed guest binary opened for writing (write: %v)", werr)
	} else if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ETXTBSY) {
		t.Errorf("opening it for writing: %v, want EPERM (the write seal) or ETXTBSY (it runs)", err)
	}
	// The backend's own descriptor was made writable (memfd_create); the
	// seals refuse it every change.
	b.mu.Lock()
	gf := b.guestFile
	b.mu.Unlock()
	if gf == nil {
		t.Fatal("the backend holds no guest memfd")
	}
	if _, err := gf.WriteAt([]byte("x"), 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("writing through the backend's descriptor: %v, want EPERM (the write seal)", err)
	}
	if err := gf.Truncate(1); !errors.Is(err, unix.EPERM) {
		t.Errorf("truncating it: %v, want EPERM (the shrink seal)", err)
	}
}
