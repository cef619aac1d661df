package sandboxinit

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/confine"
	"paddock.dev/paddock/guest/egressfwd"
)

// Main runs sandbox-init and returns only on failure (exit code), or when
// the agent it became exits.
func Main(args []string) int {
	// Namespace changes below (the cgroup namespace) apply to the calling
	// OS thread only; the serve process is forked from this same thread,
	// so it must never change.
	runtime.LockOSThread()
	argv, err := setup()
	if err == nil {
		err = LowerPrivileges()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-init: %v\n", err)
		return 125
	}
	return agent.RunInit(argv)
}

func setup() ([]string, error) {
	// Only the listener may reach the serve child.
	unix.CloseOnExec(FDGuest)
	unix.CloseOnExec(FDConfig)
	cf := os.NewFile(FDConfig, "config")
	b, err := io.ReadAll(io.LimitReader(cf, MaxConfigBytes))
	cf.Close()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if os.Getpid() != 1 {
		return nil, fmt.Errorf("must run as PID 1 of a new PID namespace (pid %d)", os.Getpid())
	}
	// The host put us in the sandbox cgroup before sending the config: a
	// new cgroup namespace now makes that cgroup our root.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return nil, fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make mounts private: %w", err)
	}
	if err := mountRoot(c); err != nil {
		return nil, err
	}
	if err := setIdentity(c); err != nil {
		return nil, err
	}
	if err := unix.Sethostname([]byte(c.Hostname)); err != nil {
		return nil, fmt.Errorf("sethostname: %w", err)
	}
	if err := LoopbackUp(); err != nil {
		return nil, fmt.Errorf("bring up lo: %w", err)
	}
	if c.Egress != nil {
		if err := setupEgress(c); err != nil {
			return nil, err
		}
	}
	if c.TrustPEM != "" {
		if err := setupTrust(c); err != nil {
			return nil, err
		}
	}
	if err := unix.Chdir(c.Merged); err != nil {
		return nil, err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return nil, fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return nil, fmt.Errorf("detach old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return nil, err
	}
	os.Clearenv()
	os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	os.Setenv("HOME", "/root")
	os.Setenv("LANG", "C.UTF-8")
	argv := []string{"/proc/self/exe", "serve", "--listen-fd", "3", "--root", "/"}
	if c.GuestUser != "" {
		argv = append(argv, "--user", c.GuestUser, "--home", c.GuestHome)
	}
	for _, e := range c.Env {
		argv = append(argv, "--env", e)
	}
	if c.LogJSON {
		argv = append(argv, "--log-json")
	}
	if c.Egress != nil {
		argv = append(argv, "--egress-dir", EgressMount)
	}
	return argv, nil
}

// agentCaps are the capabilities the agent keeps: enough to act on any file
// and to start commands as the guest user and signal them. Everything else
// (sys_admin, mknod, module, ptrace, raw I/O, net_admin…) leaves the
// bounding set, so no process in the sandbox can ever hold it.
var agentCaps = map[int]bool{
	unix.CAP_CHOWN: true, unix.CAP_DAC_OVERRIDE: true, unix.CAP_DAC_READ_SEARCH: true,
	unix.CAP_FOWNER: true, unix.CAP_FSETID: true, unix.CAP_KILL: true,
	unix.CAP_SETGID: true, unix.CAP_SETUID: true, unix.CAP_NET_BIND_SERVICE: true,
	unix.CAP_AUDIT_WRITE: true,
}

// setupEgress mounts the host's egress sockets at EgressMount (0700,
// read-only), points the resolver and apt at the agent's forwarders, and
// in transparent mode sets up the redirect (guest/egressfwd).
func setupEgress(c Config) error {
	dir, err := inRoot(c.Merged, EgressMount, true)
	if err != nil {
		return fmt.Errorf("egress mount point: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount(c.Egress.Dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the egress sockets: %w", err)
	}
	// The sockets are the agent's alone, whatever mode the host gave
	// the directory (the same inode on both sides of the bind).
	if err := os.Chown(dir, 0, 0); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("egress sockets read-only: %w", err)
	}
	files := []struct{ path, content string }{
		{"/etc/resolv.conf", api.ResolvConf},
	}
	if fi, err := os.Lstat(filepath.Join(c.Merged, "etc/apt/apt.conf.d")); err == nil && fi.IsDir() {
		files = append(files, struct{ path, content string }{api.AptProxyConfPath, api.AptProxyConf})
	}
	for _, f := range files {
		if err := bindFile(c, f.path, f.content); err != nil {
			return err
		}
	}
	if c.Egress.Transparent {
		if err := egressfwd.SetupTransparent(); err != nil {
			return err
		}
	}
	return nil
}

