package qemu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"paddock.dev/paddock/hypervisor/vmkit"
)

// ErrNoQEMU is returned by Probe when the QEMU binary cannot be found or
// run; install it with `make deps` (Debian: qemu-system-x86, qemu-utils).
var ErrNoQEMU = errors.New("qemu: qemu-system-x86_64 not usable")

// KVMState is what is known about hardware acceleration on this host.
type KVMState string

const (
	// KVMAbsent: there is no /dev/kvm; guests run under TCG.
	KVMAbsent KVMState = "absent"
	// KVMPresentUnverified: /dev/kvm exists but no guest has been booted
	// with it yet. Opening the device is not enough: on these machines the
	// host offers a paravirtual KVM that starts QEMU and then kills a stock
	// guest with an emulation failure.
	KVMPresentUnverified KVMState = "present, unverified"
	// KVMUsable: a tiny guest (the kit's kernel and the probe initramfs)
	// reached userspace under -accel kvm; machines use KVM.
	KVMUsable KVMState = "usable"
	// KVMUnusable: /dev/kvm exists but the tiny guest did not reach
	// userspace under it (QEMU exited, the guest stopped with an internal
	// error, or no marker in time); machines use TCG. ProbeKVM says why.
	KVMUnusable KVMState = "unusable"
)

// ProbeOptions says where to look; the zero value uses the defaults.
type ProbeOptions struct {
	QEMU        string // binary name or path; "qemu-system-x86_64" when empty
	KVMDevice   string // "/dev/kvm" when empty
	VsockDevice string // "/dev/vhost-vsock" when empty
}

// Capabilities is what this host offers the qemu backend.
type Capabilities struct {
	QEMUPath    string   // absolute path of the binary found
	QEMUVersion string   // "7.2.22"
	QEMUPackage string   // the distribution's build, "Debian 1:7.2+dfsg-7+deb12u18+b3"
	KVM         KVMState // see KVMState
	VhostVsock  bool     // /dev/vhost-vsock exists; else the agent uses virtio-serial
}

var versionRE = regexp.MustCompile(`QEMU emulator version (\d+\.\d+(?:\.\d+)?)(?: \(([^)]*)\))?`)

// Probe reports what this host offers. The device checks are always
// filled in; the error (wrapping ErrNoQEMU) says why QEMU is unusable.
func Probe(ctx context.Context, opts ProbeOptions) (Capabilities, error) {
	if opts.QEMU == "" {
		opts.QEMU = "qemu-system-x86_64"
	}
	if opts.KVMDevice == "" {
		opts.KVMDevice = "/dev/kvm"
	}
	if opts.VsockDevice == "" {
		opts.VsockDevice = "/dev/vhost-vsock"
	}
	var c Capabilities
	c.KVM = KVMAbsent
	if exists(opts.KVMDevice) {
		c.KVM = KVMPresentUnverified
	}
	c.VhostVsock = exists(opts.VsockDevice)

	path, err := exec.LookPath(opts.QEMU)
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrNoQEMU, err)
	}
	c.QEMUPath = path
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-version").Output()
	if err != nil {
		return c, fmt.Errorf("%w: %s -version: %w", ErrNoQEMU, path, err)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return c, fmt.Errorf("%w: %s -version printed no version: %q", ErrNoQEMU, path, firstLine(out))
	}
	c.QEMUVersion, c.QEMUPackage = string(m[1]), string(m[2])
	return c, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

// The usable-KVM probe. Opening /dev/kvm proves nothing (see
// KVMPresentUnverified), so a tiny guest is booted once under -accel kvm:
// the kit's kernel with the probe initramfs (busybox, whose shell prints
// ProbeMarker and powers off), no disk, the machines' own machine type,
// CPU model and memory. The verdict is kept on disk in the kit cache,
// keyed by the guest kernel's version, QEMU's version and the host
// kernel's release (any of them changing can change the answer), so it is
// paid once per host and not per VM, per backend or per process: the
// daemon after a restart, and `paddock backends` in a process of its own,
// read it without booting anything. Remove <cache>/kvm-probe to probe
// again.

