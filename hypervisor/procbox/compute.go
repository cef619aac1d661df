package procbox

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"paddock.dev/paddock/hypervisor"
)

var (
	_ hypervisor.CPUMeter       = (*Machine)(nil)
	_ hypervisor.CommandStopper = (*Machine)(nil)
	_ hypervisor.OOMCounter     = (*Machine)(nil)
)

// OOMKills implements hypervisor.OOMCounter: the oom_kill count of the
// machine's memory cgroup (memory.events on v2, memory.oom_control on
// v1), for its current boot.
func (m *Machine) OOMKills() (int64, error) {
	m.mu.Lock()
	lim := m.lim
	m.mu.Unlock()
	if lim == nil {
		return 0, fmt.Errorf("%w: %s", hypervisor.ErrStopped, m.spec.ID)
	}
	return lim.oomKills()
}

// CPUTime implements hypervisor.CPUMeter: the CPU time of the machine's
// cgroup (cpuacct.usage on v1, cpu.stat usage_usec on v2), plus that of
// its earlier boots, which halt keeps and the state file carries to an
// adopting process.
func (m *Machine) CPUTime() (time.Duration, error) {
	m.mu.Lock()
	lim, before := m.lim, m.cpuBefore
	m.mu.Unlock()
	if lim == nil {
		return before, nil
	}
	d, err := lim.cpuUsage()
	if err != nil {
		return 0, fmt.Errorf("cpu time of machine %s: %w", m.spec.ID, err)
	}
	return before + d, nil
}

// StopCommands implements hypervisor.CommandStopper. Commands never run
// as root (uid and gid 0 are refused, and nothing in the sandbox can
// gain them back), while the init and the guest agent do: so every task
// of the cgroup with a non-zero real, effective, saved or file-system
// uid is a command or something one left behind, whatever session or
// process group it moved to. The cgroup is frozen while they are listed
// and killed, so none can fork past the sweep.
func (m *Machine) StopCommands(ctx context.Context) (int, error) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	lim, stopped := m.lim, m.stopped
	m.mu.Unlock()
	if stopped || lim == nil {
		return 0, fmt.Errorf("%w: %s", hypervisor.ErrStopped, m.spec.ID)
	}
	killed := 0
	for range 5 {
		if err := lim.freeze(freezeTimeout); err != nil {
			return killed, fmt.Errorf("freeze: %w", err)
		}
		ps, err := lim.procs()
		n := 0
		for _, pid := range ps {
			if pid > 1 && notRoot(pid) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
			}
		}
		if terr := lim.thaw(); terr != nil && err == nil {
			err = fmt.Errorf("thaw: %w", terr)
		}
		if err != nil {
			return killed + n, err
		}
		killed += n
		if n == 0 {
			return killed, nil
		}
		// The killed tasks die once thawed; look again.
		select {
		case <-ctx.Done():
			return killed, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return killed, nil
}

// notRoot reports whether any of pid's uids is not 0 (false when the
// task is gone or a zombie waiting to be reaped).
func notRoot(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "State:"); ok && strings.HasPrefix(strings.TrimSpace(v), "Z") {
			return false
		}
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			for _, f := range strings.Fields(v) {
				if f != "0" {
					return true
				}
			}
			return false
		}
	}
	return false
}