// setupTrust adds the extra certificates to the image's CA bundle (a
// read-only bind of the image's bundle plus them), and puts them alone at
// api.TrustExtra for programs that take extras only.
func setupTrust(c Config) error {
	bundle := ""
	if dir, err := inRoot(c.Merged, filepath.Dir(api.TrustBundle), false); err == nil {
		p := filepath.Join(dir, filepath.Base(api.TrustBundle))
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Size() < 8<<20 {
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("read the image's CA bundle: %w", err)
			}
			bundle = string(b)
		}
	}
	if bundle != "" && !strings.HasSuffix(bundle, "\n") {
		bundle += "\n"
	}
	if err := bindFile(c, api.TrustBundle, bundle+c.TrustPEM); err != nil {
		return err
	}
	return bindFile(c, api.TrustExtra, c.TrustPEM)
}

// bindFile puts content at path in the new root as a read-only bind of a
// file in the identity directory. A symbolic link at path (a checkpoint
// layer holds what the sandbox wrote) is replaced, never followed.
func bindFile(c Config, path, content string) error {
	parent, err := inRoot(c.Merged, filepath.Dir(path), true)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	target := filepath.Join(parent, filepath.Base(path))
	if fi, err := os.Lstat(target); err == nil && !fi.Mode().IsRegular() {
		if err := os.RemoveAll(target); err != nil {
			return err
		}
	}
	if f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|unix.O_NOFOLLOW, 0o644); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	} else {
		f.Close()
	}
	src := filepath.Join(c.IdentityDir, strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_"))
	if err := os.WriteFile(src, []byte(content), 0o444); err != nil {
		return err
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", path, err)
	}
	return unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "")
}

// MountOverlays mounts each directory view under root (a VM's PID 1
// mounts its overlays with it).
func MountOverlays(root string, ovs []Overlay) error { return mountOverlays(root, ovs) }

// mountOverlays mounts each directory view. Paths in the new root are
// walked without following symbolic links: the root holds checkpoint
// layers the sandbox wrote, and nothing runs in it yet to race the walk.
func mountOverlays(root string, ovs []Overlay) error {
	for _, o := range ovs {
		lower, err := inRoot(root, o.Lower, false)
		if err != nil {
			return fmt.Errorf("overlay lower: %w", err)
		}
		target, err := inRoot(root, o.Target, true)
		if err != nil {
			return fmt.Errorf("overlay target: %w", err)
		}
		dirs := append(append([]string(nil), o.Layers...), lower)
		for _, d := range append(dirs, o.Upper, o.Work) {
			if strings.ContainsAny(d, ":,") {
				return fmt.Errorf("overlay path %q contains ':' or ','", d)
			}
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(dirs, ":"), o.Upper, o.Work)
		if len(opts) > 4000 {
			return fmt.Errorf("overlay on %s: the layer chain is too long for one mount", o.Target)
		}
		if err := unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount the overlay on %s (lower %s): %w", o.Target, o.Lower, err)
		}
	}
	return nil
}

// inRoot returns root+p after checking that no part of p is a symbolic
// link and that it is a directory; with create, missing parts are made
// (root-owned, 0755).
func inRoot(root, p string, create bool) (string, error) {
	cur := root
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		if part == "" || part == "." || part == ".." {
			return "", fmt.Errorf("%s: not a clean absolute path", p)
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) && create {
			if err := os.Mkdir(cur, 0o755); err != nil {
				return "", err
			}
			continue
		}
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s does not exist in the image", p)
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("%s: a part of it is a symbolic link, which an overlay path may not hold", p)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%s: a part of it is not a directory", p)
		}
	}
	return cur, nil
}

// LowerPrivileges runs on the locked thread that will fork (or exec) the agent:
// the agent and everything it starts inherit what is set here.
func LowerPrivileges() error { return lowerPrivileges(unix.Prctl) }