// ProbeMarker is the line the probe initramfs prints once its shell runs.
// The script computes the "42" ($((6*7))), so the kernel echoing its
// command line or the script cannot fake it.
const ProbeMarker = "paddock-probe: userspace 42"

const probeInit = `#!/bin/busybox sh
/bin/busybox echo "paddock-probe: userspace $((6*7))"
/bin/busybox poweroff -f
`

// DefaultKVMProbeTimeout bounds the probe's boot. A guest that works
// under KVM reaches userspace in well under a second; the kernel alone
// under TCG takes a few.
const DefaultKVMProbeTimeout = 20 * time.Second

// probeVersion changes when the probe itself changes, so old verdicts are
// not trusted.
const probeVersion = "1"

// KVMVerdict is what the probe concluded.
type KVMVerdict struct {
	State KVMState `json:"state"` // KVMAbsent, KVMUsable or KVMUnusable
	// Reason says why KVM is unusable: QEMU's exit or error lines, the
	// guest's run state, the console's last line.
	Reason  string        `json:"reason,omitempty"`
	Console string        `json:"console,omitempty"` // the console's end, when unusable
	Boot    time.Duration `json:"boot_ns,omitempty"` // start to marker, when usable
	// The key: what the answer depends on.
	KernelVersion string    `json:"kernel_version,omitempty"`
	QEMUVersion   string    `json:"qemu_version,omitempty"`
	HostRelease   string    `json:"host_release,omitempty"`
	ProbedAt      time.Time `json:"probed_at,omitzero"`
}

// Accel is the -accel value machines use under this verdict.
func (v KVMVerdict) Accel() string {
	if v.State == KVMUsable {
		return "kvm"
	}
	return "tcg"
}

// Describe says in one line which accelerator is used and why.
func (v KVMVerdict) Describe() string {
	switch v.State {
	case KVMUsable:
		return fmt.Sprintf("kvm (a test guest reached userspace under it in %v)", v.Boot.Round(time.Millisecond))
	case KVMUnusable:
		return "tcg (/dev/kvm is present but a test guest failed under it: " + v.Reason + ")"
	case KVMAbsent:
		return "tcg (no /dev/kvm)"
	default:
		return "tcg until probed (/dev/kvm present, unverified: a test guest boots under it at the first machine create)"
	}
}

// KVMProbeOptions say what to boot and where to keep the verdict.
type KVMProbeOptions struct {
	QEMU string // binary; "qemu-system-x86_64" when empty
	// KVMDevice is checked for presence only ("/dev/kvm" when empty);
	// QEMU opens /dev/kvm itself.
	KVMDevice string
	// Kernel and Initrd: the kit's kernel and ProbeInitramfs.
	Kernel, Initrd string
	// The verdict's key (HostRelease defaults to this host's).
	KernelVersion, QEMUVersion, HostRelease string
	// Dir is the run's scratch directory (its socket paths must stay
	// short); required.
	Dir      string
	MemoryMB int           // as the machines'; 256 when 0
	Timeout  time.Duration // DefaultKVMProbeTimeout when 0
	// CacheDir, when set, holds verdicts (CacheDir/kvm-probe/<key>.json):
	// one found there is returned without booting, a new one is written.
	CacheDir string
}

// HostRelease is the running host kernel's release (uname -r).
func HostRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func verdictPath(cache, kernel, qemu, host string) string {
	h := sha256.Sum256([]byte(probeVersion + "\x00" + kernel + "\x00" + qemu + "\x00" + host))
	return filepath.Join(cache, "kvm-probe", hex.EncodeToString(h[:8])+".json")
}

func readVerdict(path string) (KVMVerdict, bool) {
	var v KVMVerdict
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &v) != nil || (v.State != KVMUsable && v.State != KVMUnusable) {
		return KVMVerdict{}, false
	}
	return v, true
}

