// Package budgets holds a session's commands, jobs and file writes to the
// budget it was created with (api.Budget): the session core's admit step
// asks the Service through the session.Budgets interface (hostd/daemon
// sets it with Manager.SetBudgets), for sessions that have a budget only.
//
// What stays in the core is what every session has, budget or not: the
// budget's fields on the record (checked at create, a fork child's share
// of its parent's), the usage counters a command adds when it ends, the
// jobs' settlement, the CPU meter, and the children a
// fork takes (one counter statement with its limit). This package decides
// whether a start or a write may go ahead:
//
//   - Counts (max_execs, max_jobs) are taken in one SQLite statement when
//     the command or job starts (store.TakeUsage), so two requests racing
//     for the last unit cannot both get it; a start the sandbox then
//     refuses gives its unit back (Admission.Release).
//   - Time (max_exec_seconds, max_compute_seconds) is checked at the start
//     and caps a command's timeout to what is left; commands running in
//     parallel can overshoot it, and a job that only waits is never
//     stopped; the compute watcher (compute.go) ends commands that burn
//     CPU past max_compute_seconds.
//   - max_concurrent_jobs counts the jobs the guest reports running; the
//     core's gate step serialises a session's job starts while it checks.
//   - max_output_bytes is handed to the guest as the per-stream cap; it
//     cuts output, never the command.
//   - max_workspace_bytes is du -sk of the workspace, measured in the guest
//     when a command or job starts; growth during a run is not stopped.
//     A file write or upload is measured too, and refused when the
//     workspace plus what it writes would pass the limit (AdmitWrite).
package budgets

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

// Service holds the sessions of a Manager to their budgets.
type Service struct {
	m       *session.Manager
	compute computeWatch
}

// New makes the budgets service of m. hostd/daemon registers it with
// m.SetBudgets.
func New(m *session.Manager) *Service { return &Service{m: m} }

var _ session.Budgets = (*Service)(nil)

// Admit checks s's budget before a command or job starts. When the budget
// limits their number it takes the unit (execs or jobs; both for an
// exec/stream, a job that runs a command) now, so racing starts cannot
// both get the last one; otherwise the core counts it after the start
// (Admission.Taken, StreamExecTaken). A limit reached is a
// *session.BudgetError (403).
func (v *Service) Admit(ctx context.Context, s *session.Session, c *client.Client, what session.Start, timeout int) (*session.Admission, error) {
	a := &session.Admission{Timeout: timeout, Release: func() {}, StreamExec: what == session.StartStream}
	b := s.Budget
	if b == nil {
		return a, nil
	}
	if err := v.check(ctx, s, c, what, a); err != nil {
		return nil, err
	}
	st := v.m.Store()
	var gives []func()
	release := func() {
		for _, give := range gives {
			give()
		}
	}
	take := func(counter, field string, limit *int64) (bool, error) {
		if limit == nil {
			return false, nil
		}
		before, err := st.TakeUsage(ctx, s.ID, counter, 1, *limit)
		if errors.Is(err, store.ErrLimit) {
			return false, &session.BudgetError{Budget: field, Limit: *limit, Used: float64(before), What: string(what)}
		}
		if err != nil {
			return false, err
		}
		gives = append(gives, func() {
			if err := st.GiveBackUsage(context.WithoutCancel(ctx), s.ID, counter, 1); err != nil {
				v.m.Logger().Warn("give back usage", "session", s.ID, "err", err)
			}
		})
		return true, nil
	}
	var err error
	if what == session.StartExec {
		a.Taken, err = take(store.CounterExecs, "max_execs", b.MaxExecs)
	} else {
		a.Taken, err = take(store.CounterJobs, "max_jobs", b.MaxJobs)
	}
	if err != nil {
		return nil, err
	}
	if a.StreamExec {
		if a.StreamExecTaken, err = take(store.CounterExecs, "max_execs", b.MaxExecs); err != nil {
			release()
			return nil, err
		}
	}
	a.Release = release
	return a, nil
}

