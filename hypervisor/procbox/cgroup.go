package procbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// cgroupParent is where every sandbox's cgroup lives, on both versions.
const cgroupParent = "/paddock"

// limits is a sandbox's cgroup, version-independent.
type limits interface {
	addProc(pid int) error
	// freeze stops every task in the cgroup, or fails (and thaws) at the
	// deadline: a task stuck in the kernel must not hang a checkpoint.
	freeze(timeout time.Duration) error
	thaw() error
	procs() ([]int, error)
	// killAll SIGKILLs everything in the cgroup and waits for it to empty.
	killAll() error
	// cpuUsage is the CPU time the cgroup's tasks have used.
	cpuUsage() (time.Duration, error)
	// oomKills is how many tasks the kernel killed for want of memory
	// under the cgroup's limit.
	oomKills() (int64, error)
	delete() error
	// dirFD returns an open directory fd for CLONE_INTO_CGROUP (v2 only;
	// -1 on v1, where the pid is added after start).
	dirFD() (*os.File, error)
}

type resources struct {
	cpus     float64
	memoryMB int64
	pids     int64
}

// cgroupMode says which hierarchy this host runs, for Capabilities and
// for tests.
func cgroupMode() string {
	switch cgroups.Mode() {
	case cgroups.Unified:
		return "v2"
	case cgroups.Legacy:
		return "v1"
	case cgroups.Hybrid:
		return "hybrid"
	}
	return "unavailable"
}

func newLimits(id string, r resources) (limits, error) {
	group := cgroupParent + "/" + id
	switch cgroups.Mode() {
	case cgroups.Unified:
		res := &cgroup2.Resources{}
		if r.cpus > 0 {
			quota := int64(r.cpus * 100000)
			period := uint64(100000)
			res.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)}
		}
		if r.memoryMB > 0 {
			// memory.swap.max is left alone: it exists only where swap
			// accounting is on, and writing it elsewhere fails the create.
			b := r.memoryMB << 20
			res.Memory = &cgroup2.Memory{Max: &b}
		}
		if r.pids > 0 {
			res.Pids = &cgroup2.Pids{Max: r.pids}
		}
		m, err := cgroup2.NewManager("/sys/fs/cgroup", group, res)
		if err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", group, err)
		}
		return &v2{m: m, path: filepath.Join("/sys/fs/cgroup", group)}, nil
	case cgroups.Legacy, cgroups.Hybrid:
		res := &specs.LinuxResources{}
		if r.cpus > 0 {
			quota := int64(r.cpus * 100000)
			period := uint64(100000)
			res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
		}
		if r.memoryMB > 0 {
			b := r.memoryMB << 20
			res.Memory = &specs.LinuxMemory{Limit: &b}
		}
		if r.pids > 0 {
			lim := r.pids
			res.Pids = &specs.LinuxPids{Limit: &lim}
		}
		c, err := cgroup1.New(cgroup1.StaticPath(group), res, cgroup1.WithHierarchy(v1Hierarchy))
		if err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", group, err)
		}
		return &v1{c: c, group: group}, nil
	}
	return nil, errors.New("no cgroup hierarchy is mounted at /sys/fs/cgroup")
}

// loadLimits opens the existing cgroup of machine id (made by newLimits in
// this or an earlier process).
func loadLimits(id string) (limits, error) {
	group := cgroupParent + "/" + id
	switch cgroups.Mode() {
	case cgroups.Unified:
		path := filepath.Join("/sys/fs/cgroup", group)
		if !fileExists(path) {
			return nil, fmt.Errorf("cgroup %s: %w", group, os.ErrNotExist)
		}
		m, err := cgroup2.Load(group)
		if err != nil {
			return nil, fmt.Errorf("load cgroup %s: %w", group, err)
		}
		return &v2{m: m, path: path}, nil
	case cgroups.Legacy, cgroups.Hybrid:
		c, err := cgroup1.Load(cgroup1.StaticPath(group), cgroup1.WithHierarchy(v1Hierarchy))
		if err != nil {
			return nil, fmt.Errorf("load cgroup %s: %w", group, err)
		}
		return &v1{c: c, group: group}, nil
	}
	return nil, errors.New("no cgroup hierarchy is mounted at /sys/fs/cgroup")
}

// v1Hierarchy is the controllers a sandbox uses on cgroup v1; the others
// (net_cls, perf_event, the named systemd hierarchy…) are left alone.
func v1Hierarchy() ([]cgroup1.Subsystem, error) {
	all, err := cgroup1.Default()
	if err != nil {
		return nil, err
	}
	want := map[cgroup1.Name]bool{cgroup1.Cpu: true, cgroup1.Cpuacct: true, cgroup1.Memory: true, cgroup1.Pids: true, cgroup1.Freezer: true}
	var out []cgroup1.Subsystem
	for _, s := range all {
		if want[s.Name()] {
			out = append(out, s)
		}
	}
	return out, nil
}

type v1 struct {
	c     cgroup1.Cgroup
	group string
}

