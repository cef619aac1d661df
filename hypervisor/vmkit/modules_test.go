package vmkit

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/internal/testutil"
)

// fakeModule writes an ELF object whose .modinfo says depends=deps, as a
// kernel module does, at tree/rel (compressed with xz for a .ko.xz name).
func fakeModule(t *testing.T, tree, rel string, deps ...string) {
	t.Helper()
	gcc := testutil.RequiresCommand(t, "gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "m.c")
	info := "license=GPL\\0depends=" + strings.Join(deps, ",") + "\\0name=x"
	os.WriteFile(src, []byte(`__attribute__((section(".modinfo"), used)) static const char info[] = "`+info+`";`+"\n"), 0o644)
	obj := filepath.Join(dir, "m.o")
	if out, err := exec.Command(gcc, "-c", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	dst := filepath.Join(tree, rel)
	os.MkdirAll(filepath.Dir(dst), 0o755)
	if strings.HasSuffix(rel, ".xz") {
		xz := testutil.RequiresCommand(t, "xz")
		if out, err := exec.Command(xz, "-k", obj).CombinedOutput(); err != nil {
			t.Fatalf("xz: %v\n%s", err, out)
		}
		obj += ".xz"
	}
	b, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestModuleOrder: modules come after what they depend on, built-in ones
// (in modules.builtin) are not listed, a name the kernel has in neither
// form is an error, '-' in a file name is '_', and a cycle is an error.
func TestModuleOrder(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "kernel")
	fakeModule(t, tree, "drivers/virtio/virtio_ring.ko.xz")
	fakeModule(t, tree, "drivers/virtio/virtio.ko", "virtio_ring")
	fakeModule(t, tree, "drivers/block/virtio_blk.ko", "virtio", "built_in_one")
	fakeModule(t, tree, "drivers/virtio/virtio-mmio.ko.xz", "virtio")
	fakeModule(t, tree, "net/needs_missing.ko", "nowhere")
	fakeModule(t, tree, "loop/a.ko", "b")
	fakeModule(t, tree, "loop/b.ko", "a")
	order, err := moduleOrder(context.Background(), tree, []string{"virtio_blk", "virtio_mmio", "built_in_one"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"virtio_ring.ko", "virtio.ko", "virtio_blk.ko", "virtio_mmio.ko"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}

	// With the kernel's modules.builtin, names are checked against it.
	os.WriteFile(filepath.Join(root, "modules.builtin"), []byte("kernel/drivers/base/built-in-one.ko\nkernel/drivers/virtio/virtio_pci.ko\n"), 0o644)
	dst := t.TempDir()
	order, err = moduleOrder(context.Background(), tree, []string{"virtio_blk", "virtio_pci"}, dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"virtio_ring.ko", "virtio.ko", "virtio_blk.ko"}; !slices.Equal(order, want) {
		t.Errorf("order with modules.builtin %v, want %v", order, want)
	}
	for _, m := range order {
		if b, err := os.ReadFile(filepath.Join(dst, m)); err != nil || !strings.HasPrefix(string(b), "\x7fELF") {
			t.Errorf("%s: not written uncompressed (%v)", m, err)
		}
	}
	for _, wanted := range []string{"needs_missing", "no_such_module"} {
		if _, err := moduleOrder(context.Background(), tree, []string{wanted}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "neither") {
			t.Errorf("%s: %v, want an error naming the missing module", wanted, err)
		}
	}
	if _, err := moduleOrder(context.Background(), tree, []string{"a"}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: %v", err)
	}
}

// TestFetchedKernelModuleOrder checks, on whatever kernel Debian serves
// today, what the kit's cache holds: in modules.order and each lazy
// group's order, every module comes after the modules it depends on, a
// dependency not listed is built into the kernel, nothing built in is
// listed, nothing twice, and every module asked for is listed or built in.
func TestFetchedKernelModuleOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches the guest kernel from Debian's archive (27 MB, cached)")
	}
	testutil.RequiresCommand(t, "apt-get")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, ver, err := fetchKernel(ctx, vmCache(t), func(s string) { t.Log(s) })
	if errors.Is(err, ErrNoKernel) {
		t.Skipf("cannot fetch the guest kernel from Debian's archive: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s", ver)
	builtin, err := readBuiltin(filepath.Join(dir, "modules.builtin"))
	if err != nil {
		t.Fatalf("the cache has no modules.builtin: %v", err)
	}
	check := func(file string, wanted []string) {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, f := range strings.Fields(string(b)) {
			name := strings.TrimSuffix(f, ".ko")
			if seen[name] {
				t.Errorf("%s: %s listed twice", file, f)
			}
			if builtin[name] {
				t.Errorf("%s: %s is built into the kernel but listed", file, f)
			}
			ko, err := os.ReadFile(filepath.Join(dir, "modules", f))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			deps, err := modDepends(ko)
			if err != nil {
				t.Fatalf("%s: %s: %v", file, f, err)
			}
			for _, d := range deps {
				if !seen[d] && !builtin[d] {
					t.Errorf("%s: %s depends on %s, which is neither listed before it nor built in", file, f, d)
				}
			}
			seen[name] = true
		}
		for _, w := range wanted {
			if !seen[w] && !builtin[w] {
				t.Errorf("%s: %s is neither listed nor built in", file, w)
			}
		}
	}
	check("modules.order", bootModules)
	for _, g := range lazyModules {
		check(g.name+".order", g.modules)
	}
}

// vmCache is the machine-wide cache of kernels, busybox and initramfs
// images the tests share (the kernel package is 27 MB); hypervisor/qemu's
// tests use the same directory.
func vmCache(t *testing.T) string {
	dir := filepath.Join(os.TempDir(), "paddock-test-vm")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}