// check is Admit's checks of time, concurrency and workspace size, and
// the output cap it hands on.
func (v *Service) check(ctx context.Context, s *session.Session, c *client.Client, what session.Start, a *session.Admission) error {
	b := s.Budget
	isJob := what != session.StartExec
	var running []api.Job
	if b.MaxComputeSeconds != nil {
		// What background processes burnt counts too (the core's
		// compute.go), and the watcher keeps it charged from now on
		// (compute.go).
		v.m.ChargeCPU(ctx, s.ID)
		v.watch(s)
	}
	if b.MaxComputeSeconds != nil || (isJob && b.MaxConcurrentJobs != nil) {
		var err error
		if running, err = v.m.RefreshJobs(ctx, s.ID, c); err != nil {
			return err
		}
	}
	u := v.m.Usage(ctx, s.ID)
	// capTo lowers the timeout to the seconds left, rounded up (a
	// command always gets at least one second).
	capTo := func(leftMS int64) {
		secs := int((leftMS + 999) / 1000)
		if a.Timeout == 0 || secs < a.Timeout {
			a.Timeout, a.Capped = secs, true
		}
	}
	refuse := func(field string, limit int64, used float64) error {
		return &session.BudgetError{Budget: field, Limit: limit, Used: used, What: string(what)}
	}
	if p := b.MaxComputeSeconds; p != nil {
		if u.ComputeMS >= *p*1000 {
			return refuse("max_compute_seconds", *p, float64(u.ComputeMS)/1000)
		}
		if what != session.StartJob {
			capTo(*p*1000 - u.ComputeMS)
		}
	}
	if p := b.MaxExecSeconds; p != nil && what == session.StartExec {
		if u.ExecMS >= *p*1000 {
			return refuse("max_exec_seconds", *p, float64(u.ExecMS)/1000)
		}
		capTo(*p*1000 - u.ExecMS)
	}
	if p := b.MaxConcurrentJobs; p != nil && isJob {
		if int64(len(running)) >= *p {
			return refuse("max_concurrent_jobs", *p, float64(len(running)))
		}
	}
	if p := b.MaxWorkspaceBytes; p != nil {
		n, err := v.measureWorkspace(ctx, s, c)
		if err != nil {
			return err
		}
		if n >= *p {
			return refuse("max_workspace_bytes", *p, float64(n))
		}
	}
	if p := b.MaxOutputBytes; p != nil {
		a.OutputCap = *p
	}
	return nil
}

// AdmitWrite refuses a file write or an upload of n bytes that would take
// the workspace past budget.max_workspace_bytes: the workspace is
// measured now (du, as at a command's start) and n added. The write
// counts wherever its path leads (a link can lead any path into the
// workspace), and a file it replaces is not taken off (sparse files would
// make that a way round): delete a file before writing it again when the
// workspace is close to its limit.
func (v *Service) AdmitWrite(ctx context.Context, s *session.Session, c *client.Client, n int64, what string) error {
	b := s.Budget
	if b == nil || b.MaxWorkspaceBytes == nil {
		return nil
	}
	used, err := v.measureWorkspace(ctx, s, c)
	if err != nil {
		return err
	}
	if limit := *b.MaxWorkspaceBytes; used+n > limit {
		return &session.BudgetError{Budget: "max_workspace_bytes", Limit: limit, Used: float64(used), What: what, Adds: n}
	}
	return nil
}

// measureWorkspace runs du -sk on the workspace in the guest and records
// the result as usage.workspace_bytes.
func (v *Service) measureWorkspace(ctx context.Context, s *session.Session, c *client.Client) (int64, error) {
	res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"du", "-sk", s.Workspace.Path}, TimeoutSeconds: 60, MaxOutputBytes: 64 << 10}})
	if err != nil {
		if strings.Contains(err.Error(), "not found on PATH") {
			return 0, fmt.Errorf("%w: budget.max_workspace_bytes needs du in the sandbox, and this image has none", session.ErrConflict)
		}
		return 0, session.GuestError(err)
	}
	n, ok := parseDU(res.Stdout)
	if !ok {
		return 0, fmt.Errorf("%w: measuring the workspace for budget.max_workspace_bytes failed: du -sk %s exited %d: %s",
			session.ErrConflict, s.Workspace.Path, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err := v.m.Store().SetWorkspaceBytes(ctx, s.ID, n); err != nil {
		v.m.Logger().Warn("record the workspace size", "session", s.ID, "err", err)
	}
	return n, nil
}

// parseDU reads the total of du -sk (its last line's first field, in KiB)
// as bytes.
func parseDU(out []byte) (int64, bool) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) == 0 {
		return 0, false
	}
	kib, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || kib < 0 || kib > math.MaxInt64/1024 {
		return 0, false
	}
	return kib * 1024, true
}
