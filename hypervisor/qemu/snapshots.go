package qemu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"paddock.dev/paddock/hypervisor"
)

// DeleteSnapshot removes a snapshot's directory (memory file, record)
// without the machine that took it, which may be gone: the session
// manager calls it on delete and expiry. Layers still under a running
// machine or another snapshot stay until their last user goes (collect).
// Deleting what is already gone is not an error.
func (b *Backend) DeleteSnapshot(s hypervisor.Snapshot) error {
	if !hypervisor.IDPattern.MatchString(s.ID) {
		return fmt.Errorf("%w: snapshot id %q", hypervisor.ErrInvalidSpec, s.ID)
	}
	dir := filepath.Join(b.snapshotsDir(), s.ID)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	b.collect()
	return nil
}
