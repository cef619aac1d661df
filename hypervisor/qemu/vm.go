package qemu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/vmchan"
	"paddock.dev/paddock/hypervisor/vmkit"
)

// VMConfig describes one microVM to boot from a boot kit (vmkit.Kit).
type VMConfig struct {
	Kit      vmkit.Kit
	Dir      string // private run dir: overlay, console log, QMP socket; must exist
	QEMU     string // binary; "qemu-system-x86_64" when empty
	MemoryMB int    // 256 when 0
	CPUs     int    // 1 when 0
	Accel    string // "tcg" when empty
	Append   string // extra kernel command line
	// Disk, when set, is the qcow2 the VM boots on, made and removed by
	// the caller; else Boot makes Dir/root.qcow2 over the kit's base disk
	// and Stop removes it. With neither (a kit of only a kernel and an
	// initramfs, as the KVM probe boots) the VM has no disk.
	Disk string
	// Channel adds the agent channel: a virtio-serial port named
	// vmchan.PortName backed by the unix socket Dir/agent.sock (QEMU
	// listens; the host connects).
	Channel bool
	// VsockCID, when not 0, makes the agent channel vsock instead: a
	// vhost-vsock device with this guest CID (the host dials the guest's
	// vmchan.VsockPort) and paddock.chan=vsock on the kernel command line,
	// which tells the guest. Channel is then ignored.
	VsockCID uint32
	// MMIO puts the devices on virtio-mmio (the layout of machines from
	// before PCIe, kept for their memory snapshots); else they are PCI
	// devices on microvm's PCIe host bridge, whose virtio_pci driver is
	// built into the kernel (the mmio one is a module: loading it cost
	// about a tenth of a second of every boot under TCG).
	MMIO bool
	// Detachable lets QEMU outlive this process (a daemon that restarts
	// adopts it): its own session, no parent-death signal, stderr to
	// Dir/stderr.log instead of a pipe.
	Detachable bool
	// Incoming starts the VM paused, loading the migration stream saved
	// in this file (a memory checkpoint); FinishIncoming resumes it.
	Incoming string
}

// VM is a running QEMU process.
type VM struct {
	cfg     VMConfig
	cmd     *exec.Cmd
	QMP     *Client
	Overlay string
	Console string // serial console log
	Socket  string // QMP socket
	Agent   string // agent channel socket, when cfg.Channel
	Args    []string
	ownDisk bool
	stderr  *tailBuffer
	exited  chan struct{}
	waitErr error
	// pid is QEMU's process (its own process group); Pid() reads it.
	pid int
}

// Pid is QEMU's process id.
func (vm *VM) Pid() int { return vm.pid }

// tailBuffer keeps what QEMU writes to stderr (the first 16 KiB) for
// reading while it runs: a KVM internal error is printed there and leaves
// the process alive with the guest stopped.
type tailBuffer struct {
	mu   sync.Mutex
	b    []byte
	path string // a detachable VM's stderr.log, read instead
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := 16<<10 - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t.path != "" {
		b, _ := os.ReadFile(t.path)
		if len(b) > 16<<10 {
			b = b[:16<<10]
		}
		return string(b)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Stderr is what QEMU has written to stderr so far.
func (vm *VM) Stderr() string { return vm.stderr.String() }

// tscKHz is the host's TSC frequency in kHz for tsc_early_khz= (microvm
// has no PIT calibration source worth waiting for): /proc/cpuinfo's
// "cpu MHz", else 2 GHz. Under TCG only the guest's timekeeping scale
// depends on it.
func tscKHz() int {
	f, err := os.Open("/proc/cpuinfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "cpu MHz" {
				if mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && mhz > 0 {
					return int(mhz * 1000)
				}
			}
		}
	}
	return 2000000
}

// Args returns the QEMU command line for cfg (without the binary).
func (cfg VMConfig) args(overlay, console, socket, agent string) []string {
	mem, cpus, accel := cfg.MemoryMB, cfg.CPUs, cfg.Accel
	if mem == 0 {
		mem = 256
	}
	if cpus == 0 {
		cpus = 1
	}
	if accel == "" {
		accel = "tcg"
	}
	appendLine := fmt.Sprintf("console=ttyS0 tsc_early_khz=%d reboot=t panic=-1 quiet loglevel=4", tscKHz())
	if cfg.Append != "" {
		appendLine += " " + cfg.Append
	}
	if cfg.VsockCID != 0 {
		appendLine += " " + vmchan.CmdlineKey + "=" + vmchan.CmdlineVsock
	}
	machine, dev := "microvm,pit=on,rtc=on,acpi=on,pcie=on", "pci"
	if cfg.MMIO {
		machine, dev = "microvm,pit=on,rtc=on,acpi=on", "device"
	}
	a := []string{
		"-machine", machine,
		"-accel", accel,
		"-cpu", "max",
		"-m", strconv.Itoa(mem),
		"-smp", strconv.Itoa(cpus),
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-kernel", cfg.Kit.Kernel,
		"-initrd", cfg.Kit.Initrd,
		"-append", appendLine,
		"-serial", "file:" + console,
	}
	if overlay != "" {
		a = append(a,
			"-drive", "id=root,if=none,format=qcow2,file="+overlay,
			"-device", "virtio-blk-"+dev+",drive=root")
	}
	a = append(a, "-qmp", "unix:"+socket+",server=on,wait=off")
	if cfg.VsockCID != 0 {
		a = append(a, "-device", fmt.Sprintf("vhost-vsock-%s,guest-cid=%d", dev, cfg.VsockCID))
	} else if agent != "" {
		a = append(a,
			"-device", "virtio-serial-"+dev,
			"-chardev", "socket,id=agent,path="+agent+",server=on,wait=off",
			"-device", "virtserialport,chardev=agent,name="+vmchan.PortName)
	}
	if cfg.Incoming != "" {
		a = append(a, "-incoming", "exec:cat "+cfg.Incoming)
	}
	return a
}

