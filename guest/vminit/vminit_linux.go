package vminit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/hashicorp/yamux"
	"github.com/mdlayher/vsock"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/egressfwd"
	"paddock.dev/paddock/guest/sandboxinit"
	"paddock.dev/paddock/guest/vmchan"
)

// Init is PID 1 of the VM. It keeps root's full privileges for what
// vm-serve asks for over the socket it gets as fd 3: applying identities
// (hostname, machine-id, random seed, clock) and, once, installing
// transparent egress (guest/egressfwd: a route and nftables rules, which
// need CAP_NET_ADMIN); vm-serve itself drops them before it serves (see
// Serve).
func Init(args []string) int {
	if os.Getpid() == 1 {
		// PID 1 must not exit (the kernel would panic, and the host
		// would read a panic instead of the reason): whatever ends it,
		// the machine powers off, which ends QEMU.
		defer func() {
			fmt.Fprintln(os.Stderr, "vm-init: powering off")
			unix.Sync()
			unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
		}()
	}
	if err := mountAll(); err != nil {
		fmt.Fprintf(os.Stderr, "vm-init: %v\n", err)
		return 125
	}
	if err := sandboxinit.LoopbackUp(); err != nil {
		fmt.Fprintf(os.Stderr, "vm-init: lo up: %v\n", err)
	}
	os.Clearenv()
	os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	os.Setenv("HOME", "/root")
	os.Setenv("LANG", "C.UTF-8")
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vm-init: socketpair: %v\n", err)
		return 125
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "identity"), os.NewFile(uintptr(fds[1]), "identity")
	go serveIdentity(mine)
	extra := []*os.File{theirs}
	if cmdlineValue(vmchan.CmdlineKey) == vmchan.CmdlineVsock {
		// The agent's vsock port is below 1024: bound here, where the
		// capability is, and handed to vm-serve as fd 4.
		err := loadModules("vsock")
		var l *os.File
		if err == nil {
			l, err = listenVsock(vmchan.VsockPort)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "vm-init: vsock: %v\n", err)
			return 125
		}
		extra = append(extra, l)
	}
	code := agent.RunInitFiles([]string{"/proc/self/exe", ServeSubcommand}, extra)
	fmt.Fprintf(os.Stderr, "vm-init: the agent exited (%d)\n", code)
	return code
}

// HostDev is where PID 1 keeps the kernel's devtmpfs (root-only): the
// agent finds its port there; commands see a small tmpfs /dev.
const HostDev = GuestDir + "/dev"

func mountAll() error {
	type mnt struct {
		src, target, fstype string
		flags               uintptr
		data                string
	}
	do := func(ms []mnt) error {
		for _, m := range ms {
			if err := os.MkdirAll(m.target, 0o755); err != nil {
				return err
			}
			err := unix.Mount(m.src, m.target, m.fstype, m.flags, m.data)
			if err != nil && !(errors.Is(err, unix.EBUSY) && m.target == "/dev") {
				return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
			}
		}
		return nil
	}
	if err := do([]mnt{
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY, ""},
		{"run", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
	}); err != nil {
		return err
	}
	if err := os.MkdirAll(HostDev, 0o700); err != nil {
		return err
	}
	os.Chmod(HostDev, 0o700)
	if err := unix.Mount("devtmpfs", HostDev, "devtmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0700"); err != nil {
		return fmt.Errorf("mount devtmpfs on %s: %w", HostDev, err)
	}
	// The kernel has one devtmpfs, made 0755 when it first mounted it
	// (mode= is not applied again): its root is made root-only here.
	// (Its other mount, the initramfs's /dev, ends up under the tmpfs
	// /dev below, out of sight.)
	if err := os.Chmod(HostDev, 0o700); err != nil {
		return fmt.Errorf("%s root-only: %w", HostDev, err)
	}
	// Commands get the /dev a namespace sandbox has: a few nodes on a
	// read-only tmpfs, a private devpts and a /dev/shm.
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=65536k"); err != nil {
		return fmt.Errorf("mount tmpfs on /dev: %w", err)
	}
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}} {
		p := "/dev/" + d.name
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
		unix.Chmod(p, 0o666)
	}
	if err := unix.Mknod("/dev/console", unix.S_IFCHR|0o600, int(unix.Mkdev(5, 1))); err != nil {
		return fmt.Errorf("mknod /dev/console: %w", err)
	}
	if err := do([]mnt{
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"},
		{"shm", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777,size=65536k"},
	}); err != nil {
		return err
	}
	for _, l := range [][2]string{{"pts/ptmx", "/dev/ptmx"}, {"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"}, {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			return err
		}
	}
	if err := unix.Mount("", "/dev", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NOEXEC|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("remount /dev: %w", err)
	}
	if err := sandboxinit.HardenProc("/proc"); err != nil {
		return err
	}
	if err := limitPIDs(); err != nil {
		return err
	}
	return growRoot()
}

