package session

// Compute measured as CPU time (issue 16): a command that leaves a
// process behind (`setsid sh -c '…' &`, a daemonised server) ends at
// once, so the command's wall time charged nothing for what that process
// burns afterwards. Backends whose machines report their CPU time
// (hypervisor.CPUMeter: procbox's cgroup) have it charged to the session
// as usage.cpu_ms, and compute is the larger of the commands' wall time
// (exec_ms + job_ms, as the spec counts it) and that CPU time, so neither
// a sleeping command nor a busy background process gets past
// max_compute_seconds.
//
// The core charges the CPU time when the session is read; the budgets
// service (hostd/budgets) charges it when a command or job is admitted,
// and, for sessions with max_compute_seconds, every second with its
// watcher, which ends the sandbox's commands once the limit is reached.

import (
	"context"

	"paddock.dev/paddock/hypervisor"
)

// chargeCPU charges the session the CPU time its sandbox used since the
// last charge and returns usage.cpu_ms; ok is false when the machine
// does not report CPU time.
func (m *Manager) chargeCPU(ctx context.Context, id string) (cpuMS int64, ok bool) {
	m.mu.Lock()
	mc := m.machines[id]
	m.mu.Unlock()
	meter, isMeter := mc.(hypervisor.CPUMeter)
	if mc == nil || !isMeter {
		return 0, false
	}
	d, err := meter.CPUTime()
	if err != nil {
		m.log.Warn("read a sandbox's CPU time", "session", id, "err", err)
		return 0, false
	}
	cpu, err := m.st.ChargeCPU(ctx, id, d.Milliseconds())
	if err != nil {
		m.log.Warn("charge CPU time", "session", id, "err", err)
		return 0, false
	}
	return cpu, true
}
