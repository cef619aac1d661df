package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"time"
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
	// TODO(issue 7): KVMUsable and KVMUnusable, decided by booting the
	// tiny guest once under -accel kvm (needs the VM image's kernel and
	// initramfs) and falling back to TCG when it fails.
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
