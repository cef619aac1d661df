package session

// Budgets: what a session may consume, set at create and enforced when a
// command, job or fork starts. The counters live in the store's usage
// row, apart from the record, so counting never changes the revision.
//
//   - Counts (max_execs, max_jobs, max_children) are taken in one SQLite
//     statement when the command, job or fork starts (store.TakeUsage), so
//     two requests racing for the last unit cannot both get it; a start
//     the sandbox then refuses gives its unit back.
//   - Time (max_exec_seconds, max_compute_seconds) is checked at the start
//     and caps a command's timeout to what is left; commands running in
//     parallel can overshoot it, and a running job is never stopped.
//     Compute is exec time plus job time: finished jobs by their start and
//     end, running ones up to now; or the sandbox's CPU time, when that
//     is more (compute.go), which a watcher also enforces. A job's host-side row (the store's jobs
//     table) is settled into usage.job_ms once, when the daemon sees it
//     has ended (or that the sandbox no longer knows it).
//   - max_concurrent_jobs counts the jobs the guest reports running; job
//     starts of a session are serialised while it is checked.
//   - max_output_bytes is handed to the guest as the per-stream cap; it
//     cuts output, never the command.
//   - max_workspace_bytes is du -sk of the workspace, measured in the guest
//     when a command or job starts; growth during a run is not stopped.
//     A file write or upload is measured too, and refused when the
//     workspace plus what it writes would pass the limit (admitWrite).
//
// A fork child starts with its parent's limits minus the parent's usage,
// so forking cannot multiply what is left.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/store"
)

// Budget is the public wire type api.Budget, kept under this name here.
type Budget = apiv1.Budget

// budgetLimitsCommands reports whether b limits what commands may spend (all
// but max_children, which bounds forks): a terminal, whose commands the
// daemon never sees, would walk around it.
func budgetLimitsCommands(b *Budget) bool {
	return b != nil && (b.MaxExecs != nil || b.MaxExecSeconds != nil || b.MaxJobs != nil || b.MaxConcurrentJobs != nil ||
		b.MaxComputeSeconds != nil || b.MaxOutputBytes != nil || b.MaxWorkspaceBytes != nil)
}

// Upper bounds of the budget fields (docs/api/openapi.yaml states them;
// a test compares).
const (
	MaxBudgetExecs          = apiv1.MaxBudgetExecs
	MaxBudgetSeconds        = apiv1.MaxBudgetSeconds
	MaxBudgetJobs           = apiv1.MaxBudgetJobs
	MaxBudgetConcurrentJobs = apiv1.MaxBudgetConcurrentJobs
	MaxBudgetChildren       = apiv1.MaxBudgetChildren
	MaxBudgetOutputBytes    = apiv1.MaxBudgetOutputBytes
	MaxBudgetWorkspaceBytes = apiv1.MaxBudgetWorkspaceBytes
)

// budgetField is one field of Budget with its bounds.
type budgetField struct {
	name     string
	min, max int64
	get      func(*Budget) **int64
}

var budgetFields = []budgetField{
	{"max_execs", 0, MaxBudgetExecs, func(b *Budget) **int64 { return &b.MaxExecs }},
	{"max_exec_seconds", 0, MaxBudgetSeconds, func(b *Budget) **int64 { return &b.MaxExecSeconds }},
	{"max_jobs", 0, MaxBudgetJobs, func(b *Budget) **int64 { return &b.MaxJobs }},
	{"max_concurrent_jobs", 0, MaxBudgetConcurrentJobs, func(b *Budget) **int64 { return &b.MaxConcurrentJobs }},
	{"max_children", 0, MaxBudgetChildren, func(b *Budget) **int64 { return &b.MaxChildren }},
	{"max_compute_seconds", 0, MaxBudgetSeconds, func(b *Budget) **int64 { return &b.MaxComputeSeconds }},
	{"max_output_bytes", 1, MaxBudgetOutputBytes, func(b *Budget) **int64 { return &b.MaxOutputBytes }},
	{"max_workspace_bytes", 1, MaxBudgetWorkspaceBytes, func(b *Budget) **int64 { return &b.MaxWorkspaceBytes }},
}

