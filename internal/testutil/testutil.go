// Package testutil holds what tests across Paddock share: skipping by
// capability with a stated reason (never silently), the guest binary and
// the small test image.
package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/hypervisor/image"
)

// NonrootRunEnv is set to 1 by scripts/test-nonroot.sh (make
// test-nonroot) for the tests it runs as an ordinary user: tests listed
// there claim to need no root.
const NonrootRunEnv = "PADDOCK_NONROOT_RUN"

// RequiresRoot skips the test unless it runs as root. In the non-root
// run (NonrootRunEnv) it fails the test instead: a test on that list
// that needs root, for instance one that boots a real backend, is on it
// by mistake, and a skip there would prove nothing.
func RequiresRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(NonrootRunEnv) == "1" {
		t.Fatal("needs root, but it is in the non-root run (make test-nonroot, NONROOT_PKGS): run it on the fake backend (hypervisor/fake) or take it off that list")
	}
	t.Skip("needs root: sandboxes use namespaces, overlayfs and cgroups (run `make test` as root)")
}

// RequiresKVM skips the test unless /dev/kvm can be opened.
func RequiresKVM(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("needs KVM: %v", err)
	}
	f.Close()
}

// RequiresCommand skips the test unless name is on PATH.
func RequiresCommand(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("needs %s on PATH (install it, or run `make deps`)", name)
	}
	return p
}

// RepoRoot returns the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	guestOnce sync.Once
	guestPath string
	guestErr  error
)

// GuestBinary returns a static paddock-guest: $PADDOCK_GUEST when set
// (make test sets it), otherwise one built once into a cache directory.
func GuestBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PADDOCK_GUEST"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("PADDOCK_GUEST=%s: %v", p, err)
		}
		return p
	}
	guestOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "paddock-test-bin")
		if guestErr = privateCache(dir); guestErr != nil {
			return
		}
		unlock := lockFile(filepath.Join(dir, ".lock"))
		defer unlock()
		out := filepath.Join(dir, "paddock-guest")
		cmd := exec.Command("make", "-s", "guest", "BIN="+dir)
		cmd.Dir = RepoRoot()
		b, err := cmd.CombinedOutput()
		if err != nil {
			guestErr = &buildError{out: string(b), err: err}
			return
		}
		guestPath = out
	})
	if guestErr != nil {
		t.Fatalf("build paddock-guest: %v", guestErr)
	}
	return guestPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// MiniImageName is the name tests use for the mini image.
const MiniImageName = "mini"

var (
	imageOnce sync.Once
	imageDir  string
	imageErr  error
)

// MiniImages returns an images directory holding the mini image, built
// once per machine into a shared cache (serialized by a lock file).
func MiniImages(t testing.TB) string {
	t.Helper()
	imageOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "paddock-test-images")
		if imageErr = privateCache(dir); imageErr != nil {
			return
		}
		unlock := lockFile(filepath.Join(dir, ".lock-"+MiniImageName))
		defer unlock()
		s := image.Store{Dir: dir}
		if m, err := s.Get(MiniImageName); err == nil && m.Format == image.FormatVersion && os.Getenv("PADDOCK_REBUILD_IMAGES") == "" {
			imageDir = dir
			return
		}
		_, imageErr = s.BuildMini(context.Background(), MiniImageName, nil)
		imageDir = dir
	})
	if imageErr != nil {
		t.Fatalf("build the mini image: %v", imageErr)
	}
	return imageDir
}

// MachineLock holds a machine-wide lock named name until the test ends,
// for tests that take something the whole host shares (an address range
// on the host's own network namespace, say), so two test processes never
// hold it at once.
func MachineLock(t testing.TB, name string) {
	t.Helper()
	unlock := lockFile(filepath.Join(os.TempDir(), "paddock-test-lock-"+name))
	t.Cleanup(unlock)
}

// lockFile takes an exclusive flock and returns its release.
func lockFile(path string) func() {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return func() {}
	}
	unix.Flock(int(f.Fd()), unix.LOCK_EX)
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }
}

var (
	debianOnce sync.Once
	debianErr  error
	debianLog  []string
)

// DebianImageName is the name tests use for the debootstrap image.
const DebianImageName = "debian"

// DebianImages returns an images directory holding the debian image, built
// once per machine into the shared test cache (minutes on the first run),
// and the progress phases the build reported ("phase done/total" lines; empty
// when the cached image was reused).
func DebianImages(t testing.TB) (string, []string) {
	t.Helper()
	RequiresRoot(t)
	RequiresCommand(t, "debootstrap")
	dir := filepath.Join(os.TempDir(), "paddock-test-images")
	debianOnce.Do(func() {
		if debianErr = privateCache(dir); debianErr != nil {
			return
		}
		unlock := lockFile(filepath.Join(dir, ".lock-"+DebianImageName))
		defer unlock()
		s := image.Store{Dir: dir}
		if m, err := s.Get(DebianImageName); err == nil && m.Format == image.FormatVersion && os.Getenv("PADDOCK_REBUILD_IMAGES") == "" {
			return
		}
		var mu sync.Mutex
		last := ""
		_, debianErr = s.BuildDebian(context.Background(), DebianImageName, image.DebianOptions{}, func(phase string, done, total int) {
			mu.Lock()
			defer mu.Unlock()
			if phase != last {
				debianLog = append(debianLog, phase)
				last = phase
			}
		})
	})
	if debianErr != nil {
		t.Fatalf("build the debian image: %v", debianErr)
	}
	return dir, debianLog
}

// privateCache makes sure a shared cache directory in /tmp belongs to us
// and nobody else can write it: tests run what it holds as root, so a
// directory another user planted first must not be used.
func privateCache(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("test cache %s is not a directory owned by uid %d that only it can write (mode %v): remove it", dir, os.Geteuid(), fi.Mode())
	}
	return nil
}

// KillSandbox kills every process of procbox sandbox id (its cgroup's,
// cgroup v1 or v2), behind the daemon's back, as a crash would.
func KillSandbox(t testing.TB, id string) {
	t.Helper()
	procs, _ := filepath.Glob("/sys/fs/cgroup/pids/paddock/" + id + "/cgroup.procs")
	if len(procs) == 0 {
		procs, _ = filepath.Glob("/sys/fs/cgroup/paddock/" + id + "/cgroup.procs")
	}
	if len(procs) == 0 {
		t.Fatalf("no cgroup for sandbox %s", id)
	}
	raw, err := os.ReadFile(procs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
