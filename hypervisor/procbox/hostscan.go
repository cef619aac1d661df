package procbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"paddock.dev/paddock/hypervisor"
)

func init() { hypervisor.RegisterHostScan(Name, HostScan) }

// HostScan implements hypervisor.HostScan: every sandbox cgroup under
// /paddock in any hierarchy is a machine (the cgroup's name is its id).
// Its state dir is told by the agent's listening socket, which its
// processes hold: <state>/procbox/run/<16 hex of sha256(id)>.sock (the
// socket keeps that name after its file is gone); failing that, by the
// root overlay's upper layer in the init's mounts
// (<state>/procbox/store/machines/<id>/upper).
func HostScan() ([]hypervisor.HostSandbox, error) {
	ids := map[string]time.Time{}
	for _, pattern := range []string{"/sys/fs/cgroup/*" + cgroupParent + "/*", "/sys/fs/cgroup" + cgroupParent + "/*"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			fi, err := os.Stat(m)
			if err != nil || !fi.IsDir() || !idRE.MatchString(filepath.Base(m)) {
				continue
			}
			id := filepath.Base(m)
			if t, ok := ids[id]; !ok || fi.ModTime().Before(t) {
				ids[id] = fi.ModTime()
			}
		}
	}
	socks := hypervisor.SocketPaths()
	var out []hypervisor.HostSandbox
	for id, made := range ids {
		h := hypervisor.HostSandbox{Backend: Name, ID: id, PIDs: cgroupPIDs(id), Started: made}
		if len(h.PIDs) > 0 {
			h.Started = time.Time{}
			for _, pid := range h.PIDs {
				if t := hypervisor.ProcStarted(pid); !t.IsZero() && (h.Started.IsZero() || t.Before(h.Started)) {
					h.Started = t
				}
			}
			h.StateDir = stateDirOf(id, h.PIDs, socks)
		}
		if h.StateDir != "" {
			dir := filepath.Join(h.StateDir, Name, "machines", id)
			h.Record = fileExists(dir)
			h.Owned = hypervisor.LockHeld(filepath.Join(dir, "owner.lock"))
			var st machineState
			if raw, err := os.ReadFile(filepath.Join(dir, stateFile)); err == nil && json.Unmarshal(raw, &st) == nil {
				h.Adoptable = st.Adoptable
			}
		}
		h.Stop = func() error { return killCgroups(id) }
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// cgroupPIDs lists the processes in machine id's cgroups, in pid order.
func cgroupPIDs(id string) []int {
	files, _ := filepath.Glob("/sys/fs/cgroup/*" + cgroupParent + "/" + id + "/cgroup.procs")
	files = append(files, "/sys/fs/cgroup"+cgroupParent+"/"+id+"/cgroup.procs")
	seen := map[int]bool{}
	var out []int
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(raw)) {
			if pid := atoiOr(s, 0); pid > 0 && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	sort.Ints(out)
	return out
}

// stateDirOf finds the state dir of machine id from its processes: the
// agent socket's bound path, else the root overlay's upper directory.
func stateDirOf(id string, pids []int, socks map[uint64]string) string {
	sum := sha256.Sum256([]byte(id))
	sock := hex.EncodeToString(sum[:8]) + ".sock"
	for _, pid := range pids {
		for _, ino := range hypervisor.ProcSockets(pid) {
			p := socks[ino]
			run := filepath.Dir(p)
			if filepath.Base(p) == sock && filepath.Base(run) == "run" && filepath.Base(filepath.Dir(run)) == Name {
				return filepath.Dir(filepath.Dir(run))
			}
		}
	}
	suffix := "/" + Name + "/store/machines/" + id + "/upper"
	for _, pid := range pids {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 || f[4] != "/" {
				continue
			}
			for _, opt := range strings.Split(f[len(f)-1], ",") {
				if up, ok := strings.CutPrefix(opt, "upperdir="); ok {
					if dir, ok := strings.CutSuffix(up, suffix); ok && dir != "" {
						return dir
					}
				}
			}
		}
	}
	return ""
}