// errExitedAtStart: QEMU ended before its QMP socket answered (a bad
// option, an accelerator that aborts it).
var errExitedAtStart = errors.New("qemu exited at start")

// Boot creates a qcow2 overlay over the kit's read-only root disk in
// cfg.Dir, starts QEMU and connects QMP. Stop it with Stop.
func Boot(ctx context.Context, cfg VMConfig) (*VM, error) {
	if cfg.QEMU == "" {
		cfg.QEMU = "qemu-system-x86_64"
	}
	vm := &VM{
		cfg:     cfg,
		Overlay: cfg.Disk,
		Console: filepath.Join(cfg.Dir, "console.log"),
		Socket:  filepath.Join(cfg.Dir, "qmp.sock"),
		stderr:  &tailBuffer{},
		exited:  make(chan struct{}),
	}
	if cfg.Channel && cfg.VsockCID == 0 {
		vm.Agent = filepath.Join(cfg.Dir, "agent.sock")
	}
	if strings.ContainsAny(cfg.Dir+cfg.Disk+cfg.Incoming, ", '\"\\$`;&|<>") {
		return nil, fmt.Errorf("qemu: paths may not hold commas, quotes, spaces or shell characters: %s", cfg.Dir)
	}
	if vm.Overlay == "" && cfg.Kit.RootDisk != "" {
		vm.Overlay = filepath.Join(cfg.Dir, "root.qcow2")
		vm.ownDisk = true
		if err := CreateOverlay(ctx, cfg.Kit.RootDisk, "raw", vm.Overlay, 0); err != nil {
			return nil, err
		}
	}
	vm.Args = cfg.args(vm.Overlay, vm.Console, vm.Socket, vm.Agent)
	cmd := exec.Command(cfg.QEMU, vm.Args...)
	cmd.Env = qemuEnv(os.Environ())
	cmd.Stderr = vm.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cfg.Detachable {
		f, err := os.OpenFile(filepath.Join(cfg.Dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			vm.cleanup()
			return nil, err
		}
		defer f.Close()
		cmd.Stderr = f
		vm.stderr.path = f.Name()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		vm.cleanup()
		return nil, fmt.Errorf("start %s: %w", cfg.QEMU, err)
	}
	vm.cmd, vm.pid = cmd, cmd.Process.Pid
	go func() {
		vm.waitErr = cmd.Wait()
		if s := strings.TrimSpace(vm.stderr.String()); s != "" {
			vm.waitErr = fmt.Errorf("%v: %s", vm.waitErr, s)
		}
		close(vm.exited)
	}()
	// QEMU creates the socket before it starts the guest.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := Dial(ctx, vm.Socket, DialOptions{})
		if err == nil {
			vm.QMP = c
			return vm, nil
		}
		select {
		case <-vm.exited:
			vm.cleanup()
			return nil, fmt.Errorf("%w: %v", errExitedAtStart, vm.waitErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			vm.Stop(context.Background())
			return nil, fmt.Errorf("qmp: %w", err)
		}
	}
}

// Exited is closed when the QEMU process has ended.
func (vm *VM) Exited() <-chan struct{} { return vm.exited }

// WaitConsole polls the console log until it holds marker and returns the
// line holding it, or fails when ctx ends or QEMU exits.
func (vm *VM) WaitConsole(ctx context.Context, marker string) (string, error) {
	for {
		b, _ := os.ReadFile(vm.Console)
		if i := bytes.Index(b, []byte(marker)); i >= 0 {
			line := b[i:]
			if j := bytes.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			return strings.TrimSpace(string(line)), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("console has no %q: %w", marker, ctx.Err())
		case <-vm.exited:
			return "", fmt.Errorf("qemu exited before %q: %v", marker, vm.waitErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends the VM: QMP quit, then SIGKILL if QEMU has not exited within
// 5 s (or when ctx ends), and removes the overlay and socket (the console
// log stays for diagnosis). It is idempotent.
func (vm *VM) Stop(ctx context.Context) error {
	if vm.pid != 0 {
		select {
		case <-vm.exited:
		default:
			if vm.QMP != nil {
				qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				vm.QMP.Execute(qctx, "quit", nil, nil)
				cancel()
			} else {
				// Never reached over QMP: nothing to ask.
				syscall.Kill(-vm.pid, syscall.SIGKILL)
			}
			select {
			case <-vm.exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(-vm.pid, syscall.SIGKILL)
				<-vm.exited
			case <-ctx.Done():
				syscall.Kill(-vm.pid, syscall.SIGKILL)
				<-vm.exited
			}
		}
	}
	if vm.QMP != nil {
		vm.QMP.Close()
	}
	return vm.cleanup()
}

func (vm *VM) cleanup() error {
	var errs []error
	files := []string{vm.Socket}
	if vm.Agent != "" {
		files = append(files, vm.Agent)
	}
	if vm.ownDisk {
		files = append(files, vm.Overlay)
	}
	for _, p := range files {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CreateOverlay makes a qcow2 at path whose backing file is base (format
// "raw" or "qcow2"), recorded by absolute path.
// A size of 0 keeps the backing file's.
func CreateOverlay(ctx context.Context, base, format, path string, size int64) error {
	abs, err := filepath.Abs(base)
	if err != nil {
		return err
	}
	args := []string{"create", "-q", "-f", "qcow2", "-b", abs, "-F", format, path}
	if size > 0 {
		args = append(args, strconv.FormatInt(size, 10))
	}
	if b, err := exec.CommandContext(ctx, "qemu-img", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img create overlay: %w: %s", err, b)
	}
	return nil
}

// FinishIncoming waits for an -incoming VM to have loaded its memory and
// resumes it.
func (vm *VM) FinishIncoming(ctx context.Context) error {
	for {
		var st struct {
			Status string `json:"status"`
		}
		if err := vm.QMP.Execute(ctx, "query-status", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "inmigrate":
		case "paused", "postmigrate", "prelaunch":
			return vm.QMP.Execute(ctx, "cont", nil, nil)
		case "running":
			return nil
		default:
			return fmt.Errorf("qemu: incoming migration ended in state %q", st.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-vm.exited:
			return fmt.Errorf("qemu exited while loading memory: %v", vm.waitErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SaveMemory writes the stopped VM's memory and device state to file
// (QEMU 7.2 has no file: target, so exec:cat) and waits until done.
func (vm *VM) SaveMemory(ctx context.Context, file string) error {
	if strings.ContainsAny(file, ", '\"\\$`;&|<>") {
		return fmt.Errorf("qemu: memory file path %q holds shell characters", file)
	}
	if err := vm.QMP.Execute(ctx, "migrate", map[string]any{"uri": "exec:cat > " + file}, nil); err != nil {
		return err
	}
	for {
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := vm.QMP.Execute(ctx, "query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("qemu: saving memory %s: %s", st.Status, st.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			vm.QMP.Execute(context.Background(), "migrate_cancel", nil, nil)
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Attach takes over a VM that another process started with cfg (Boot
// with Detachable) and left running as pid: its QMP socket is dialled
// again, and Exited closes when the process ends (watched through a
// pidfd, as it is not this process's child).
func Attach(ctx context.Context, cfg VMConfig, pid int) (*VM, error) {
	vm := &VM{
		cfg:     cfg,
		Overlay: cfg.Disk,
		Console: filepath.Join(cfg.Dir, "console.log"),
		Socket:  filepath.Join(cfg.Dir, "qmp.sock"),
		stderr:  &tailBuffer{path: filepath.Join(cfg.Dir, "stderr.log")},
		exited:  make(chan struct{}),
		pid:     pid,
	}
	if cfg.Channel && cfg.VsockCID == 0 {
		vm.Agent = filepath.Join(cfg.Dir, "agent.sock")
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("qemu process %d: %w", pid, err)
	}
	go func() {
		defer unix.Close(fd)
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err == unix.EINTR {
				continue
			}
			break
		}
		vm.waitErr = errors.New("qemu exited")
		close(vm.exited)
	}()
	c, err := Dial(ctx, vm.Socket, DialOptions{})
	if err != nil {
		return nil, fmt.Errorf("qmp of an adopted VM: %w", err)
	}
	vm.QMP = c
	return vm, nil
}

// qemuEnv is the environment QEMU starts with: the few variables it reads
// (PATH, TMPDIR, the locale), never the daemon's own, whose
// PADDOCK_SECRET_* credentials would otherwise sit in every VM process's
// /proc/<pid>/environ on the host.
func qemuEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PATH", "TMPDIR", "LANG", "LC_ALL":
			out = append(out, kv)
		}
	}
	return out
}
