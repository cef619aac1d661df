package procbox

import (
	"context"
	"testing"

	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

// TestCapacityAndCheckpointBytes: a btrfs store made at the size asked
// (store_size) reports that size and the reserve asked, and a checkpoint
// of a machine that wrote 64 MiB says it may come to hold that much (read
// from the snapshot's qgroup), which admission counts; the tmpfs store
// answers with the host's memory.
func TestCapacityAndCheckpointBytes(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresCommand(t, "mkfs.btrfs")
	b, err := New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t),
		Options: map[string]string{"store": StoreBtrfs, "store_size": "1GiB"}, DiskReserve: hypervisor.Reserve{Bytes: 100 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := b.Capacity()
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := hypervisor.HostMemoryMB()
	if c.DiskBytes != 1<<30 || c.DiskReserveBytes != 100<<20 || c.MemoryMB != mem || c.CPUs != hypervisor.HostCPUs() ||
		c.DefaultDiskMB != DefaultDiskMB || c.DefaultMemoryMB != DefaultMemoryMB || c.DefaultCPUs != DefaultCPUs {
		t.Errorf("capacity %+v: want a 1 GiB store keeping 100 MiB, the host's memory and CPUs, procbox's defaults", c)
	}
	ctx := context.Background()
	m, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini", DiskMB: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx)
	mustRun(t, clientFor(m), "dd if=/dev/urandom of=/tmp/data bs=1M count=64 2>/dev/null && sync")
	snap, err := m.Checkpoint(ctx, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Bytes < 64<<20 || snap.Bytes > 80<<20 {
		t.Errorf("a checkpoint after 64 MiB written says it holds %d bytes", snap.Bytes)
	}

	tb, err := New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t),
		Options: map[string]string{"store": StoreTmpfs}})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	tc, err := tb.Capacity()
	if err != nil {
		t.Fatal(err)
	}
	if tc.DiskBytes != mem<<20 || tc.DiskReserveBytes != (hypervisor.Reserve{}).Of(mem<<20) {
		t.Errorf("tmpfs capacity %+v: want the host's memory (%d MiB) and the default reserve", tc, mem)
	}
	for _, bad := range []string{"1MiB", "lots", "2PiB"} {
		if _, err := New(hypervisor.Config{StateDir: t.TempDir(), Options: map[string]string{"store_size": bad}}); err == nil {
			t.Errorf("store_size %q accepted", bad)
		}
	}
}
