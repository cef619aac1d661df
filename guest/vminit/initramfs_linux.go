package vminit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// IsInitramfs says whether this process is the kernel's first one, run
// as /init from a guest kit's initramfs.
func IsInitramfs() bool {
	return os.Getpid() == 1 && os.Args[0] == "/init"
}

// Initramfs does the initramfs's work in this one process (no shell, no
// helper processes, no copies: each costs a great deal under emulation):
// load the boot modules, wait for the root disk and mount it, show
// InitramfsDir at GuestDir in it read-only, make it the root, print
// RootUpMarker and exec GuestDir/paddock-guest vm-init. The initramfs is
// not emptied (its files are what GuestDir shows).
func Initramfs() int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "paddock-initramfs: %v\n", err)
		// Nothing more can happen: power off so the host sees an exit.
		unix.Sync()
		unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
		return 125
	}
	if err := unix.Mount("devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil && !errors.Is(err, unix.EBUSY) {
		return fail(fmt.Errorf("mount /dev: %w", err))
	}
	if err := loadModuleList(filepath.Join(InitramfsDir, "modules"), "modules.order"); err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if fi, err := os.Stat(RootDevice); err == nil && fi.Mode()&os.ModeDevice != 0 {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("no %s after 5 s", RootDevice))
		}
		time.Sleep(5 * time.Millisecond)
	}
	const newRoot = "/newroot"
	if err := os.MkdirAll(newRoot, 0o755); err != nil {
		return fail(err)
	}
	if err := unix.Mount(RootDevice, newRoot, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fail(fmt.Errorf("mount %s: %w", RootDevice, err))
	}
	guestDir := newRoot + GuestDir
	if err := os.MkdirAll(guestDir, 0o755); err != nil {
		return fail(err)
	}
	if err := unix.Mount(InitramfsDir, guestDir, "", unix.MS_BIND, ""); err != nil {
		return fail(fmt.Errorf("bind %s: %w", InitramfsDir, err))
	}
	if err := unix.Mount("", guestDir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fail(fmt.Errorf("%s read-only: %w", guestDir, err))
	}
	if err := unix.Mount("/dev", newRoot+"/dev", "", unix.MS_MOVE, ""); err != nil {
		unix.Unmount("/dev", unix.MNT_DETACH)
	}
	if err := unix.Chdir(newRoot); err != nil {
		return fail(err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fail(fmt.Errorf("move the root: %w", err))
	}
	if err := unix.Chroot("."); err != nil {
		return fail(fmt.Errorf("chroot: %w", err))
	}
	if err := unix.Chdir("/"); err != nil {
		return fail(err)
	}
	build, _ := os.ReadFile("/etc/paddock-vm-build")
	fmt.Fprintf(os.Stdout, "%s build=%s\n", RootUpMarker, strings.TrimSpace(string(build)))
	// Go on as PID 1 in this process: a new one would cost another
	// start of the Go runtime, which under emulation is counted in
	// tenths of a second.
	return Init(nil)
}
