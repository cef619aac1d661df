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
	"syscall"
	"time"
)

// VMConfig describes one microVM to boot from a Kit.
type VMConfig struct {
	Kit      Kit
	Dir      string // private run dir: overlay, console log, QMP socket; must exist
	QEMU     string // binary; "qemu-system-x86_64" when empty
	MemoryMB int    // 256 when 0
	CPUs     int    // 1 when 0
	Accel    string // "tcg" when empty
	Append   string // extra kernel command line
}

// VM is a running QEMU process.
type VM struct {
	cfg     VMConfig
	cmd     *exec.Cmd
	QMP     *Client
	Overlay string
	Console string // serial console log
	Socket  string // QMP socket
	Args    []string
	exited  chan struct{}
	waitErr error
}

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
func (cfg VMConfig) args(overlay, console, socket string) []string {
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
	return []string{
		"-machine", "microvm,pit=on,rtc=on,acpi=on",
		"-accel", accel,
		"-cpu", "max",
		"-m", strconv.Itoa(mem),
		"-smp", strconv.Itoa(cpus),
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-kernel", cfg.Kit.Kernel,
		"-initrd", cfg.Kit.Initrd,
		"-append", appendLine,
		"-serial", "file:" + console,
		"-drive", "id=root,if=none,format=qcow2,file=" + overlay,
		"-device", "virtio-blk-device,drive=root",
		"-qmp", "unix:" + socket + ",server=on,wait=off",
	}
}

// Boot creates a qcow2 overlay over the kit's read-only root disk in
// cfg.Dir, starts QEMU and connects QMP. Stop it with Stop.
func Boot(ctx context.Context, cfg VMConfig) (*VM, error) {
	if cfg.QEMU == "" {
		cfg.QEMU = "qemu-system-x86_64"
	}
	vm := &VM{
		cfg:     cfg,
		Overlay: filepath.Join(cfg.Dir, "root.qcow2"),
		Console: filepath.Join(cfg.Dir, "console.log"),
		Socket:  filepath.Join(cfg.Dir, "qmp.sock"),
		exited:  make(chan struct{}),
	}
	base, err := filepath.Abs(cfg.Kit.RootDisk)
	if err != nil {
		return nil, err
	}
	if b, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", vm.Overlay).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("qemu-img create overlay: %w: %s", err, b)
	}
	vm.Args = cfg.args(vm.Overlay, vm.Console, vm.Socket)
	cmd := exec.Command(cfg.QEMU, vm.Args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		vm.cleanup()
		return nil, fmt.Errorf("start %s: %w", cfg.QEMU, err)
	}
	vm.cmd = cmd
	go func() {
		vm.waitErr = cmd.Wait()
		if stderr.Len() > 0 {
			vm.waitErr = fmt.Errorf("%v: %s", vm.waitErr, strings.TrimSpace(stderr.String()))
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
			return nil, fmt.Errorf("qemu exited at start: %v", vm.waitErr)
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
	if vm.cmd != nil {
		select {
		case <-vm.exited:
		default:
			if vm.QMP != nil {
				qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				vm.QMP.Execute(qctx, "quit", nil, nil)
				cancel()
			}
			select {
			case <-vm.exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(-vm.cmd.Process.Pid, syscall.SIGKILL)
				<-vm.exited
			case <-ctx.Done():
				syscall.Kill(-vm.cmd.Process.Pid, syscall.SIGKILL)
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
	for _, p := range []string{vm.Overlay, vm.Socket} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
