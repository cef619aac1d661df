package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/vmkit"
	"paddock.dev/paddock/internal/testutil"
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

// fakeQEMU writes a script standing in for qemu-system-x86_64 that counts
// its runs in dir/runs and then runs body.
func fakeQEMU(t *testing.T, dir, body string) (bin string, runs func() int) {
	t.Helper()
	bin = filepath.Join(dir, "fake-qemu")
	count := filepath.Join(dir, "runs")
	script := "#!/bin/sh\necho x >> " + count + "\n" + body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "x")
	}
}

// TestProbeKVMVerdict checks the verdict logic without a real guest: no
// device means absent with nothing booted; a QEMU that dies with a KVM
// internal error is unusable, the reason keeping QEMU's error lines but
// not its register dump; the verdict is cached by kernel, QEMU and host
// release, and a different key probes again.
func TestProbeKVMVerdict(t *testing.T) {
	dir := t.TempDir()
	device := filepath.Join(dir, "kvm")
	if err := os.WriteFile(device, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("no device: absent, nothing booted", func(t *testing.T) {
		bin, runs := fakeQEMU(t, t.TempDir(), "exit 1")
		v, err := ProbeKVM(ctx, KVMProbeOptions{QEMU: bin, KVMDevice: filepath.Join(dir, "missing"), Dir: t.TempDir(),
			Kernel: "k", Initrd: "i", CacheDir: t.TempDir()})
		if err != nil || v.State != KVMAbsent || v.Accel() != "tcg" {
			t.Errorf("ProbeKVM = %+v, %v; want absent, tcg", v, err)
		}
		if runs() != 0 {
			t.Errorf("QEMU ran %d times without a KVM device", runs())
		}
	})

	t.Run("kvm internal error: unusable with the reason, cached", func(t *testing.T) {
		fake := t.TempDir()
		bin, runs := fakeQEMU(t, fake, `cat >&2 <<'X'
qemu-system-x86_64: warning: host doesn't support requested feature: CPUID.01H:ECX.pni [bit 0]
KVM internal error. Suberror: 1
extra data[0]: 0x0000000000000001
emulation failure
RAX=0000000001ad29a0 RBX=0000000004782b64 RCX=0000000000000000 RDX=0000000000000005
ES =0000 0000000000000000 00000000 00000000
Code=fa 0f 77 c4 4e 8d 54 35 00 41 b8 01 00 00 00
X
exit 1`)
		cache := t.TempDir()
		opts := KVMProbeOptions{QEMU: bin, KVMDevice: device, Dir: t.TempDir(), Kernel: "vmlinuz", Initrd: "initrd",
			KernelVersion: "6.12-test", QEMUVersion: "7.2.22", HostRelease: "host-1", CacheDir: cache, Timeout: 10 * time.Second}
		v, err := ProbeKVM(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if v.State != KVMUnusable || v.Accel() != "tcg" {
			t.Fatalf("verdict %+v, want unusable", v)
		}
		for _, want := range []string{"qemu exited", "KVM internal error", "emulation failure"} {
			if !strings.Contains(v.Reason, want) {
				t.Errorf("reason %q lacks %q", v.Reason, want)
			}
		}
		for _, dump := range []string{"RAX=", "ES =", "Code=", "extra data"} {
			if strings.Contains(v.Reason, dump) {
				t.Errorf("reason %q keeps the register dump (%q)", v.Reason, dump)
			}
		}
		if !strings.Contains(v.Describe(), "tcg") || !strings.Contains(v.Describe(), "emulation failure") {
			t.Errorf("Describe() = %q", v.Describe())
		}
		if v.KernelVersion != "6.12-test" || v.QEMUVersion != "7.2.22" || v.HostRelease != "host-1" || v.ProbedAt.IsZero() {
			t.Errorf("verdict key not recorded: %+v", v)
		}
		again, err := ProbeKVM(ctx, opts)
		if err != nil || runs() != 1 || again.State != KVMUnusable || again.Reason != v.Reason {
			t.Errorf("second probe: %+v, %v after %d QEMU runs; want the cached verdict, one run", again, err, runs())
		}
		if c, ok := CachedKVMVerdict(cache, "7.2.22", "host-1"); !ok || c.Reason != v.Reason {
			t.Errorf("CachedKVMVerdict = %+v, %v", c, ok)
		}
		if _, ok := CachedKVMVerdict(cache, "7.2.22", "host-2"); ok {
			t.Error("CachedKVMVerdict matched another host release")
		}
		for _, change := range []func(*KVMProbeOptions){
			func(o *KVMProbeOptions) { o.HostRelease = "host-2" },
			func(o *KVMProbeOptions) { o.QEMUVersion = "8.0.0" },
			func(o *KVMProbeOptions) { o.KernelVersion = "6.13-test" },
		} {
			o := opts
			change(&o)
			before := runs()
			if _, err := ProbeKVM(ctx, o); err != nil || runs() != before+1 {
				t.Errorf("a changed key (%+v) did not probe again: %v", o, err)
			}
		}
	})

	t.Run("a guest that never reaches userspace times out as unusable", func(t *testing.T) {
		// A real QEMU with no guest (-machine none): QMP answers, the
		// console stays empty.
		qemu := testutil.RequiresCommand(t, "qemu-system-x86_64")
		bin, _ := fakeQEMU(t, t.TempDir(), `while [ $# -gt 0 ]; do [ "$1" = -qmp ] && q=$2; shift; done
exec `+qemu+` -machine none -accel tcg -nodefaults -display none -qmp "$q"`)
		start := time.Now()
		v, err := ProbeKVM(ctx, KVMProbeOptions{QEMU: bin, KVMDevice: device, Dir: t.TempDir(),
			Kernel: "k", Initrd: "i", Timeout: 2 * time.Second})
		if err != nil || v.State != KVMUnusable || !strings.Contains(v.Reason, "in time") {
			t.Fatalf("ProbeKVM = %+v, %v; want unusable, no marker in time", v, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v with a 2 s timeout", d)
		}
		t.Logf("reason: %s", v.Reason)
	})

	t.Run("the caller giving up is no verdict", func(t *testing.T) {
		bin, _ := fakeQEMU(t, t.TempDir(), "sleep 30")
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		cache := t.TempDir()
		v, err := ProbeKVM(cctx, KVMProbeOptions{QEMU: bin, KVMDevice: device, Dir: t.TempDir(), Kernel: "k", Initrd: "i", CacheDir: cache})
		if err == nil {
			t.Errorf("ProbeKVM = %+v, want an error", v)
		}
		if files, _ := filepath.Glob(filepath.Join(cache, "kvm-probe", "*")); len(files) != 0 {
			t.Errorf("an interrupted probe cached %v", files)
		}
	})
}

// TestProbeKVMThisHost runs the boot probe on this host. Without /dev/kvm
// the verdict is absent. With it, on the machines this project is built
// on (a paravirtual KVM that kills a stock guest), it is unusable with
// QEMU's reason; on a host whose KVM works it is usable and a VM of the
// kit boots to its root disk under -accel kvm. Either way the same tiny
// guest reaches userspace under TCG, so a failure is KVM's.
func TestProbeKVMThisHost(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	kit := miniKit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	initrd, err := ProbeInitramfs(ctx, vmCache(t))
	if err != nil {
		t.Fatal(err)
	}
	d, console, err := BootToMarker(ctx, VMConfig{Kit: vmkit.Kit{Kernel: kit.Kernel, Initrd: initrd}, Dir: t.TempDir(), Accel: "tcg"}, ProbeMarker)
	if err != nil {
		t.Fatalf("the probe guest under TCG: %v\nconsole:\n%s", err, console)
	}
	t.Logf("the probe guest reached userspace under TCG in %v", d.Round(time.Millisecond))

	host, err := Probe(ctx, ProbeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v, err := ProbeKVM(ctx, KVMProbeOptions{Kernel: kit.Kernel, Initrd: initrd, KernelVersion: kit.KernelVersion,
		QEMUVersion: host.QEMUVersion, Dir: t.TempDir(), MemoryMB: DefaultMemoryMB})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("verdict in %v: %s", time.Since(start).Round(time.Millisecond), v.Describe())
	switch {
	case !exists("/dev/kvm"):
		if v.State != KVMAbsent {
			t.Errorf("no /dev/kvm: verdict %s, want absent", v.State)
		}
	case v.State == KVMUnusable:
		if v.Reason == "" || !strings.ContainsAny(v.Reason, ":") {
			t.Errorf("unusable without a reason: %+v", v)
		}
		if time.Since(start) > DefaultKVMProbeTimeout+10*time.Second {
			t.Errorf("the probe took %v", time.Since(start))
		}
		t.Logf("console tail:\n%s", v.Console)
	case v.State == KVMUsable:
		dir := t.TempDir()
		vm, err := Boot(ctx, VMConfig{Kit: kit, Dir: dir, Accel: "kvm"})
		if err != nil {
			t.Fatal(err)
		}
		defer vm.Stop(context.Background())
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		if _, err := vm.WaitConsole(wctx, vmkit.RootUpMarker); err != nil {
			t.Fatalf("KVM said usable but the kit does not boot under it: %v%s", err, vm.consoleTail())
		}
	default:
		t.Errorf("verdict %+v", v)
	}
}

// TestBackendAccel checks the wiring: Capabilities says the accelerator
// without booting anything; a machine boots under the verdict's
// accelerator; a memory snapshot records it and its fork boots under it.
func TestBackendAccel(t *testing.T) {
	if testing.Short() {
		t.Skip("boots VMs")
	}
	kit := miniKit(t)
	host, err := Probe(context.Background(), ProbeOptions{})
	if err != nil {
		t.Skip(err)
	}
	// Probe again here: drop this host's cached verdict for the kit.
	verdict := verdictPath(vmCache(t), kit.KernelVersion, host.QEMUVersion, HostRelease())
	os.Remove(verdict)
	b, err := New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t),
		ImagesDir: testutil.MiniImages(t), Options: map[string]string{"cache": vmCache(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t0 := time.Now()
	caps := b.Capabilities()
	if !caps.Available {
		t.Skipf("qemu backend unavailable: %s", caps.Reason)
	}
	if caps.Accelerator == "" || time.Since(t0) > 5*time.Second {
		t.Errorf("Capabilities: accelerator %q in %v", caps.Accelerator, time.Since(t0))
	}
	t.Logf("before any machine: %s", caps.Accelerator)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	m, err := b.create(ctx, hypervisor.MachineSpec{Image: testutil.MiniImageName})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	want := b.kvmVerdict().Accel()
	if host.KVM != KVMAbsent {
		if v, ok := readVerdict(verdict); !ok || v.Accel() != want {
			t.Errorf("the verdict cached at %s: %+v, %v; machines use %s", verdict, v, ok, want)
		}
	}
	after := b.Capabilities().Accelerator
	t.Logf("after the first create: %s", after)
	if !strings.HasPrefix(after, want+" ") || strings.Contains(after, "until probed") {
		t.Errorf("Capabilities().Accelerator = %q after the probe, machines use %s", after, want)
	}
	accelOf := func(m *Machine) string {
		m.mu.Lock()
		defer m.mu.Unlock()
		i := slices.Index(m.vm.Args, "-accel")
		if i < 0 {
			return ""
		}
		return m.vm.Args[i+1]
	}
	if got := accelOf(m); got != want {
		t.Errorf("machine boots under -accel %q, the verdict says %s", got, want)
	}
	cl := client.New(m.Dial)
	if _, err := cl.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"true"}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := m.Checkpoint(ctx, "accel", true)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(b.snapshotsDir(), snap.ID, "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta snapMeta
	if err := json.Unmarshal(raw, &meta); err != nil || meta.Accel != want {
		t.Errorf("snapshot.json accel %q (%v), want %s", meta.Accel, err, want)
	}
	kids, err := m.Fork(ctx, snap, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer kids[0].Stop(context.Background())
	if got := accelOf(kids[0].(*Machine)); got != want {
		t.Errorf("fork child boots under -accel %q, its snapshot was taken under %s", got, want)
	}
	if snapAccel(snapMeta{}) != "tcg" {
		t.Error("a snapshot without a recorded accelerator should restore under tcg")
	}
}