// checkBudget refuses a field out of its bounds, naming it. A budget with no
// field set is no budget (nil).
func checkBudget(b *Budget) (*Budget, error) {
	if b == nil {
		return nil, nil
	}
	set := false
	for _, f := range budgetFields {
		v := *f.get(b)
		if v == nil {
			continue
		}
		set = true
		if *v < f.min || *v > f.max {
			return nil, bad("budget.%s %d must be from %d to %d", f.name, *v, f.min, f.max)
		}
	}
	if !set {
		return nil, nil
	}
	return cloneBudget(b), nil
}

func cloneBudget(b *Budget) *Budget {
	if b == nil {
		return nil
	}
	out := &Budget{}
	for _, f := range budgetFields {
		if v := *f.get(b); v != nil {
			n := *v
			*f.get(out) = &n
		}
	}
	return out
}

// childBudget is what a fork child may still use: the parent's limits
// minus the parent's usage for what is consumed (counts and time), the
// same limits for what is a cap (concurrency, output, workspace size).
func childBudget(b *Budget, u Usage) *Budget {
	if b == nil {
		return nil
	}
	out := cloneBudget(b)
	left := func(p *int64, used int64) {
		if p != nil {
			*p = max(0, *p-used)
		}
	}
	left(out.MaxExecs, u.Execs)
	left(out.MaxJobs, u.Jobs)
	left(out.MaxChildren, u.Children)
	// Seconds left, rounded down: a child never gets more than remains.
	if out.MaxExecSeconds != nil {
		*out.MaxExecSeconds = max(0, (*out.MaxExecSeconds*1000-u.ExecMS)/1000)
	}
	if out.MaxComputeSeconds != nil {
		*out.MaxComputeSeconds = max(0, (*out.MaxComputeSeconds*1000-u.ComputeMS)/1000)
	}
	return out
}

// BudgetError is a refusal because a budget limit is reached (403). The
// API puts Budget, Limit and Used beside the message.
type BudgetError struct {
	// Budget is the field, such as "max_execs".
	Budget string
	Limit  int64
	// Used is in the field's unit (seconds for the *_seconds fields, with
	// millisecond precision).
	Used float64
	// What is about to start: "exec", "job" or "fork"; or what is about
	// to be written ("file write", "upload").
	What string
	// Adds is what a write would add (max_workspace_bytes), 0 otherwise.
	Adds int64
}

func (e *BudgetError) Error() string {
	unit := ""
	switch {
	case strings.HasSuffix(e.Budget, "_seconds"):
		unit = " s"
	case strings.HasSuffix(e.Budget, "_bytes"):
		unit = " bytes"
	}
	if e.Adds > 0 {
		return fmt.Sprintf("the session's budget %s would be passed (%s of %d%s used, and this %s adds %d), so it is refused; delete files first or create a session with a larger budget",
			e.Budget, strconv.FormatFloat(e.Used, 'f', -1, 64), e.Limit, unit, e.What, e.Adds)
	}
	return fmt.Sprintf("the session's budget %s is reached (%s of %d%s used), so this %s is refused; create a session with a larger budget",
		e.Budget, strconv.FormatFloat(e.Used, 'f', -1, 64), e.Limit, unit, e.What)
}

// Unwrap makes a BudgetError a 403.
func (e *BudgetError) Unwrap() error { return errBudgetExceeded }

// errBudgetExceeded is what every BudgetError is: forbidden, with its own
// code.
var errBudgetExceeded = errdefs.WithCode(errdefs.CodeBudgetExceeded, ErrForbidden)

// InterruptedOp is the public wire type api.InterruptedOp, kept under this name here.
type InterruptedOp = apiv1.InterruptedOp

// jobRow is the host's record of a job it started and has not yet
// settled into usage.job_ms (the store's jobs table).
type jobRow struct {
	// StartedAt is the host's clock at the start: running jobs count up
	// to the host's now, so clock skew with the guest does not matter.
	StartedAt      time.Time `json:"started_at"`
	MaxOutputBytes int64     `json:"max_output_bytes,omitempty"`
	Streamed       bool      `json:"streamed,omitempty"`
}