// limitPIDs puts PID 1, and so everything after it, in a cgroup whose
// pids.max is paddock.pids= from the kernel command line.
func limitPIDs() error {
	n := cmdlineValue("paddock.pids")
	if n == "" {
		return nil
	}
	cg := "/sys/fs/cgroup"
	if err := unix.Mount("cgroup2", cg, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount cgroup2: %w", err)
	}
	if err := os.WriteFile(cg+"/cgroup.subtree_control", []byte("+pids"), 0); err != nil {
		return fmt.Errorf("enable the pids controller: %w", err)
	}
	box := cg + "/sandbox"
	if err := os.Mkdir(box, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.WriteFile(box+"/pids.max", []byte(n), 0); err != nil {
		return fmt.Errorf("pids.max %q: %w", n, err)
	}
	return os.WriteFile(box+"/cgroup.procs", []byte("1"), 0)
}

// growRoot grows the root ext4 to fill its disk (the host sized the disk
// to the image plus the machine's disk_mb), online.
func growRoot() error {
	raw, err := os.ReadFile("/sys/block/vda/size")
	if err != nil {
		return nil
	}
	var sectors uint64
	fmt.Sscan(strings.TrimSpace(string(raw)), &sectors)
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil || st.Bsize <= 0 {
		return nil
	}
	blocks := sectors * 512 / uint64(st.Bsize)
	if blocks <= st.Blocks {
		return nil
	}
	f, err := os.Open("/")
	if err != nil {
		return err
	}
	defer f.Close()
	const ext4IocResizeFS = 0x40086610 // _IOW('f', 16, __u64)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), ext4IocResizeFS, uintptr(unsafe.Pointer(&blocks))); e != 0 {
		return fmt.Errorf("grow the root filesystem to %d blocks: %w", blocks, e)
	}
	return nil
}

// cmdlineValue returns key=value's value from the kernel command line.
func cmdlineValue(key string) string {
	b, _ := os.ReadFile("/proc/cmdline")
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// identityRequest is what vm-serve asks PID 1 to apply.
type identityRequest struct {
	Hostname     string `json:"hostname"`
	MachineID    string `json:"machine_id"`
	Seed         []byte `json:"seed"`
	TimeUnixNano int64  `json:"time_unix_nano"`
	SetIdentity  bool   `json:"set_identity"` // else only the clock
	// Transparent asks for transparent egress instead of all the above.
	Transparent bool `json:"transparent,omitempty"`
	// Overlays asks for the machine's overlays (and nothing else), their
	// uppers owned by GuestUser ("uid:gid").
	Overlays  []vmchan.Overlay `json:"overlays,omitempty"`
	GuestUser string           `json:"guest_user,omitempty"`
}

// serveIdentity applies requests from vm-serve, one datagram each,
// answering "ok" or the error.
func serveIdentity(f *os.File) {
	buf := make([]byte, 64<<10)
	transparent, overlays := false, false
	for {
		n, err := f.Read(buf)
		if err != nil || n == 0 {
			return
		}
		var req identityRequest
		answer := "ok"
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			answer = err.Error()
		} else if len(req.Overlays) > 0 {
			// Once per boot, like transparent egress below.
			if !overlays {
				if err := mountOverlays(req.Overlays, req.GuestUser); err != nil {
					answer = err.Error()
				} else {
					overlays = true
				}
			}
		} else if req.Transparent {
			// Once per boot: the rules live in the kernel, so a machine
			// restored from a memory checkpoint (this loop's state with
			// it) already has them, and asking again changes nothing. It
			// only ever narrows what the VM can reach (it has no NIC).
			if !transparent {
				if err := loadModules("netfilter"); err != nil {
					answer = err.Error()
				} else if err := egressfwd.SetupTransparent(); err != nil {
					answer = err.Error()
				} else {
					transparent = true
				}
			}
		} else if err := applyIdentity(req); err != nil {
			answer = err.Error()
		}
		f.Write([]byte(answer))
	}
}

// OverlayDir holds each overlay's upper and work directories, on the
// root disk (so checkpoints keep the agent's writes), root-only.
const OverlayDir = "/var/lib/paddock-overlay"

