package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/hypervisor/qemu"
	"paddock.dev/paddock/internal/testutil"
)

// TestCLIImageVM builds an image with its qemu boot kit (`image build
// --vm`), reads the kit back with `image vm --json`, and boots it: a
// one-off `sandbox run --backend qemu` answers from the VM's own kernel.
// The kernel cache is the tests' shared one (PADDOCK_VM_CACHE), so the
// kernel is not fetched again.
func TestCLIImageVM(t *testing.T) {
	testutil.RequiresRoot(t)
	if _, err := qemu.Probe(t.Context(), qemu.ProbeOptions{}); err != nil {
		t.Skipf("qemu cannot run here: %v", err)
	}
	bin := buildCLI(t)
	state := t.TempDir()
	env := append(os.Environ(), "PADDOCK_GUEST=", "PADDOCK_VM_CACHE="+filepath.Join(os.TempDir(), "vm-cache"))
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, env, nil, append([]string{"--state-dir", state}, args...)...)
	}
	if _, se, code := run("image", "vm", "mini"); code != exitNotFound || !strings.Contains(se, "paddock image build mini") {
		t.Errorf("vm kit of a missing image: code %d, stderr %q", code, se)
	}
	so, se, code := run("image", "build", "mini", "--vm")
	if code != 0 || !strings.Contains(so, "built image mini") || !strings.Contains(so, "vm kit for image mini: kernel ") {
		t.Fatalf("image build --vm: code %d stdout %q stderr %q", code, so, se)
	}
	so, se, code = run("--json", "image", "vm", "mini")
	var k vmKitInfo
	if err := json.Unmarshal([]byte(so), &k); err != nil || code != 0 {
		t.Fatalf("image vm --json: %v code %d %q %q", err, code, so, se)
	}
	if k.Image != "mini" || !strings.Contains(k.KernelVersion, "cloud-amd64") || k.RootDiskBytes <= 0 || k.RootFreeBytes <= 0 ||
		!strings.HasPrefix(k.RootDisk, filepath.Join(state, "images", "mini")) {
		t.Errorf("kit: %+v", k)
	}
	for _, f := range []string{k.Kernel, k.Initrd, k.RootDisk} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("kit file: %v", err)
		}
	}
	if se != "" {
		t.Errorf("--json printed progress: %q", se)
	}
	so, se, code = run("sandbox", "run", "--backend", "qemu", "--memory-mb", "256", "--", "uname -r; cat /etc/paddock-vm-build")
	if code != 0 || !strings.HasPrefix(so, strings.Fields(k.KernelVersion)[0]+"\n") || !strings.Contains(so, k.Build) {
		t.Errorf("a VM from the kit: code %d stdout %q stderr %q (kit %s, build %s)", code, so, se, k.KernelVersion, k.Build)
	}
}