// usage reads the session's counters and the time of its unsettled jobs.
func (m *Manager) usage(ctx context.Context, id string) Usage {
	var u Usage
	row, err := m.st.GetUsage(ctx, id)
	if err != nil {
		m.log.Warn("read usage", "session", id, "err", err)
		return u
	}
	u = Usage{Execs: row.Execs, ExecMS: row.ExecMS, Jobs: row.Jobs, Children: row.Children, JobMS: row.JobMS, WorkspaceBytes: row.WorkspaceBytes, CPUMS: row.CPUMS}
	if jobs, err := m.st.ListJobs(ctx, id); err == nil {
		now := m.now()
		for _, j := range jobs {
			var r jobRow
			if json.Unmarshal(j.Record, &r) == nil && !r.StartedAt.IsZero() {
				u.JobMS += max(0, now.Sub(r.StartedAt).Milliseconds())
			}
		}
	}
	u.ComputeMS = max(u.ExecMS+u.JobMS, u.CPUMS)
	return u
}

// recordJob keeps a started job's row until it is settled.
func (m *Manager) recordJob(ctx context.Context, id string, j *api.Job, command string, started time.Time, maxOut int64, streamed bool) {
	raw, _ := json.Marshal(jobRow{StartedAt: started, MaxOutputBytes: maxOut, Streamed: streamed})
	if err := m.st.PutJob(ctx, store.JobRow{SessionID: id, JobID: j.ID, Command: command, Record: raw}); err != nil {
		m.log.Warn("record a job", "session", id, "job", j.ID, "err", err)
	}
}

// settleJob accounts a job the guest reports ended: its guest-measured
// run time goes into usage.job_ms once, and output it dropped past its
// cap is ledgered.
func (m *Manager) settleJob(ctx context.Context, id string, j api.Job) {
	if j.EndedAt == nil {
		return
	}
	if _, err := m.st.GetJob(ctx, id, j.ID); err != nil {
		return // not ours to settle, or settled already
	}
	ms := max(0, j.EndedAt.Sub(j.StartedAt).Milliseconds())
	first, err := m.st.SettleJob(ctx, id, j.ID, ms)
	if err != nil {
		m.log.Warn("settle a job", "session", id, "job", j.ID, "err", err)
		return
	}
	if first && j.DroppedBytes > 0 {
		m.ledgerAppend(ctx, id, "job.output_truncated", map[string]any{"job": j.ID, "dropped_bytes": j.DroppedBytes,
			"stdout_bytes": j.StdoutBytes, "stderr_bytes": j.StderrBytes})
	}
}

// refreshJobs asks the guest for its jobs, settles those that ended and
// those the guest no longer knows (a restore or a restarted agent lost
// them: they count up to now), and returns the running ones.
func (m *Manager) refreshJobs(ctx context.Context, id string, c *client.Client) ([]api.Job, error) {
	js, err := c.Jobs(ctx)
	if err != nil {
		return nil, guestErr(err)
	}
	known := map[string]bool{}
	var running []api.Job
	for _, j := range js {
		known[j.ID] = true
		if j.State == api.JobRunning {
			running = append(running, j)
			continue
		}
		m.settleJob(ctx, id, j)
	}
	rows, err := m.st.ListJobs(ctx, id)
	if err != nil {
		return running, err
	}
	now := m.now()
	for _, r := range rows {
		if known[r.JobID] {
			continue
		}
		var jr jobRow
		json.Unmarshal(r.Record, &jr)
		ms := int64(0)
		if !jr.StartedAt.IsZero() {
			ms = max(0, now.Sub(jr.StartedAt).Milliseconds())
		}
		if _, err := m.st.SettleJob(ctx, id, r.JobID, ms); err != nil {
			m.log.Warn("settle a lost job", "session", id, "job", r.JobID, "err", err)
		}
	}
	return running, nil
}

