package hypervisor

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A daemon stopped without --stop-sandboxes leaves its sandboxes running
// for the next start on its state dir. Someone who then removes the state
// dir leaves them with nothing that records them. A host scan finds every
// sandbox from what it leaves in the kernel (procbox's cgroups and the
// descriptors of the processes in them, QEMU's command lines) and tells
// which state dir each belongs to, so the ones whose state dir is gone
// can be stopped (`paddock sandbox orphans`).

// HostSandbox is one sandbox a host scan found.
type HostSandbox struct {
	Backend string `json:"backend"`
	ID      string `json:"id"`
	// StateDir is the state dir the sandbox belongs to, as its
	// processes name it; "" when nothing does (an empty cgroup).
	StateDir string `json:"state_dir"`
	PIDs     []int  `json:"pids"`
	// Started is when the sandbox's first process (or its cgroup)
	// started; zero when unknown.
	Started time.Time `json:"started,omitzero"`

	// Record: the state dir still holds the machine's own directory
	// (procbox machines/<id>, qemu run/<hash>).
	Record bool `json:"-"`
	// Owned: a process holds the machine's owner lock (procbox).
	Owned bool `json:"-"`
	// Adoptable: the machine was left for the next daemon to adopt.
	Adoptable bool `json:"-"`
	// Stop ends the sandbox's processes and removes what the kernel
	// holds for it (a cgroup); files under a state dir are not touched.
	Stop func() error `json:"-"`
}

// HostScan finds the sandboxes of one backend on this host.
type HostScan func() ([]HostSandbox, error)

var (
	scansMu sync.Mutex
	scans   = map[string]HostScan{}
)

// RegisterHostScan registers backend's host scan; backends call it from
// init, beside Register.
func RegisterHostScan(backend string, scan HostScan) {
	scansMu.Lock()
	defer scansMu.Unlock()
	scans[backend] = scan
}

// ScanHost runs every backend's host scan and returns what they found,
// by backend and id. A scan that fails is reported in the error; the
// others' results are still returned.
func ScanHost() ([]HostSandbox, error) {
	scansMu.Lock()
	names := make([]string, 0, len(scans))
	for n := range scans {
		names = append(names, n)
	}
	scansMu.Unlock()
	sort.Strings(names)
	var out []HostSandbox
	var errs []error
	for _, n := range names {
		scansMu.Lock()
		scan := scans[n]
		scansMu.Unlock()
		found, err := scan()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
		}
		out = append(out, found...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Backend != out[j].Backend {
			return out[i].Backend < out[j].Backend
		}
		return out[i].ID < out[j].ID
	})
	return out, errors.Join(errs...)
}

// ProcStarted returns when process pid started, from its start time in
// clock ticks after boot and the boot time; zero when unknown.
func ProcStarted(pid int) time.Time {
	ticks, err := ProcStartTime(pid)
	if err != nil {
		return time.Time{}
	}
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			btime, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}
			}
			// The kernel counts start times in USER_HZ, 100 on Linux.
			return time.Unix(btime, 0).Add(time.Duration(ticks) * (time.Second / 100))
		}
	}
	return time.Time{}
}

// SocketPaths maps the inode of every bound unix socket in this network
// namespace to its path (/proc/net/unix). A socket keeps the path it was
// bound to after the file is removed.
func SocketPaths() map[uint64]string {
	out := map[uint64]string{}
	raw, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		// Num RefCount Protocol Flags Type St Inode Path
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		ino, err := strconv.ParseUint(f[6], 10, 64)
		if err == nil {
			out[ino] = f[7]
		}
	}
	return out
}

// ProcSockets returns the inodes of the sockets process pid holds open.
func ProcSockets(pid int) []uint64 {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []uint64
	for _, e := range ents {
		l, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		if v, ok := strings.CutPrefix(l, "socket:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 64); err == nil {
				out = append(out, ino)
			}
		}
	}
	return out
}
