package qemu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/hypervisor"
)

var _ hypervisor.CapacityReporter = (*Backend)(nil)

// Capacity implements hypervisor.CapacityReporter. A VM's disk is a qcow2
// overlay that grows as the guest writes, in the state directory, beside
// the frozen disks and memory files of checkpoints; all of them share that
// directory's file system with whatever else lives there. What the backend
// can hold is therefore the file system's free space now plus what the
// backend's own disk and snapshot files already take (their space counts
// as held by the machines and checkpoints that own them). Anything else
// that fills the file system shrinks it.
func (b *Backend) Capacity() (hypervisor.Capacity, error) {
	c, err := hypervisor.HostCapacity(hypervisor.Capacity{}, specLimits)
	if err != nil {
		return c, err
	}
	// The state directory may not exist before the first machine: its
	// nearest existing parent is on the same file system.
	dir := b.dir
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return c, fmt.Errorf("qemu: the state directory's file system: %w", err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	var held int64
	for _, d := range []string{b.disksDir(), b.snapshotsDir()} {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if e.Type().IsRegular() {
				var s unix.Stat_t
				if unix.Lstat(p, &s) == nil {
					held += s.Blocks * 512
				}
			}
			return nil
		})
		if err != nil {
			return c, fmt.Errorf("qemu: measure %s: %w", d, err)
		}
	}
	c.DiskBytes = free + held
	c.Disk = fmt.Sprintf("the file system of %s (%s free, %s in the backend's disks and checkpoints)", b.dir, hypervisor.FormatBytes(free), hypervisor.FormatBytes(held))
	c.DiskReserveBytes = b.reserve.Of(c.DiskBytes)
	return c, nil
}
