package procbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// initArg0 is the argv[0] the host gives /proc/self/exe when it re-executes
// itself as a sandbox's first process. MaybeRunInit looks for it.
const initArg0 = "paddock-procbox-init"

// File descriptors the host passes to the init process.
const (
	fdConfig   = 3 // initConfig JSON, read to EOF
	fdListener = 4 // the guest agent's listening unix socket
	fdGuest    = 5 // the sealed memfd holding paddock-guest
)

// initConfig is what the host tells the init process.
type initConfig struct {
	Merged    string   `json:"merged"`
	Lower     []string `json:"lower"` // top first, image rootfs last
	Upper     string   `json:"upper"`
	Work      string   `json:"work"`
	Hostname  string   `json:"hostname"`
	GuestUser string   `json:"guest_user"`
	GuestHome string   `json:"guest_home"`
	Env       []string `json:"env"`
	LogJSON   bool     `json:"log_json"`
}

// MaybeRunInit runs the sandbox init and never returns when this process
// was started as one; otherwise it returns at once. Call it first thing in
// main (and in TestMain of packages that create procbox sandboxes).
func MaybeRunInit() {
	if len(os.Args) == 0 || os.Args[0] != initArg0 {
		return
	}
	if err := runInit(); err != nil {
		fmt.Fprintf(os.Stderr, "procbox init: %v\n", err)
		os.Exit(125)
	}
	os.Exit(0) // not reached: runInit execs the guest
}

// runInit runs as PID 1 of the new PID namespace, in new mount, UTS, IPC
// and network namespaces. It builds the root filesystem, pivots into it
// and execs the guest agent in init mode.
func runInit() error {
	cf := os.NewFile(fdConfig, "config")
	b, err := io.ReadAll(io.LimitReader(cf, 1<<20))
	cf.Close()
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var c initConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("parse config: %w", err)
	}
	// The host has put us in the sandbox cgroup before sending the config:
	// a new cgroup namespace now makes that cgroup our root.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := mountRoot(c); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(c.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	if err := unix.Chdir(c.Merged); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	// The listener goes to fd 3 for the agent; everything else we hold is
	// close-on-exec.
	if err := unix.Dup3(fdListener, 3, 0); err != nil {
		return fmt.Errorf("dup listener: %w", err)
	}
	unix.Close(fdListener)
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"LANG=C.UTF-8",
	}
	args := []string{"paddock-guest", "init", "--", "/proc/self/exe", "serve",
		"--listen-fd", "3", "--root", "/"}
	if c.GuestUser != "" {
		args = append(args, "--user", c.GuestUser, "--home", c.GuestHome)
	}
	for _, e := range c.Env {
		args = append(args, "--env", e)
	}
	if c.LogJSON {
		args = append(args, "--log-json")
	}
	unix.CloseOnExec(fdGuest)
	// The guest binary is a sealed memfd: nothing in the sandbox can
	// rewrite the host's copy through /proc/1/exe.
	return syscall.Exec(fmt.Sprintf("/proc/self/fd/%d", fdGuest), args, env)
}

func mountRoot(c initConfig) error {
	for _, l := range c.Lower {
		if strings.ContainsAny(l, ":,") {
			return fmt.Errorf("layer path %q contains ':' or ','", l)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(c.Lower, ":"), c.Upper, c.Work)
	if err := unix.Mount("overlay", c.Merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay (%s): %w", opts, err)
	}
	r := c.Merged
	mounts := []struct {
		src, target, fstype string
		flags               uintptr
		data                string
	}{
		{"proc", "proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"sysfs", "sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY, ""},
		{"tmpfs", "dev", "tmpfs", unix.MS_NOSUID | unix.MS_NOEXEC, "mode=755,size=65536k"},
	}
	for _, m := range mounts {
		t := filepath.Join(r, m.target)
		if err := os.MkdirAll(t, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, t, m.fstype, m.flags, m.data); err != nil {
			return fmt.Errorf("mount %s on /%s: %w", m.fstype, m.target, err)
		}
	}
	dev := filepath.Join(r, "dev")
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}} {
		p := filepath.Join(dev, d.name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod /dev/%s: %w", d.name, err)
		}
		unix.Chmod(p, 0o666)
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount devpts: %w", err)
	}
	if err := unix.Mount("shm", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=65536k"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	for _, l := range [][2]string{{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}} {
		if err := os.Symlink(l[0], filepath.Join(dev, l[1])); err != nil {
			return err
		}
	}
	// /dev is done: no new device nodes can appear in it.
	if err := unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("remount /dev: %w", err)
	}
	return nil
}

// loopbackUp sets IFF_UP on lo in the new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var req [40]byte
	copy(req[:], "lo")
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		return e
	}
	flags := *(*uint16)(unsafe.Pointer(&req[16]))
	flags |= unix.IFF_UP | unix.IFF_RUNNING
	*(*uint16)(unsafe.Pointer(&req[16])) = flags
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		return e
	}
	return nil
}