// freshUsage settles what the guest reports ended before the usage is
// shown, when the session has jobs the host still counts as running.
func (m *Manager) freshUsage(ctx context.Context, s *Session) {
	if s.State != StateRunning {
		return
	}
	if _, ok := m.chargeCPU(ctx, s.ID); ok {
		s.Usage = m.usage(ctx, s.ID)
	}
	rows, err := m.st.ListJobs(ctx, s.ID)
	if err != nil || len(rows) == 0 {
		return
	}
	m.mu.Lock()
	mc := m.machines[s.ID]
	m.mu.Unlock()
	if mc == nil {
		return
	}
	if _, err := m.refreshJobs(ctx, s.ID, clientFor(mc)); err == nil {
		s.Usage = m.usage(ctx, s.ID)
	}
}

// What is starting, for admit.
const (
	startExec   = "exec"
	startJob    = "job"
	startStream = "exec/stream" // a job that is also a command: its timeout is capped
)

// admission is what admit allowed a starting command or job.
type admission struct {
	// timeout is the command's timeout after the budget's caps; capped
	// says a cap lowered it.
	timeout int
	capped  bool
	// outputCap is max_output_bytes (0: the guest's default).
	outputCap int64
	// release gives back the unit taken, for a start that failed.
	release func()
	// taken says the unit was taken at the start (a budget limits it);
	// otherwise the caller counts it with the rest of its usage, in one
	// write, once the start succeeded.
	taken bool
	// streamExec says the start is an exec/stream, which is a command as
	// well as a job: it also counts in execs (max_execs), and
	// streamExecTaken says admit took that unit.
	streamExec, streamExecTaken bool
}

// untaken is the unit the caller still has to count: 1 unless admit took
// it.
func (a *admission) untaken() int64 {
	if a.taken {
		return 0
	}
	return 1
}

// untakenStreamExec is the exec an exec/stream still has to count (0 for
// anything else, or when admit took it).
func (a *admission) untakenStreamExec() int64 {
	if !a.streamExec || a.streamExecTaken {
		return 0
	}
	return 1
}

// admit checks the session's budget before a command or job starts. When
// the budget limits their number it takes the unit (execs or jobs; both
// for an exec/stream, a job that runs a command) now, so racing starts
// cannot both get the last one; otherwise the caller counts it after the
// start (admission.untaken, untakenStreamExec). It returns a BudgetError
// (403) for a limit reached.
func (m *Manager) admit(ctx context.Context, s *Session, c *client.Client, what string, timeout int) (*admission, error) {
	b := s.Budget
	a := &admission{timeout: timeout, release: func() {}, streamExec: what == startStream}
	if b == nil {
		return a, nil
	}
	if err := m.admitBudget(ctx, s, c, what, a); err != nil {
		return nil, err
	}
	counter, field := store.CounterExecs, "max_execs"
	if what != startExec {
		counter, field = store.CounterJobs, "max_jobs"
	}
	var gives []func()
	release := func() {
		for _, give := range gives {
			give()
		}
	}
	take := func(counter, field string) (bool, error) {
		p := *budgetFieldByName(field).get(b)
		if p == nil {
			return false, nil
		}
		limit := *p
		before, err := m.st.TakeUsage(ctx, s.ID, counter, 1, limit)
		if errors.Is(err, store.ErrLimit) {
			return false, &BudgetError{Budget: field, Limit: limit, Used: float64(before), What: what}
		}
		if err != nil {
			return false, err
		}
		gives = append(gives, func() {
			if err := m.st.GiveBackUsage(context.WithoutCancel(ctx), s.ID, counter, 1); err != nil {
				m.log.Warn("give back usage", "session", s.ID, "err", err)
			}
		})
		return true, nil
	}
	var err error
	if a.taken, err = take(counter, field); err != nil {
		return nil, err
	}
	if a.streamExec {
		if a.streamExecTaken, err = take(store.CounterExecs, "max_execs"); err != nil {
			release()
			return nil, err
		}
	}
	a.release = release
	return a, nil
}

func budgetFieldByName(name string) budgetField {
	for _, f := range budgetFields {
		if f.name == name {
			return f
		}
	}
	panic("session: no budget field " + name)
}

