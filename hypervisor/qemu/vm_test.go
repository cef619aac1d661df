package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/hypervisor/vmkit"
	"paddock.dev/paddock/internal/testutil"
)

// vmCache is the machine-wide cache of kernels, busybox and initramfs
// images the tests share (the kernel package is 27 MB).
func vmCache(t *testing.T) string {
	dir := filepath.Join(os.TempDir(), "paddock-test-vm")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// miniKit builds the boot kit from the mini image, skipping when QEMU or
// the kernel package is unavailable.
func miniKit(t *testing.T) vmkit.Kit {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 not installed (make deps)")
	}
	for _, tool := range []string{"qemu-img", "mkfs.ext4", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make deps)", tool)
		}
	}
	rootfs, err := image.Store{Dir: testutil.MiniImages(t)}.Rootfs(testutil.MiniImageName)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	kit, err := vmkit.BuildKit(ctx, rootfs, vmkit.KitOptions{CacheDir: vmCache(t), Progress: func(s string) { t.Log(s) }})
	if errors.Is(err, vmkit.ErrNoKernel) {
		t.Skipf("cannot fetch the guest kernel from Debian's archive: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kit (%s) in %v: kernel %s, initrd %s, disk %s", kit.KernelVersion, time.Since(start).Round(time.Millisecond), kit.Kernel, kit.Initrd, kit.RootDisk)
	return kit
}

// TestBootTCG boots the mini image's kit under TCG and waits for the root
// disk's own /bin/sh to print the marker with the build id written into
// the disk, then quits over QMP and checks nothing is left.
func TestBootTCG(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM under TCG (several seconds)")
	}
	t.Setenv("PADDOCK_SECRET_LEAK_CHECK", "operator-secret-value")
	kit := miniKit(t)
	base, err := os.ReadFile(kit.RootDisk)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	vm, err := Boot(ctx, VMConfig{Kit: kit, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Stop(context.Background())
	t.Logf("qemu-system-x86_64 %s", strings.Join(vm.Args, " "))
	// QEMU gets none of the daemon's environment (its secrets above all).
	if environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", vm.Pid())); err != nil || strings.Contains(string(environ), "operator-secret-value") || strings.Contains(string(environ), "PADDOCK_") {
		t.Errorf("QEMU's environment (%v): %q", err, environ)
	}
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	line, err := vm.WaitConsole(wctx, vmkit.RootUpMarker)
	wcancel()
	if err != nil {
		console, _ := os.ReadFile(vm.Console)
		t.Fatalf("%v\nconsole:\n%s", err, console)
	}
	t.Logf("boot to the root disk's userspace under TCG: %v (%q)", time.Since(start).Round(time.Millisecond), line)
	if want := vmkit.RootUpMarker + " build=" + kit.Build; line != want {
		t.Errorf("console line %q, want %q", line, want)
	}
	if console, _ := os.ReadFile(vm.Console); strings.Contains(string(console), "paddock-initramfs:") {
		t.Errorf("the initramfs reported a failure:\n%s", console)
	}
	var status struct {
		Running bool   `json:"running"`
		Status  string `json:"status"`
	}
	if err := vm.QMP.Execute(ctx, "query-status", nil, &status); err != nil || !status.Running {
		t.Errorf("query-status = %+v, %v; want running", status, err)
	}
	pid := vm.cmd.Process.Pid
	stopStart := time.Now()
	if err := vm.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("stop: %v", time.Since(stopStart).Round(time.Millisecond))
	if vm.cmd.ProcessState == nil || !vm.cmd.ProcessState.Exited() {
		t.Errorf("qemu (pid %d) did not exit on QMP quit: %v", pid, vm.cmd.ProcessState)
	}
	for _, p := range []string{vm.Overlay, vm.Socket} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
	if err := vm.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	after, err := os.ReadFile(kit.RootDisk)
	if err != nil || string(after) != string(base) {
		t.Errorf("the read-only base disk changed (%v)", err)
	}
}
