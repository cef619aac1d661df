package qemu

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"paddock.dev/paddock/hypervisor/vmkit"
)

// TestSizedBase grows a small ext4 on the host to sizes asked in bytes:
// the file and its filesystem have the size rounded down to a block, it
// is sparse, read-only and cached by size; a size below the kit's disk
// gives the kit's disk.
func TestSizedBase(t *testing.T) {
	for _, tool := range []string{"mkfs.ext4", "resize2fs", "dumpe2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "vm-root.v2.ext4")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", disk, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs: %v %s", err, out)
	}
	b := &Backend{}
	ctx := context.Background()
	kit := vmkit.Kit{RootDisk: disk}
	if got, err := b.sizedBase(ctx, kit, 4<<20); err != nil || got != disk {
		t.Errorf("smaller than the kit's disk: %q %v", got, err)
	}
	want := int64(64<<20 + 4096)
	got, err := b.sizedBase(ctx, kit, want+100)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(got)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != want || fi.Mode().Perm() != 0o444 || !strings.HasSuffix(got, "-s65540k.ext4") {
		t.Errorf("sized base %s: %d bytes, mode %v", got, fi.Size(), fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Blocks*512 > 16<<20 {
		t.Errorf("the sized base is not sparse: %d bytes allocated", st.Blocks*512)
	}
	out, err := exec.Command("dumpe2fs", "-h", got).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "Block count:              16385\n") {
		t.Errorf("filesystem not grown to %d blocks:\n%s", want/4096, out)
	}
	again, err := b.sizedBase(ctx, kit, want)
	if err != nil || again != got {
		t.Errorf("second ask: %q %v", again, err)
	}
}