// LowerPrivilegesAllThreads is LowerPrivileges for a process that goes on
// running after it: the per-thread parts (the bounding set,
// no_new_privs) are set on every thread of the process at once (psx), the
// seccomp filter is synchronized to all of them (TSYNC), and threads made
// later inherit them from the thread that makes them. It spares the
// re-exec that LowerPrivileges needs to reach every thread (a start of
// the Go runtime, which is dear under emulation).
func LowerPrivilegesAllThreads() error {
	return lowerPrivileges(func(option int, arg2, arg3, arg4, arg5 uintptr) error {
		if _, _, e := psx.Syscall6(unix.SYS_PRCTL, uintptr(option), arg2, arg3, arg4, arg5, 0); e != 0 {
			return e
		}
		return nil
	})
}

func lowerPrivileges(prctl func(option int, arg2, arg3, arg4, arg5 uintptr) error) error {
	// The agent must survive a command that eats the sandbox's memory:
	// it asks to be exempt from the OOM killer (some kernels refuse
	// negative values; then only the commands' raised score protects it),
	// and commands get a high score when the agent starts them.
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-init: cannot exempt the agent from the OOM killer: %v\n", err)
	}
	last := unix.CAP_LAST_CAP
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		fmt.Sscan(strings.TrimSpace(string(b)), &last)
	}
	for c := 0; c <= last; c++ {
		if agentCaps[c] || c == unix.CAP_SETPCAP {
			continue
		}
		if err := prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	if err := prctl(unix.PR_CAPBSET_DROP, unix.CAP_SETPCAP, 0, 0, 0); err != nil {
		return fmt.Errorf("drop CAP_SETPCAP: %w", err)
	}
	// No process in the sandbox gains privileges through execve (setuid,
	// file capabilities): inherited by the agent and all it starts.
	if err := prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	// The baseline system-call filter: keyrings, namespaces, mounts,
	// io_uring, bpf, ptrace and the 32-bit entry points are refused to
	// everything in the sandbox, the agent included. Confined commands
	// stack their own filter and Landlock on top.
	if err := confine.ApplyBaseline(); err != nil {
		return fmt.Errorf("baseline seccomp filter: %w", err)
	}
	return nil
}

// procMasked are /proc files the sandbox has no business reading.
var procMasked = []string{"kcore", "keys", "timer_list", "sched_debug", "kallsyms", "kpagecount", "kpageflags", "kpagecgroup"}

// procReadOnly are /proc trees that change the host kernel when written.
var procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}

// HardenProc masks and write-protects the parts of a /proc that
// reach the host kernel rather than this PID namespace.
func HardenProc(proc string) error {
	for _, f := range procMasked {
		p := filepath.Join(proc, f)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", f, err)
		}
	}
	for _, f := range procReadOnly {
		p := filepath.Join(proc, f)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /proc/%s: %w", f, err)
		}
		if err := unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("make /proc/%s read-only: %w", f, err)
		}
	}
	return nil
}

// setIdentity gives the machine its own /etc/machine-id, so forks of one
// snapshot do not share it. The file lives on the machine's tmpfs and is
// bind-mounted over the image's, only when the image has one.
func setIdentity(c Config) error {
	target := filepath.Join(c.Merged, "etc/machine-id")
	if _, err := os.Stat(target); err != nil {
		return nil
	}
	id := c.MachineID
	if id == "" {
		var b [16]byte
		rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	src := filepath.Join(c.IdentityDir, "machine-id")
	if err := os.WriteFile(src, []byte(id+"\n"), 0o444); err != nil {
		return err
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind machine-id: %w", err)
	}
	return unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "")
}

func mountRoot(c Config) error {
	for _, l := range c.Lower {
		if strings.ContainsAny(l, ":,") {
			return fmt.Errorf("layer path %q contains ':' or ','", l)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(c.Lower, ":"), c.Upper, c.Work)
	if len(opts) > 4000 {
		return fmt.Errorf("the layer chain is too long for one overlay mount (%d layers, %d bytes of options; the kernel takes one page): restore or fork from an earlier checkpoint", len(c.Lower), len(opts))
	}
	// nosuid: a setuid binary in the image gives the guest user nothing;
	// nodev: a device node made on the writable layer opens nothing.
	if err := unix.Mount("overlay", c.Merged, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount overlay (%s): %w", opts, err)
	}
	r := c.Merged
	if err := mountOverlays(r, c.Overlays); err != nil {
		return err
	}
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
	if err := HardenProc(filepath.Join(r, "proc")); err != nil {
		return err
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
	if err := unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NOEXEC|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("remount /dev: %w", err)
	}
	return nil
}

// LoopbackUp sets IFF_UP on lo (a new network namespace's, a VM's).
func LoopbackUp() error {
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