// CachedKVMVerdict returns the newest verdict in cache for this QEMU
// version and host release, whatever the guest kernel (Capabilities does
// not know the kernel before a kit is built).
func CachedKVMVerdict(cache, qemuVersion, hostRelease string) (KVMVerdict, bool) {
	files, _ := filepath.Glob(filepath.Join(cache, "kvm-probe", "*.json"))
	var best KVMVerdict
	found := false
	for _, f := range files {
		v, ok := readVerdict(f)
		if ok && v.QEMUVersion == qemuVersion && v.HostRelease == hostRelease &&
			f == verdictPath(cache, v.KernelVersion, v.QEMUVersion, v.HostRelease) &&
			(!found || v.ProbedAt.After(best.ProbedAt)) {
			best, found = v, true
		}
	}
	return best, found
}

// ProbeKVM decides whether KVM is usable: absent without the device
// (nothing is booted), else the cached verdict, else a boot of the tiny
// guest under -accel kvm. It returns an error, and no verdict, only when
// ctx ends first or the run cannot be set up; a guest that fails is a
// verdict (KVMUnusable) with its reason.
func ProbeKVM(ctx context.Context, opts KVMProbeOptions) (KVMVerdict, error) {
	if opts.KVMDevice == "" {
		opts.KVMDevice = "/dev/kvm"
	}
	if opts.HostRelease == "" {
		opts.HostRelease = HostRelease()
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultKVMProbeTimeout
	}
	if !exists(opts.KVMDevice) {
		return KVMVerdict{State: KVMAbsent}, nil
	}
	var path string
	if opts.CacheDir != "" {
		path = verdictPath(opts.CacheDir, opts.KernelVersion, opts.QEMUVersion, opts.HostRelease)
		if v, ok := readVerdict(path); ok {
			return v, nil
		}
	}
	if opts.Dir == "" || opts.Kernel == "" || opts.Initrd == "" {
		return KVMVerdict{}, errors.New("qemu: the KVM probe needs a kernel, an initramfs and a directory")
	}
	v := KVMVerdict{KernelVersion: opts.KernelVersion, QEMUVersion: opts.QEMUVersion, HostRelease: opts.HostRelease}
	bctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	d, console, err := BootToMarker(bctx, VMConfig{
		Kit: vmkit.Kit{Kernel: opts.Kernel, Initrd: opts.Initrd}, Dir: opts.Dir, QEMU: opts.QEMU,
		MemoryMB: opts.MemoryMB, Accel: "kvm",
	}, ProbeMarker)
	cancel()
	v.ProbedAt = time.Now().UTC()
	if err != nil {
		if ctx.Err() != nil {
			return KVMVerdict{}, fmt.Errorf("qemu: KVM probe interrupted: %w", ctx.Err())
		}
		var be *BootError
		if !errors.As(err, &be) {
			return KVMVerdict{}, err // not the guest's doing: no verdict
		}
		v.State, v.Reason, v.Console = KVMUnusable, err.Error(), console
	} else {
		v.State, v.Boot = KVMUsable, d
	}
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			raw, _ := json.MarshalIndent(v, "", "  ")
			writeFileSync(path, raw)
		}
	}
	return v, nil
}

// BootError is a guest that did not reach its marker: QEMU would not
// start or exited, the guest stopped (a KVM internal error, a panic, a
// shutdown), or time ran out.
type BootError struct{ msg string }

func (e *BootError) Error() string { return e.msg }

