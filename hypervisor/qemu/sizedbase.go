package qemu

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"paddock.dev/paddock/hypervisor/vmkit"
)

// sizedBase returns a read-only base disk whose ext4 already fills bytes
// (rounded down to 4 KiB, a block, so the room is never more than asked):
// the kit's root disk grown on the host, in a sparse file beside it
// (vm-root...-s<KiB>k.ext4), made once per size and
// removed with the image build. A machine on it needs no resize at boot,
// which under emulation took a tenth of a second or more of every boot;
// the host does it at native speed. Bases never shrink: a size smaller
// than the kit's disk gives the kit's disk.
func (b *Backend) sizedBase(ctx context.Context, kit vmkit.Kit, bytes int64) (string, error) {
	fi, err := os.Stat(kit.RootDisk)
	if err != nil {
		return "", err
	}
	kib := bytes >> 12 << 2
	if kib<<10 <= fi.Size() {
		return kit.RootDisk, nil
	}
	out := fmt.Sprintf("%s-s%dk.ext4", strings.TrimSuffix(kit.RootDisk, ".ext4"), kib)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	b.baseMu.Lock()
	defer b.baseMu.Unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".sized-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	src, err := os.Open(kit.RootDisk)
	if err != nil {
		tmp.Close()
		return "", err
	}
	_, err = copySparse(tmp, src)
	src.Close()
	if err == nil {
		err = tmp.Truncate(kib << 10)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("qemu: sized base: %w", err)
	}
	if o, err := exec.CommandContext(ctx, "resize2fs", "-f", tmp.Name()).CombinedOutput(); err != nil {
		return "", fmt.Errorf("qemu: resize2fs %s: %w: %s", tmp.Name(), err, o)
	}
	if err := os.Chmod(tmp.Name(), 0o444); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}

// copySparse copies src to dst leaving runs of zero blocks as holes.
func copySparse(dst *os.File, src io.Reader) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	zero := make([]byte, len(buf))
	for {
		k, err := io.ReadFull(src, buf)
		if k > 0 {
			chunk := buf[:k]
			if string(chunk) == string(zero[:k]) {
				if _, err := dst.Seek(int64(k), io.SeekCurrent); err != nil {
					return n, err
				}
			} else if _, err := dst.Write(chunk); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, dst.Truncate(n)
		}
		if err != nil {
			return n, err
		}
	}
}
