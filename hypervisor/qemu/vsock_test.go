package qemu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/hypervisor/vmkit"
)

// TestChannelFor: vsock only where the host has a vhost-vsock device that
// opens, or when asked for (and then only if the probe saw the device).
func TestChannelFor(t *testing.T) {
	saved := vhostVsockDevice
	defer func() { vhostVsockDevice = saved }()
	vhostVsockDevice = filepath.Join(t.TempDir(), "vhost-vsock")
	for _, tc := range []struct {
		opt     string
		present bool
		want    string
		err     bool
	}{
		{"", false, ChannelSerial, false},
		{ChannelSerial, true, ChannelSerial, false},
		{ChannelVsock, false, "", true},
		{ChannelVsock, true, ChannelVsock, false},
		{"virtio", true, "", true},
		// The probe saw the device, but it cannot be opened.
		{"", true, ChannelSerial, false},
	} {
		got, err := channelFor(tc.opt, tc.present)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("channelFor(%q, %v) = %q, %v", tc.opt, tc.present, got, err)
		}
	}
	if err := os.WriteFile(vhostVsockDevice, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := channelFor("", true); got != ChannelVsock || err != nil {
		t.Errorf("with a device that opens: %q %v", got, err)
	}
	if snapChannel(snapMeta{}) != ChannelSerial || snapChannel(snapMeta{Channel: ChannelVsock}) != ChannelVsock {
		t.Error("snapChannel")
	}
}

// TestVsockArgs: a vsock VM has the vhost-vsock device with its CID, tells
// the guest on the kernel command line, and has no virtio-serial port; a
// serial one is the other way round.
func TestVsockArgs(t *testing.T) {
	cfg := VMConfig{Kit: vmkit.Kit{Kernel: "/k", Initrd: "/i"}, Channel: true, VsockCID: 1234}
	a := strings.Join(cfg.args("", "/c", "/q", ""), " ")
	if !strings.Contains(a, "-device vhost-vsock-pci,guest-cid=1234") || !strings.Contains(a, "paddock.chan=vsock") ||
		strings.Contains(a, "virtserialport") {
		t.Errorf("vsock args: %s", a)
	}
	cfg.MMIO = true
	if a := strings.Join(cfg.args("", "/c", "/q", ""), " "); !strings.Contains(a, "vhost-vsock-device,guest-cid=1234") || strings.Contains(a, "pcie=on") {
		t.Errorf("vsock args on virtio-mmio: %s", a)
	}
	cfg.MMIO = false
	cfg.VsockCID = 0
	a = strings.Join(cfg.args("", "/c", "/q", "/a.sock"), " ")
	if strings.Contains(a, "vhost-vsock") || strings.Contains(a, "paddock.chan") || !strings.Contains(a, "virtserialport,chardev=agent,name=paddock.agent") {
		t.Errorf("serial args: %s", a)
	}
	seen := map[uint32]bool{}
	for range 1000 {
		c := newCID()
		if c < 3 || c >= 1<<31 {
			t.Fatalf("cid %d out of range", c)
		}
		seen[c] = true
	}
	if len(seen) < 990 {
		t.Errorf("only %d distinct CIDs in 1000 draws", len(seen))
	}
	if !cidInUse(fmt.Errorf("qemu exited at start: vhost-vsock: unable to set guest cid: Address already in use")) || cidInUse(errors.New("other")) {
		t.Error("cidInUse")
	}
}

// TestVsockDeviceKnownToQEMU asks the installed QEMU about the device the
// vsock channel uses: the model exists for microvm and takes guest-cid.
// (Booting one needs /dev/vhost-vsock, which these machines lack: the
// channel itself is not run here; see docs/STATUS.md.)
func TestVsockDeviceKnownToQEMU(t *testing.T) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed")
	}
	for _, c := range [][2]string{{"microvm,pcie=on", "vhost-vsock-pci"}, {"microvm", "vhost-vsock-device"}} {
		out, err := exec.Command(bin, "-machine", c[0], "-device", c[1]+",help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "guest-cid") {
			t.Errorf("-machine %s -device %s,help: %v\n%s", c[0], c[1], err, out)
		}
	}
}
