package vmkit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"paddock.dev/paddock/guest/vminit"
)

// TestKernelCacheKeyedByModules: the kernel cache directory names the
// module lists (boot and lazy groups), so a kernel cached for another list (an older build without
// the netfilter modules) is never used, not even offline; offline the
// newest one for this list is, with its version read from its name.
func TestKernelCacheKeyedByModules(t *testing.T) {
	for _, m := range []string{"virtio_blk"} {
		if !slices.Contains(bootModules, m) {
			t.Errorf("bootModules lacks %s", m)
		}
	}
	group := func(name string) []string {
		for _, g := range lazyModules {
			if g.name == name {
				return g.modules
			}
		}
		return nil
	}
	for _, m := range []string{"nf_tables", "nft_chain_nat", "nft_redir", "nf_conntrack", "nft_reject_inet"} {
		if !slices.Contains(group("netfilter"), m) || slices.Contains(bootModules, m) {
			t.Errorf("%s: not in the netfilter group, or loaded at boot", m)
		}
	}
	if !slices.Contains(group("vsock"), "vmw_vsock_virtio_transport") {
		t.Error("the vsock group lacks its transport")
	}
	key := modulesKey()
	saved := bootModules
	bootModules = append(slices.Clone(saved), "something_else")
	other := modulesKey()
	bootModules = saved
	savedLazy := lazyModules
	lazyModules = append(slices.Clone(savedLazy), moduleGroup{"extra", []string{"x"}})
	otherLazy := modulesKey()
	lazyModules = savedLazy
	if key == other || key == otherLazy || key != modulesKey() {
		t.Fatalf("modulesKey: %q for the lists, %q and %q for others", key, other, otherLazy)
	}

	cache := t.TempDir()
	mk := func(name string) string {
		d := filepath.Join(cache, "kernel", name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "modules.order"), []byte("virtio_mmio.ko\n"), 0o644)
		return d
	}
	// apt-cache is not found: the archive cannot be asked.
	t.Setenv("PATH", t.TempDir())
	mk("linux-image-6.12.9-cloud-amd64_6.12.9-1")
	mk("linux-image-6.12.9-cloud-amd64_6.12.9-1_" + other)
	if d, _, err := fetchKernel(context.Background(), cache, func(string) {}); !errors.Is(err, ErrNoKernel) {
		t.Fatalf("with only kernels cached for other module lists: %q, %v; want ErrNoKernel", d, err)
	}
	mk("linux-image-6.12.8-cloud-amd64_6.12.8-1_" + key)
	want := mk("linux-image-6.12.9-cloud-amd64_6.12.9-1_" + key)
	d, ver, err := fetchKernel(context.Background(), cache, func(string) {})
	if err != nil || d != want || ver != "6.12.9-cloud-amd64 (6.12.9-1)" {
		t.Fatalf("offline: %q %q %v; want %q", d, ver, err, want)
	}
	if !strings.HasSuffix(d, "_"+key) {
		t.Errorf("dir %s does not name the module list", d)
	}
}

// TestInitramfsLayoutMatchesGuest: the initramfs this package writes and
// the guest's Initramfs stage that reads it agree on names.
func TestInitramfsLayoutMatchesGuest(t *testing.T) {
	if "/"+initramfsDir != vminit.InitramfsDir || RootUpMarker != vminit.RootUpMarker {
		t.Errorf("initramfs dir %q vs %q, marker %q vs %q", initramfsDir, vminit.InitramfsDir, RootUpMarker, vminit.RootUpMarker)
	}
}
