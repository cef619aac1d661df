package qemu

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"paddock.dev/paddock/hypervisor"
)

func init() { hypervisor.RegisterHostScan(Name, HostScan) }

// runDirRE is a machine's run directory as the backend names it:
// <state>/qemu/run/<16 hex of sha256(id)>.
var runDirRE = regexp.MustCompile(`^(/.+)/` + Name + `/run/([0-9a-f]{16})$`)

// HostScan implements hypervisor.HostScan: every QEMU process whose QMP
// socket is in a machine's run directory (-qmp unix:<state>/qemu/run/
// <hash>/qmp.sock) is a machine of the state dir that path names; its id
// is in its disk's name (-drive …file=<state>/qemu/disks/<id>-<rand>.qcow2),
// checked against the hash. QEMU processes started otherwise (a test's
// own, the KVM probe's) are not machines and are not listed.
func HostScan() ([]hypervisor.HostSandbox, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []hypervisor.HostSandbox
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(argv[0]), "qemu-system") {
			continue
		}
		h, ok := machineOf(argv)
		if !ok {
			continue
		}
		h.PIDs = []int{pid}
		h.Started = hypervisor.ProcStarted(pid)
		start, _ := hypervisor.ProcStartTime(pid)
		h.Stop = func() error { return killVM(pid, start) }
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// machineOf reads a machine's state dir and id from a QEMU command line.
func machineOf(argv []string) (hypervisor.HostSandbox, bool) {
	var run, disk string
	for i := 1; i+1 < len(argv); i++ {
		switch argv[i] {
		case "-qmp":
			if v, ok := strings.CutPrefix(argv[i+1], "unix:"); ok {
				path, _, _ := strings.Cut(v, ",")
				if filepath.Base(path) == "qmp.sock" {
					run = filepath.Dir(path)
				}
			}
		case "-drive":
			for _, opt := range strings.Split(argv[i+1], ",") {
				if v, ok := strings.CutPrefix(opt, "file="); ok && disk == "" {
					disk = v
				}
			}
		}
	}
	m := runDirRE.FindStringSubmatch(run)
	if m == nil {
		return hypervisor.HostSandbox{}, false
	}
	state, hash := m[1], m[2]
	h := hypervisor.HostSandbox{Backend: Name, StateDir: state, ID: "run-" + hash}
	if filepath.Dir(disk) == filepath.Join(state, Name, "disks") {
		name := strings.TrimSuffix(filepath.Base(disk), ".qcow2")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			id := name[:i]
			if sum := sha256.Sum256([]byte(id)); hex.EncodeToString(sum[:8]) == hash {
				h.ID = id
			}
		}
	}
	h.Record = dirExists(run)
	if !strings.HasPrefix(h.ID, "run-") {
		_, err := os.Stat(filepath.Join(state, Name, "machines", h.ID+".json"))
		h.Adoptable = err == nil
	}
	return h, true
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// killVM ends QEMU process pid (its process group, which QEMU leads) if
// it is still the process that started at start, and waits for it to go.
func killVM(pid int, start uint64) error {
	if t, err := hypervisor.ProcStartTime(pid); err != nil || t != start {
		return nil // gone already (or the pid is another process's now)
	}
	target := pid
	if pg, err := syscall.Getpgid(pid); err == nil && pg == pid {
		target = -pid
	}
	if err := syscall.Kill(target, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill qemu %d: %w", pid, err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if t, err := hypervisor.ProcStartTime(pid); err != nil || t != start {
			return nil
		}
	}
	return fmt.Errorf("qemu %d still runs 5 s after SIGKILL", pid)
}