// mountOverlays mounts the machine's overlays, each over a directory of
// the image, with its writes in OverlayDir/<n>/upper (the guest user's,
// so the view is writable by it).
func mountOverlays(ovs []vmchan.Overlay, guestUser string) error {
	if err := loadModules("overlay"); err != nil {
		return err
	}
	uid, gid := -1, -1
	if guestUser != "" {
		if _, err := fmt.Sscanf(guestUser, "%d:%d", &uid, &gid); err != nil {
			return fmt.Errorf("guest user %q: %w", guestUser, err)
		}
	}
	if err := os.MkdirAll(OverlayDir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(OverlayDir, 0o700); err != nil {
		return err
	}
	var out []sandboxinit.Overlay
	for i, o := range ovs {
		dir := filepath.Join(OverlayDir, fmt.Sprint(i))
		upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
		for _, d := range []string{upper, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := os.Lchown(upper, uid, gid); err != nil {
			return err
		}
		out = append(out, sandboxinit.Overlay{Lower: o.Lower, Target: o.Target, Upper: upper, Work: work})
	}
	return sandboxinit.MountOverlays("/", out)
}

// ModulesDir is where the initramfs leaves the kernel modules it did not
// load, in groups named by <group>.order files (hypervisor/qemu's
// lazyModules).
const ModulesDir = GuestDir + "/modules"

// loadModules loads a group of modules in its order; one already loaded
// is fine. Only PID 1 has the capability.
func loadModules(group string) error {
	return loadModuleList(ModulesDir, group+".order")
}

// loadModuleList loads the modules dir/order names, in that order.
func loadModuleList(dir, order string) error {
	names, err := os.ReadFile(filepath.Join(dir, order))
	if err != nil {
		return fmt.Errorf("modules: %w", err)
	}
	for _, m := range strings.Fields(string(names)) {
		f, err := os.Open(filepath.Join(dir, filepath.Base(m)))
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load module %s: %w", m, err)
		}
	}
	return nil
}

func applyIdentity(req identityRequest) error {
	tv := unix.NsecToTimeval(req.TimeUnixNano)
	if err := unix.Settimeofday(&tv); err != nil {
		return fmt.Errorf("set the clock: %w", err)
	}
	if !req.SetIdentity {
		return nil
	}
	h := vmchan.Hello{Nonce: "n", Identity: "i", Hostname: req.Hostname, MachineID: req.MachineID, Seed: req.Seed}
	if err := h.Validate(); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(req.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	os.WriteFile("/etc/hostname", []byte(req.Hostname+"\n"), 0o644)
	os.Remove("/etc/machine-id")
	if err := os.WriteFile("/etc/machine-id", []byte(req.MachineID+"\n"), 0o444); err != nil {
		return fmt.Errorf("machine-id: %w", err)
	}
	return reseed(req.Seed)
}

// Serve runs the agent over the channel until SIGTERM.
//
// It first drops what a namespace sandbox's agent drops (the bounding set
// down to the agent's capabilities, no_new_privs, the baseline seccomp
// filter) on every thread at once, so the agent and every command it
// starts have that.
func Serve(args []string) int {
	if err := sandboxinit.LowerPrivilegesAllThreads(); err != nil {
		fmt.Fprintf(os.Stderr, "vm-serve: %v\n", err)
		return 125
	}
	unix.CloseOnExec(3) // PID 1's identity socket is the agent's alone
	var vsockL net.Listener
	if cmdlineValue(vmchan.CmdlineKey) == vmchan.CmdlineVsock {
		unix.CloseOnExec(4)
		l, err := vsock.FileListener(os.NewFile(4, "vsock"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "vm-serve: vsock listener: %v\n", err)
			return 125
		}
		vsockL = l
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var b [8]byte
	rand.Read(b[:])
	g := &guest{log: log, bootID: hex.EncodeToString(b[:]), lis: newStreamListener(),
		pid1: os.NewFile(3, "identity"), vsock: vsockL}
	if err := g.run(ctx); err != nil && ctx.Err() == nil {
		log.Error("vm-serve", "err", err)
		return 1
	}
	return 0
}

type guest struct {
	log    *slog.Logger
	bootID string
	lis    *streamListener

	mu       sync.Mutex
	sess     *yamux.Session // current session, for egress streams
	identity string         // the identity applied last
	srv      *agent.Server
	pid1     *os.File // PID 1's identity socket
	pid1Mu   sync.Mutex
	// vsock is the channel's listener when it is vsock; nil for the
	// virtio-serial port.
	vsock net.Listener
}

// askPID1 has PID 1 apply req.
func (g *guest) askPID1(req identityRequest) error {
	g.pid1Mu.Lock()
	defer g.pid1Mu.Unlock()
	b, _ := json.Marshal(req)
	if _, err := g.pid1.Write(b); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, err := g.pid1.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "ok" {
		return errors.New(string(buf[:n]))
	}
	return nil
}

func (g *guest) run(ctx context.Context) error {
	for ctx.Err() == nil {
		f, err := g.openChannel(ctx)
		if err != nil {
			return err
		}
		p := vmchan.NewGuestPort(f, g.bootID)
		pd, err := p.Accept(ctx)
		if err != nil {
			p.Close()
			if ctx.Err() != nil {
				return nil
			}
			g.log.Warn("vm channel", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err := g.apply(ctx, pd.Hello); err != nil {
			// A guest that cannot take its configuration must not
			// pretend it did: it tells the host why (the create fails
			// with that reason) and the machine powers off.
			pd.Fail(err)
			p.Close()
			return fmt.Errorf("apply hello: %w", err)
		}
		s, err := pd.Ready()
		if err != nil {
			p.Close()
			continue
		}
		g.mu.Lock()
		g.sess = s
		g.mu.Unlock()
		for {
			st, err := s.AcceptStream()
			if err != nil {
				break
			}
			c := vmchan.Stream{Stream: st}
			if !g.lis.push(c) {
				c.Close()
			}
		}
		g.mu.Lock()
		g.sess = nil
		g.mu.Unlock()
		s.Close()
		p.Close()
	}
	return nil
}

// openChannel returns the next connection of the channel: the
// virtio-serial port (opened again after every session), or the next
// connection the host makes to the vsock port.
func (g *guest) openChannel(ctx context.Context) (io.ReadWriteCloser, error) {
	if g.vsock == nil {
		return openPort(ctx)
	}
	stop := context.AfterFunc(ctx, func() { g.vsock.Close() })
	defer stop()
	for {
		c, err := g.vsock.Accept()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
			return nil, fmt.Errorf("accept on vsock port %d: %w", vmchan.VsockPort, err)
		}
		// A connection reset before it was accepted (a transport
		// reset after a restore): wait for the next one.
		g.log.Warn("vsock accept", "err", err)
		time.Sleep(50 * time.Millisecond)
	}
}

// listenVsock binds and listens on a vsock port of any of this guest's
// CIDs (a restored or forked guest gets a new CID; the listener stays).
func listenVsock(port uint32) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: port}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind port %d: %w", port, err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "vsock"), nil
}

// openPort opens the channel's port, waiting for udev-less /dev to show
// it (the virtio_console module probes it just before init runs).
func openPort(ctx context.Context) (*os.File, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		// devtmpfs names the port vportNpM (the by-name link is udev's):
		// find it through sysfs.
		err := errors.New("not found")
		if p := findPort(); p != "" {
			var f *os.File
			if f, err = os.OpenFile(p, os.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
				return f, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("open the %s port: %w", vmchan.PortName, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// findPort returns HostDev/vportNpM whose sysfs name is the channel's.
func findPort() string {
	m, _ := filepath.Glob("/sys/class/virtio-ports/vport*/name")
	for _, n := range m {
		b, err := os.ReadFile(n)
		if err == nil && strings.TrimSpace(string(b)) == vmchan.PortName {
			return filepath.Join(HostDev, filepath.Base(filepath.Dir(n)))
		}
	}
	return ""
}

// apply takes a hello: the first configures the machine, a new identity
// resets hostname, machine-id and the random state, and the clock is set
// every time.
func (g *guest) apply(ctx context.Context, h vmchan.Hello) error {
	g.mu.Lock()
	first := g.srv == nil
	changed := g.identity != h.Identity
	g.mu.Unlock()
	if err := g.askPID1(identityRequest{Hostname: h.Hostname, MachineID: h.MachineID, Seed: h.Seed,
		TimeUnixNano: h.TimeUnixNano, SetIdentity: changed}); err != nil {
		if changed {
			return err
		}
		g.log.Warn("set the clock", "err", err)
	}
	if first {
		if err := g.configure(ctx, h); err != nil {
			return err
		}
	}
	g.mu.Lock()
	g.identity = h.Identity
	g.mu.Unlock()
	if !first && changed {
		g.log.Info("new identity", "hostname", h.Hostname)
	}
	return nil
}

// configure runs once per boot: the trust bundle, the egress forwarders
// and the agent.
func (g *guest) configure(ctx context.Context, h vmchan.Hello) error {
	if h.TrustPEM != "" {
		// The image's own bundle is kept aside once, so a boot from a
		// disk checkpoint does not add the extras twice.
		orig := api.TrustBundle + ".paddock-orig"
		bundle, err := os.ReadFile(orig)
		if err != nil {
			bundle, _ = os.ReadFile(api.TrustBundle)
			os.WriteFile(orig, bundle, 0o644)
		}
		if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
			bundle = append(bundle, '\n')
		}
		os.MkdirAll(filepath.Dir(api.TrustBundle), 0o755)
		if err := os.WriteFile(api.TrustBundle, append(bundle, h.TrustPEM...), 0o644); err != nil {
			return fmt.Errorf("trust bundle: %w", err)
		}
		if err := os.WriteFile(api.TrustExtra, []byte(h.TrustPEM), 0o644); err != nil {
			return fmt.Errorf("trust extra: %w", err)
		}
	}
	if len(h.Overlays) > 0 {
		// Mounting needs CAP_SYS_ADMIN, which only PID 1 has.
		if err := g.askPID1(identityRequest{Overlays: h.Overlays, GuestUser: h.GuestUser}); err != nil {
			return fmt.Errorf("overlays: %w", err)
		}
	}
	if h.Network == "proxy" || h.Network == "transparent" {
		os.WriteFile("/etc/resolv.conf", []byte(api.ResolvConf), 0o644)
		if fi, err := os.Stat("/etc/apt/apt.conf.d"); err == nil && fi.IsDir() {
			os.WriteFile(api.AptProxyConfPath, []byte(api.AptProxyConf), 0o644)
		}
		if h.Network == "transparent" {
			// vm-serve has no CAP_NET_ADMIN: PID 1 installs the route
			// and the nftables rules, before the forwarders listen and
			// before any command runs.
			if err := g.askPID1(identityRequest{Transparent: true}); err != nil {
				return fmt.Errorf("transparent egress: %w", err)
			}
		}
		if _, err := egressfwd.Start(ctx, egressfwd.Config{Dial: g.dialHost, Logger: g.log}); err != nil {
			return err
		}
	}
	env := slices.Clone(h.Env)
	if h.TrustPEM != "" {
		env = append(env, api.TrustEnv()...)
	}
	if h.Network == "proxy" || h.Network == "transparent" {
		env = append(env, api.ProxyEnv()...)
	}
	srv, err := agent.New(agent.Config{
		Root:      "/",
		GuestUser: h.GuestUser,
		Home:      h.GuestHome,
		Env:       env,
		Logger:    g.log,
	})
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.srv = srv
	g.mu.Unlock()
	go func() {
		if err := srv.Serve(ctx, g.lis); err != nil && ctx.Err() == nil {
			g.log.Error("agent", "err", err)
		}
	}()
	return nil
}

// dialHost opens an egress stream to the host over the current session.
func (g *guest) dialHost(name string) (net.Conn, error) {
	g.mu.Lock()
	s := g.sess
	g.mu.Unlock()
	if s == nil {
		return nil, errors.New("no host connected")
	}
	return vmchan.OpenEgress(s, name)
}

// reseed mixes seed into the kernel's entropy pool and makes the kernel's
// random generator reseed now, so children of one memory snapshot part
// ways at once.
func reseed(seed []byte) error {
	if len(seed) == 0 {
		return nil
	}
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	buf := make([]byte, 8+len(seed))
	*(*int32)(unsafe.Pointer(&buf[0])) = int32(len(seed) * 8)
	*(*int32)(unsafe.Pointer(&buf[4])) = int32(len(seed))
	copy(buf[8:], seed)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		return fmt.Errorf("RNDADDENTROPY: %w", e)
	}
	const rndReseedCRNG = 0x5207
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndReseedCRNG, 0); e != 0 {
		return fmt.Errorf("RNDRESEEDCRNG: %w", e)
	}
	return nil
}

// streamListener hands the agent's HTTP server the streams of whichever
// session is current: it outlives sessions.
type streamListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newStreamListener() *streamListener {
	return &streamListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *streamListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *streamListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *streamListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *streamListener) Addr() net.Addr { return chanAddr{} }

type chanAddr struct{}

func (chanAddr) Network() string { return "vmchan" }
func (chanAddr) String() string  { return vmchan.PortName }
