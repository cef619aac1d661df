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
// The CPU time is charged when a command or job is admitted, when the
// session is read, and, for sessions with max_compute_seconds, every
// second by a watcher. When the watcher finds the CPU time at the limit
// it ends every command process in the sandbox
// (hypervisor.CommandStopper: whatever runs as a user other than root,
// jobs and detached processes included; the agent lives on, so files
// and the record can still be read) and ledgers budget.exhausted; new
// commands and jobs are refused by admit. This goes further than the
// spec's "a running job is not stopped": a job that only waits is
// still never stopped, but nothing may burn CPU past the budget.

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hypervisor"
)

// computeWatchEvery is how often the watcher charges CPU time.
const computeWatchEvery = time.Second

// computeWatch is the set of sessions whose CPU time the watcher keeps
// charged: those with max_compute_seconds on a metered backend.
type computeWatch struct {
	mu      sync.Mutex
	limits  map[string]int64 // session → max_compute_seconds in ms
	last    map[string]int64 // session → the reading last charged, ms
	running bool
}

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
	w := &m.compute
	w.mu.Lock()
	if w.last != nil {
		w.last[id] = d.Milliseconds()
	}
	w.mu.Unlock()
	return cpu, true
}

// watchCompute has the watcher keep s's CPU time charged, when its
// budget has max_compute_seconds.
func (m *Manager) watchCompute(s *Session) {
	if s.Budget == nil || s.Budget.MaxComputeSeconds == nil {
		return
	}
	w := &m.compute
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.limits == nil {
		w.limits, w.last = map[string]int64{}, map[string]int64{}
	}
	w.limits[s.ID] = *s.Budget.MaxComputeSeconds * 1000
	if !w.running {
		w.running = true
		go m.runComputeWatch()
	}
}

// watchBudgetedSessions registers every running session with a compute
// budget (at start, for the sandboxes a daemon adopted: their background
// processes may still run).
func (m *Manager) watchBudgetedSessions(ctx context.Context) {
	rows, err := m.st.ListSessions(ctx, "")
	if err != nil {
		m.log.Warn("list sessions to watch their compute", "err", err)
		return
	}
	for _, r := range rows {
		if r.State != StateRunning {
			continue
		}
		var st stored
		if json.Unmarshal(r.Record, &st) == nil && st.Session != nil {
			st.Session.ID = r.ID
			m.watchCompute(st.Session)
		}
	}
}

func (m *Manager) runComputeWatch() {
	t := time.NewTicker(computeWatchEvery)
	defer t.Stop()
	ctx := auth.WithoutIdentity(context.Background())
	for range t.C {
		m.mu.Lock()
		done := m.done
		m.mu.Unlock()
		w := &m.compute
		w.mu.Lock()
		if done {
			w.running, w.limits, w.last = false, nil, nil
			w.mu.Unlock()
			return
		}
		limits := make(map[string]int64, len(w.limits))
		for id, l := range w.limits {
			limits[id] = l
		}
		w.mu.Unlock()
		for id, limit := range limits {
			m.checkCompute(ctx, id, limit)
		}
	}
}

// checkCompute charges one watched session and ends its commands when
// its CPU time reached the limit.
func (m *Manager) checkCompute(ctx context.Context, id string, limitMS int64) {
	m.mu.Lock()
	mc := m.machines[id]
	m.mu.Unlock()
	meter, isMeter := mc.(hypervisor.CPUMeter)
	if mc == nil || !isMeter {
		// Gone (deleted, expired, lost) or not metered: nothing to watch.
		w := &m.compute
		w.mu.Lock()
		delete(w.limits, id)
		delete(w.last, id)
		w.mu.Unlock()
		return
	}
	d, err := meter.CPUTime()
	if err != nil {
		return
	}
	// Charged (a transaction) only when it moved by a tenth of a second,
	// so idle sandboxes cost no writes.
	w := &m.compute
	w.mu.Lock()
	last, seen := w.last[id]
	w.mu.Unlock()
	if seen && d.Milliseconds()-last < 100 {
		return
	}
	cpu, ok := m.chargeCPU(ctx, id)
	if !ok || cpu < limitMS {
		return
	}
	stopper, ok := mc.(hypervisor.CommandStopper)
	if !ok {
		return
	}
	n, err := stopper.StopCommands(ctx)
	if err != nil {
		m.log.Warn("end the commands of a session past its compute budget", "session", id, "err", err)
	}
	if n > 0 {
		m.ledgerAppend(ctx, id, "budget.exhausted", map[string]any{"budget": "max_compute_seconds", "limit": limitMS / 1000,
			"cpu_ms": cpu, "processes_killed": n, "reason": "the sandbox's CPU time reached the compute budget, so its commands were ended"})
	}
}
