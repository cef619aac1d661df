package hypervisor

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Capacity is what a backend's machines share on this host, for the
// admission control above the backend (hostd/session): the disk their
// writable layers and checkpoints are written to, and the host's memory
// and CPUs. A MachineSpec's DiskMB is a limit, not space set aside, so a
// backend can be asked for more disk than it has; whoever admits machines
// keeps the sum of their DiskMB within DiskBytes less DiskReserveBytes.
type Capacity struct {
	// DiskBytes is the size of what the machines' disks are written to:
	// procbox's btrfs layer store (its image, or less when the host's
	// file system cannot back the rest of it), its tmpfs store (the
	// host's memory), or for qemu the free space of the state
	// directory's file system plus what the backend's disk files take
	// there already.
	DiskBytes int64 `json:"disk_bytes"`
	// DiskReserveBytes of DiskBytes are kept for the daemon's own writes
	// (snapshot metadata, the file system's bookkeeping) and never
	// promised to a machine.
	DiskReserveBytes int64 `json:"disk_reserve_bytes"`
	// Disk says in words what DiskBytes measures, for messages.
	Disk string `json:"disk"`
	// MemoryMB (MemTotal) and CPUs are the host's.
	MemoryMB int64 `json:"memory_mb"`
	CPUs     int   `json:"cpus"`
	// The defaults a MachineSpec that leaves a size at zero gets.
	DefaultDiskMB   int64   `json:"default_disk_mb"`
	DefaultMemoryMB int64   `json:"default_memory_mb"`
	DefaultCPUs     float64 `json:"default_cpus"`
}

// CapacityReporter is a backend that can say what its machines share.
// Capacity may open the backend's store (it does what a first Create
// would); DiskBytes can change between calls as the host's disk fills.
type CapacityReporter interface {
	Capacity() (Capacity, error)
}

// Default disk reserve: DefaultReservePercent of the disk, at least
// DefaultReserveBytes, never more than half of it.
const (
	DefaultReservePercent = 5
	DefaultReserveBytes   = 512 << 20
)

// Reserve is how much of a backend's disk is kept for the daemon's own
// writes: Percent of it, or Bytes. The zero Reserve is the default.
type Reserve struct {
	Percent float64
	Bytes   int64
}

// Of is the reserve on a disk of total bytes.
func (r Reserve) Of(total int64) int64 {
	switch {
	case r.Bytes > 0:
		return min(r.Bytes, total)
	case r.Percent > 0:
		return int64(float64(total) * r.Percent / 100)
	}
	return min(max(total*DefaultReservePercent/100, DefaultReserveBytes), total/2)
}

func (r Reserve) String() string {
	switch {
	case r.Bytes > 0:
		return FormatBytes(r.Bytes)
	case r.Percent > 0:
		return strconv.FormatFloat(r.Percent, 'f', -1, 64) + "%"
	}
	return fmt.Sprintf("%d%% (at least %s, at most half)", DefaultReservePercent, FormatBytes(DefaultReserveBytes))
}

// ParseReserve reads a reserve: "" (the default), a percentage ("5%",
// from 0 to 50) or a size (see ParseSize).
func ParseReserve(s string) (Reserve, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Reserve{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) || f <= 0 || f > 50 {
			return Reserve{}, fmt.Errorf("reserve %q: a percentage above 0 and at most 50", s)
		}
		return Reserve{Percent: f}, nil
	}
	n, err := ParseSize(s)
	if err != nil {
		return Reserve{}, fmt.Errorf("reserve %q: a percentage (5%%) or a size (512MiB, 2GiB): %v", s, err)
	}
	if n <= 0 {
		return Reserve{}, fmt.Errorf("reserve %q: must be more than 0", s)
	}
	return Reserve{Bytes: n}, nil
}

// MaxSizeBytes bounds ParseSize: 1 PiB.
const MaxSizeBytes = 1 << 50

// ParseSize reads a size: a number of MiB ("512"), or a number with a
// unit, KiB, MiB, GiB or TiB (K, M, G, T and KB, MB, GB, TB mean the same:
// powers of 1024), up to MaxSizeBytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, "MiB"
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0, fmt.Errorf("size %q: want a number and a unit such as 512MiB or 2GiB", s)
	}
	var mult float64
	switch strings.ToLower(unit) {
	case "b":
		mult = 1
	case "k", "kb", "kib":
		mult = 1 << 10
	case "m", "mb", "mib":
		mult = 1 << 20
	case "g", "gb", "gib":
		mult = 1 << 30
	case "t", "tb", "tib":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB, GiB or TiB)", s, unit)
	}
	if f*mult > MaxSizeBytes {
		return 0, fmt.Errorf("size %q: at most 1 PiB", s)
	}
	return int64(f * mult), nil
}

// FormatBytes writes n in the largest binary unit that keeps it at least 1
// ("1.5 GiB").
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f, i := float64(n), 0
	for math.Abs(f) >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) + " " + units[i]
}

// HostMemoryMB is the host's MemTotal in MiB.
func HostMemoryMB() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo: MemTotal %q: %v", rest, err)
		}
		return kb >> 10, nil
	}
	return 0, errors.New("/proc/meminfo has no MemTotal")
}

// HostCPUs is how many CPUs this process may run on.
func HostCPUs() int { return runtime.NumCPU() }

// HostCapacity fills c's MemoryMB and CPUs from the host and its
// defaults from l.
func HostCapacity(c Capacity, l Limits) (Capacity, error) {
	mem, err := HostMemoryMB()
	if err != nil {
		return c, err
	}
	c.MemoryMB, c.CPUs = mem, HostCPUs()
	c.DefaultDiskMB, c.DefaultMemoryMB, c.DefaultCPUs = l.DiskMB, l.MemoryMB, l.CPUs
	return c, nil
}