// admitBudget is admit's checks of time, concurrency and workspace size.
func (m *Manager) admitBudget(ctx context.Context, s *Session, c *client.Client, what string, a *admission) error {
	b := s.Budget
	isJob := what != startExec
	var running []api.Job
	if b.MaxComputeSeconds != nil {
		// What background processes burnt counts too (compute.go).
		m.chargeCPU(ctx, s.ID)
		m.watchCompute(s)
	}
	if b.MaxComputeSeconds != nil || (isJob && b.MaxConcurrentJobs != nil) {
		var err error
		if running, err = m.refreshJobs(ctx, s.ID, c); err != nil {
			return err
		}
	}
	u := m.usage(ctx, s.ID)
	// capTo lowers the timeout to the seconds left, rounded up (a
	// command always gets at least one second).
	capTo := func(leftMS int64) {
		secs := int((leftMS + 999) / 1000)
		if a.timeout == 0 || secs < a.timeout {
			a.timeout, a.capped = secs, true
		}
	}
	if p := b.MaxComputeSeconds; p != nil {
		if u.ComputeMS >= *p*1000 {
			return &BudgetError{Budget: "max_compute_seconds", Limit: *p, Used: float64(u.ComputeMS) / 1000, What: what}
		}
		if what != startJob {
			capTo(*p*1000 - u.ComputeMS)
		}
	}
	if p := b.MaxExecSeconds; p != nil && what == startExec {
		if u.ExecMS >= *p*1000 {
			return &BudgetError{Budget: "max_exec_seconds", Limit: *p, Used: float64(u.ExecMS) / 1000, What: what}
		}
		capTo(*p*1000 - u.ExecMS)
	}
	if p := b.MaxConcurrentJobs; p != nil && isJob {
		if int64(len(running)) >= *p {
			return &BudgetError{Budget: "max_concurrent_jobs", Limit: *p, Used: float64(len(running)), What: what}
		}
	}
	if p := b.MaxWorkspaceBytes; p != nil {
		n, err := m.measureWorkspace(ctx, s, c)
		if err != nil {
			return err
		}
		if n >= *p {
			return &BudgetError{Budget: "max_workspace_bytes", Limit: *p, Used: float64(n), What: what}
		}
	}
	if p := b.MaxOutputBytes; p != nil {
		a.outputCap = *p
	}
	return nil
}

// admitWrite refuses a file write or an upload of n bytes that would
// take the workspace past budget.max_workspace_bytes: the workspace is
// measured now (du, as at a command's start) and n added. The write
// counts wherever its path leads (a link can lead any path into the
// workspace), and a file it replaces is not taken off (sparse files
// would make that a way round): delete a file before writing it again
// when the workspace is close to its limit.
func (m *Manager) admitWrite(ctx context.Context, s *Session, c *client.Client, n int64, what string) error {
	b := s.Budget
	if b == nil || b.MaxWorkspaceBytes == nil {
		return nil
	}
	used, err := m.measureWorkspace(ctx, s, c)
	if err != nil {
		return err
	}
	if limit := *b.MaxWorkspaceBytes; used+n > limit {
		return &BudgetError{Budget: "max_workspace_bytes", Limit: limit, Used: float64(used), What: what, Adds: n}
	}
	return nil
}

