package budgets

// The compute watcher. A command that leaves a process behind ends at
// once, so what that process burns afterwards is charged only as CPU
// time (the core's compute.go). For sessions with max_compute_seconds on
// a backend that meters CPU, the watcher charges the CPU time every
// second, and when it reaches the limit it ends every command process in
// the sandbox (hypervisor.CommandStopper: whatever runs as a user other
// than root, jobs and detached processes included; the agent lives on,
// so files and the record can still be read) and ledgers
// budget.exhausted; new commands and jobs are refused by Admit. This goes
// further than the spec's "a running job is not stopped": a job that
// only waits is still never stopped, but nothing may burn CPU past the
// budget.
//
// A session is watched from its first admitted command, or from the
// daemon's start for those it found running (Running); the watcher runs
// while any session is watched and stops with the Manager.

import (
	"context"
	"maps"
	"sync"
	"time"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor"
)

// computeWatchEvery is how often the watcher charges CPU time.
const computeWatchEvery = time.Second

// computeWatch is the set of sessions whose CPU time the watcher keeps
// charged: those with max_compute_seconds on a metered backend.
type computeWatch struct {
	mu      sync.Mutex
	limits  map[string]int64 // session → max_compute_seconds in ms
	last    map[string]int64 // session → the reading the watcher last charged, ms
	running bool
}

// Running is told of a session with a budget that runs on this daemon
// when the daemon starts (one it adopted: its background processes may
// still run), so its compute is watched before its next command.
func (v *Service) Running(_ context.Context, s *session.Session) { v.watch(s) }

// watch has the watcher keep s's CPU time charged, when its budget has
// max_compute_seconds.
func (v *Service) watch(s *session.Session) {
	if s.Budget == nil || s.Budget.MaxComputeSeconds == nil {
		return
	}
	w := &v.compute
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.limits == nil {
		w.limits, w.last = map[string]int64{}, map[string]int64{}
	}
	w.limits[s.ID] = *s.Budget.MaxComputeSeconds * 1000
	if !w.running {
		w.running = true
		go v.runComputeWatch()
	}
}

func (v *Service) runComputeWatch() {
	t := time.NewTicker(computeWatchEvery)
	defer t.Stop()
	ctx := auth.WithoutIdentity(context.Background())
	for range t.C {
		w := &v.compute
		w.mu.Lock()
		if v.m.Stopped() {
			w.running, w.limits, w.last = false, nil, nil
			w.mu.Unlock()
			return
		}
		limits := maps.Clone(w.limits)
		w.mu.Unlock()
		for id, limit := range limits {
			v.checkCompute(ctx, id, limit)
		}
	}
}

// checkCompute charges one watched session and ends its commands when
// its CPU time reached the limit.
func (v *Service) checkCompute(ctx context.Context, id string, limitMS int64) {
	w := &v.compute
	mc := v.m.Machine(id)
	meter, isMeter := mc.(hypervisor.CPUMeter)
	if mc == nil || !isMeter {
		// Gone (deleted, expired, lost) or not metered: nothing to watch.
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
	w.mu.Lock()
	last, seen := w.last[id]
	w.mu.Unlock()
	if seen && d.Milliseconds()-last < 100 {
		return
	}
	cpu, ok := v.m.ChargeCPU(ctx, id)
	if !ok {
		return
	}
	w.mu.Lock()
	if w.last != nil {
		w.last[id] = d.Milliseconds()
	}
	w.mu.Unlock()
	if cpu < limitMS {
		return
	}
	stopper, ok := mc.(hypervisor.CommandStopper)
	if !ok {
		return
	}
	n, err := stopper.StopCommands(ctx)
	if err != nil {
		v.m.Logger().Warn("end the commands of a session past its compute budget", "session", id, "err", err)
	}
	if n > 0 {
		v.m.LedgerAppend(ctx, id, "budget.exhausted", map[string]any{"budget": "max_compute_seconds", "limit": limitMS / 1000,
			"cpu_ms": cpu, "processes_killed": n, "reason": "the sandbox's CPU time reached the compute budget, so its commands were ended"})
	}
}
