package qemu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProbe(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	device := filepath.Join(dir, "dev")
	if err := os.WriteFile(device, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	debian := script("debian", `echo "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)"; echo "Copyright (c) 2003-2022 Fabrice Bellard and the QEMU Project developers"`)
	upstream := script("upstream", `echo "QEMU emulator version 9.1.0"`)
	garbled := script("garbled", `echo "hello"`)
	failing := script("failing", `exit 3`)

	for _, tc := range []struct {
		name    string
		opts    ProbeOptions
		want    Capabilities
		wantErr bool
	}{
		{"debian build, kvm, no vsock", ProbeOptions{QEMU: debian, KVMDevice: device, VsockDevice: missing},
			Capabilities{QEMUPath: debian, QEMUVersion: "7.2.22", QEMUPackage: "Debian 1:7.2+dfsg-7+deb12u18+b3", KVM: KVMPresentUnverified}, false},
		{"upstream build, vsock, no kvm", ProbeOptions{QEMU: upstream, KVMDevice: missing, VsockDevice: device},
			Capabilities{QEMUPath: upstream, QEMUVersion: "9.1.0", KVM: KVMAbsent, VhostVsock: true}, false},
		{"no version", ProbeOptions{QEMU: garbled, KVMDevice: missing, VsockDevice: missing},
			Capabilities{QEMUPath: garbled, KVM: KVMAbsent}, true},
		{"fails", ProbeOptions{QEMU: failing, KVMDevice: device, VsockDevice: missing},
			Capabilities{QEMUPath: failing, KVM: KVMPresentUnverified}, true},
		{"missing binary still reports devices", ProbeOptions{QEMU: missing, KVMDevice: device, VsockDevice: device},
			Capabilities{KVM: KVMPresentUnverified, VhostVsock: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Probe(context.Background(), tc.opts)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrNoQEMU)) {
				t.Errorf("err = %v, want error %v (wrapping ErrNoQEMU)", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Probe (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProbeThisHost logs what the real host offers (no assertion on KVM or
// vsock, which differ between machines).
func TestProbeThisHost(t *testing.T) {
	c, err := Probe(context.Background(), ProbeOptions{})
	if errors.Is(err, ErrNoQEMU) {
		t.Skipf("needs qemu-system-x86_64 (run `make deps`): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", c)
}