// measureWorkspace runs du -sk on the workspace in the guest and records
// the result as usage.workspace_bytes.
func (m *Manager) measureWorkspace(ctx context.Context, s *Session, c *client.Client) (int64, error) {
	res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"du", "-sk", s.Workspace.Path}, TimeoutSeconds: 60, MaxOutputBytes: 64 << 10}})
	if err != nil {
		if strings.Contains(err.Error(), "not found on PATH") {
			return 0, fmt.Errorf("%w: budget.max_workspace_bytes needs du in the sandbox, and this image has none", ErrConflict)
		}
		return 0, guestErr(err)
	}
	n, ok := parseDU(res.Stdout)
	if !ok {
		return 0, fmt.Errorf("%w: measuring the workspace for budget.max_workspace_bytes failed: du -sk %s exited %d: %s",
			ErrConflict, s.Workspace.Path, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err := m.st.SetWorkspaceBytes(ctx, s.ID, n); err != nil {
		m.log.Warn("record the workspace size", "session", s.ID, "err", err)
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

// execResult turns the guest's answer into the API's. A stream cut at
// its cap is cut back to the last whole UTF-8 character before the
// truncation marker; the bytes that costs are counted as dropped too.
func execResult(res *api.ExecResult, budgetCap int64) *ExecResult {
	stdout, outCut := cutToCharacter(res.Stdout, res.StdoutTruncated)
	stderr, errCut := cutToCharacter(res.Stderr, res.StderrTruncated)
	out := &ExecResult{ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut,
		Stdout: string(stdout), Stderr: string(stderr),
		Truncated: res.StdoutTruncated || res.StderrTruncated, DurationMS: res.DurationMillis}
	if res.StdoutTruncated {
		out.StdoutDropped = res.StdoutDropped + outCut
	}
	if res.StderrTruncated {
		out.StderrDropped = res.StderrDropped + errCut
	}
	if budgetCap > 0 && out.Truncated {
		out.OutputTruncated, out.MaxOutputBytes = true, budgetCap
	}
	return out
}

// cutToCharacter drops a partial UTF-8 character at the end of a stream
// that the guest truncated (which it does at a byte count), keeping the
// marker it appended.
func cutToCharacter(b []byte, truncated bool) ([]byte, int64) {
	marker := []byte(api.TruncationMarker)
	if !truncated || len(b) < len(marker) || string(b[len(b)-len(marker):]) != api.TruncationMarker {
		return b, 0
	}
	body := b[:len(b)-len(marker)]
	// The last character starts at most utf8.UTFMax-1 bytes from the end.
	for i := len(body) - 1; i >= 0 && i >= len(body)-utf8.UTFMax; i-- {
		if utf8.RuneStart(body[i]) {
			if !utf8.FullRune(body[i:]) {
				cut := int64(len(body) - i)
				return append(append([]byte{}, body[:i]...), marker...), cut
			}
			break
		}
	}
	return b, 0
}

// execLedger is the ledger data of an exec.
func execLedger(command string, out *ExecResult, a *admission) map[string]any {
	d := map[string]any{"command": command, "exit_code": out.ExitCode, "duration_ms": out.DurationMS, "timed_out": out.TimedOut}
	if a.capped {
		d["timeout_seconds"] = a.timeout
		d["timeout_capped_by_budget"] = true
	}
	if out.Truncated {
		d["truncated"] = true
		d["output_truncated"] = out.OutputTruncated
		d["stdout_dropped_bytes"] = out.StdoutDropped
		d["stderr_dropped_bytes"] = out.StderrDropped
	}
	return d
}

// takeChildren takes count fork children from the session's budget and
// returns the function that gives back the ones not made.
func (m *Manager) takeChildren(ctx context.Context, s *Session, count int) (giveBack func(unmade int), err error) {
	limit := int64(math.MaxInt64)
	if s.Budget != nil && s.Budget.MaxChildren != nil {
		limit = *s.Budget.MaxChildren
	}
	before, err := m.st.TakeUsage(ctx, s.ID, store.CounterChildren, int64(count), limit)
	if errors.Is(err, store.ErrLimit) {
		return nil, &BudgetError{Budget: "max_children", Limit: limit, Used: float64(before), What: "fork"}
	}
	if err != nil {
		return nil, err
	}
	return func(unmade int) {
		if unmade <= 0 {
			return
		}
		if err := m.st.GiveBackUsage(context.WithoutCancel(ctx), s.ID, store.CounterChildren, int64(unmade)); err != nil {
			m.log.Warn("give back fork children", "session", s.ID, "err", err)
		}
	}, nil
}

// checkBudgetWorkspace refuses max_workspace_bytes on a session whose
// workspace was not created: there is nothing to measure.
func checkBudgetWorkspace(b *Budget, ws Workspace) error {
	if b == nil || b.MaxWorkspaceBytes == nil || !strings.HasPrefix(ws.Note, workspaceNotCreated) {
		return nil
	}
	return bad("budget.max_workspace_bytes needs a workspace, and this session's was not created (%s)", ws.Note)
}

// workspaceNotCreated starts the note of a session without a workspace.
const workspaceNotCreated = "workspace was not created: "