// BootToMarker boots cfg, waits until marker is on the console and stops
// the VM. It returns the time from starting QEMU to the marker, and the
// console's end (for a failure's record). Failures of the guest are
// *BootError, saying what QEMU printed and where the console ended.
func BootToMarker(ctx context.Context, cfg VMConfig, marker string) (time.Duration, string, error) {
	start := time.Now()
	vm, err := Boot(ctx, cfg)
	if err != nil {
		console, _ := os.ReadFile(filepath.Join(cfg.Dir, "console.log"))
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, errExitedAtStart) {
			return 0, tail(console, 2048), &BootError{"qemu did not answer on QMP in time: " + err.Error()}
		}
		if !errors.Is(err, errExitedAtStart) {
			return 0, "", err
		}
		return 0, tail(console, 2048), &BootError{"qemu exited at start" + summarize(strings.TrimPrefix(err.Error(), errExitedAtStart.Error()+": "), lastLine(console))}
	}
	defer vm.Stop(context.Background())
	fail := func(what string) (time.Duration, string, error) {
		console, _ := os.ReadFile(vm.Console)
		return 0, tail(console, 2048), &BootError{what + summarize(vm.Stderr(), lastLine(console))}
	}
	// The console is read every 5 ms (the time is also the bench's peer
	// figure: it should not be coarser than ours), QEMU's status every
	// tenth round.
	for round := 1; ; round++ {
		if b, _ := os.ReadFile(vm.Console); bytes.Contains(b, []byte(marker)) {
			return time.Since(start), "", nil
		}
		select {
		case <-vm.Exited():
			if b, _ := os.ReadFile(vm.Console); bytes.Contains(b, []byte(marker)) {
				return time.Since(start), "", nil
			}
			var code string
			if vm.cmd.ProcessState != nil {
				code = " (" + vm.cmd.ProcessState.String() + ")"
			}
			return fail("qemu exited before the guest reached userspace" + code)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fail("no " + strconv.Quote(marker) + " on the console in time")
			}
			return 0, "", ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if round%10 != 0 {
			continue
		}
		var st struct {
			Status string `json:"status"`
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := vm.QMP.Execute(qctx, "query-status", nil, &st)
		cancel()
		switch st.Status {
		case "internal-error", "guest-panicked", "shutdown", "io-error":
			if b, _ := os.ReadFile(vm.Console); bytes.Contains(b, []byte(marker)) {
				return time.Since(start), "", nil
			}
			return fail("the guest stopped (" + st.Status + ") before reaching userspace")
		}
		_ = err // QEMU exiting closes QMP: the next round sees it
	}
}

// registerLine matches QEMU's register dump after a KVM internal error.
var registerLine = regexp.MustCompile(`^([A-Z][A-Z0-9]*\s*=|extra data\[|Code=)`)

// summarize keeps the telling lines of QEMU's stderr (not its register
// dump), joined on one line, and the console's last line.
func summarize(stderr, consoleLast string) string {
	var keep []string
	n := 0
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || registerLine.MatchString(l) {
			continue
		}
		if n += len(l); n > 600 {
			break
		}
		keep = append(keep, l)
	}
	s := ""
	if len(keep) > 0 {
		s = ": " + strings.Join(keep, " / ")
	}
	if consoleLast != "" {
		s += "; console ended with " + strconv.Quote(consoleLast)
	} else {
		s += "; the console is empty"
	}
	return s
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 200 {
		l = l[:200]
	}
	return l
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// ProbeInitramfs writes (or finds cached) the probe's initramfs in cache:
// busybox-static (fetched as vmkit.BuildKit fetches it) as /bin/busybox and an
// /init that prints ProbeMarker and powers off. No modules: nothing is
// mounted, so the kernel's built-in drivers (the serial console) suffice.
func ProbeInitramfs(ctx context.Context, cache string) (string, error) {
	bb, err := vmkit.FetchBusybox(ctx, cache, func(string) {})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", bb, probeInit)
	out := filepath.Join(cache, "initramfs", "probe-"+hex.EncodeToString(h.Sum(nil))[:16]+".cpio")
	if exists(out) {
		return out, nil
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		return "", err
	}
	// Uncompressed, as the kit's initramfs is (the bench boots this one
	// as its peer: both pay the same unpacking).
	var buf bytes.Buffer
	w := vmkit.NewCPIOWriter(&buf)
	for _, d := range []string{"bin", "dev", "proc", "sys"} {
		w.Entry(d, 0o040755, 0, 0, nil)
	}
	w.Entry("dev/console", 0o020600, 5, 1, nil)
	w.Entry("dev/null", 0o020666, 1, 3, nil)
	w.Entry("bin/busybox", 0o100755, 0, 0, data)
	w.Entry("init", 0o100755, 0, 0, []byte(probeInit))
	w.Entry("TRAILER!!!", 0, 0, 0, nil)
	if err := w.Err(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return out, nil
}