func (c *v1) addProc(pid int) error { return c.c.AddProc(uint64(pid)) }
func (c *v1) freeze(timeout time.Duration) error {
	dir := filepath.Join("/sys/fs/cgroup/freezer", c.group)
	return freezeFile(filepath.Join(dir, "freezer.state"), "FROZEN", filepath.Join(dir, "freezer.state"), "FROZEN", timeout, c.thaw)
}
func (c *v1) thaw() error { return c.c.Thaw() }
func (c *v1) dirFD() (*os.File, error) {
	return nil, nil
}
func (c *v1) procs() ([]int, error) {
	ps, err := c.c.Processes(cgroup1.Pids, true)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Pid)
	}
	return out, nil
}
func (c *v1) cpuUsage() (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", c.group, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpuacct.usage: %w", err)
	}
	return time.Duration(ns), nil
}
func (c *v1) oomKills() (int64, error) {
	return readCounter(filepath.Join("/sys/fs/cgroup/memory", c.group, "memory.oom_control"), "oom_kill")
}
func (c *v1) killAll() error {
	// A frozen task cannot die: thaw first, then kill until empty.
	c.c.Thaw()
	return killLoop(c.procs)
}
func (c *v1) delete() error {
	if err := c.killAll(); err != nil {
		return err
	}
	return c.c.Delete()
}

type v2 struct {
	m    *cgroup2.Manager
	path string
}

func (c *v2) addProc(pid int) error { return c.m.AddProc(uint64(pid)) }
func (c *v2) freeze(timeout time.Duration) error {
	return freezeFile(filepath.Join(c.path, "cgroup.freeze"), "1", filepath.Join(c.path, "cgroup.events"), "frozen 1", timeout, c.thaw)
}
func (c *v2) thaw() error { return c.m.Thaw() }
func (c *v2) dirFD() (*os.File, error) {
	return os.Open(c.path)
}
func (c *v2) procs() ([]int, error) {
	ps, err := c.m.Procs(true)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(ps))
	for _, p := range ps {
		out = append(out, int(p))
	}
	return out, nil
}
func (c *v2) cpuUsage() (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(c.path, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cpu.stat: %w", err)
			}
			return time.Duration(us) * time.Microsecond, nil
		}
	}
	return 0, errors.New("cpu.stat has no usage_usec")
}
func (c *v2) oomKills() (int64, error) {
	return readCounter(filepath.Join(c.path, "memory.events"), "oom_kill")
}

// readCounter reads the value of a "name value" line of a cgroup file.
func readCounter(path, name string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s line", path, name)
}
func (c *v2) killAll() error {
	c.m.Thaw()
	if err := c.m.Kill(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return killLoop(c.procs)
}
func (c *v2) delete() error {
	if err := c.killAll(); err != nil {
		return err
	}
	return c.m.Delete()
}

func killLoop(procs func() ([]int, error)) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps, err := procs()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if len(ps) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup still has %d processes after SIGKILL", len(ps))
		}
		for _, p := range ps {
			if p > 1 { // never 0 (our own process group) or init
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cgroupExists reports whether a sandbox cgroup directory is still present
// in any hierarchy (used by leak checks).
func cgroupExists(id string) bool {
	matches, _ := filepath.Glob("/sys/fs/cgroup/*" + cgroupParent + "/" + id)
	if len(matches) > 0 {
		return true
	}
	_, err := os.Stat("/sys/fs/cgroup" + cgroupParent + "/" + id)
	return err == nil
}

// LeftoverCgroups lists sandbox cgroups under the paddock parent in every
// hierarchy, as "controller/id" strings.
func LeftoverCgroups() []string {
	var out []string
	for _, pattern := range []string{"/sys/fs/cgroup/*" + cgroupParent + "/*", "/sys/fs/cgroup" + cgroupParent + "/*"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() {
				out = append(out, strings.TrimPrefix(m, "/sys/fs/cgroup/"))
			}
		}
	}
	return out
}

func atoiOr(s string, d int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return d
}

// freezeFile writes value to ctl and polls state until it contains want,
// thawing and failing at the deadline.
func freezeFile(ctl, value, state, want string, timeout time.Duration, thaw func() error) error {
	if err := os.WriteFile(ctl, []byte(value), 0); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for delay := 100 * time.Microsecond; ; delay = min(delay*2, 10*time.Millisecond) {
		b, err := os.ReadFile(state)
		if err != nil {
			thaw()
			return err
		}
		if strings.Contains(string(b), want) {
			return nil
		}
		if time.Now().After(deadline) {
			thaw()
			return fmt.Errorf("the cgroup did not freeze within %s (a task may be stuck in the kernel)", timeout)
		}
		time.Sleep(delay)
	}
}

// killCgroups empties and removes a sandbox's cgroup in every hierarchy
// without knowing how it was made (used to sweep leftovers).
func killCgroups(id string) error {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + cgroupParent + "/" + id)
	if d := "/sys/fs/cgroup" + cgroupParent + "/" + id; fileExists(d) {
		dirs = append(dirs, d)
	}
	// Thaw first: a frozen task cannot die.
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "freezer.state")) {
			os.WriteFile(filepath.Join(d, "freezer.state"), []byte("THAWED"), 0)
		}
		if fileExists(filepath.Join(d, "cgroup.freeze")) {
			os.WriteFile(filepath.Join(d, "cgroup.freeze"), []byte("0"), 0)
		}
	}
	var errs []error
	for _, d := range dirs {
		procs := func() ([]int, error) {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				return nil, err
			}
			var out []int
			for _, f := range strings.Fields(string(b)) {
				if pid := atoiOr(f, 0); pid > 0 {
					out = append(out, pid)
				}
			}
			return out, nil
		}
		if err := killLoop(procs); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
