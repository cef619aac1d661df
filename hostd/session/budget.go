package session

// Budgets: what a session may consume, set at create. The core keeps what
// every session has, budget or not: the budget on the record (its bounds
// checked at create, a fork child's share of its parent's), the usage
// counters (in the store's usage row, apart from the record, so counting
// never changes the revision), the jobs' host-side rows settled into
// usage.job_ms once the daemon sees them end, and the fork children,
// taken with their limit in one store statement (takeChildren).
//
// Whether a command, job or file write of a budgeted session may start is
// the budgets service's to say (hostd/budgets, through the Budgets
// interface below): its checks, the units it takes at the start, the
// timeout and output caps, the workspace measure and the compute
// watcher. A session without a budget never reaches it; one with a
// budget on a Manager without the service is refused (fail closed).
//
// Compute is exec time plus job time: finished jobs by their start and
// end, running ones up to now; or the sandbox's CPU time, when that is
// more (compute.go).
//
// A fork child starts with its parent's limits minus the parent's usage,
// so forking cannot multiply what is left.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
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
	// HandedOn marks a record a memory fork gave a child (handOnJobs):
	// StartedAt is then the fork, and the child is charged from there.
	HandedOn bool `json:"handed_on,omitempty"`
	// Actor is who started it (the ledger's actor): a streamed command's
	// exec entry, made when it ends, names the caller who ran it even
	// when the host's follower or another reader settles it.
	Actor string `json:"actor,omitempty"`
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
	raw, _ := json.Marshal(jobRow{StartedAt: started, MaxOutputBytes: maxOut, Streamed: streamed, Actor: auth.ActorOf(ctx)})
	if err := m.st.PutJob(ctx, store.JobRow{SessionID: id, JobID: j.ID, Command: command, Record: raw}); err != nil {
		m.log.Warn("record a job", "session", id, "job", j.ID, "err", err)
	}
}

// settleLocks are striped locks, one held while a job is settled: two
// settlers of one job meet on the same lock.
var settleLocks [64]sync.Mutex

func settleLock(id, job string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(job))
	return &settleLocks[h.Sum32()%uint32(len(settleLocks))]
}

// settleJob accounts a job the guest reports ended: its guest-measured
// run time goes into usage.job_ms once, output it dropped past its cap
// is ledgered, and a streamed command (exec/stream) gets its exec entry.
// Whoever sees the end first settles (a reader of the job, a listing,
// the host's own follower of a streamed job, followStreamed); the store
// makes it happen once. What it ledgers does not depend on the caller
// staying: ctx's cancellation is dropped. A caller that loses the race
// waits for the winner to finish (settleLocks), so whoever saw the end
// (a client reading its stream to the end) finds the entries written
// when settleJob returns.
func (m *Manager) settleJob(ctx context.Context, id string, j api.Job) {
	if j.EndedAt == nil {
		return
	}
	mu := settleLock(id, j.ID)
	mu.Lock()
	defer mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	row, err := m.st.GetJob(ctx, id, j.ID)
	if err != nil {
		return // not ours to settle, or settled already
	}
	ms := max(0, j.EndedAt.Sub(j.StartedAt).Milliseconds())
	var jr jobRow
	rowOK := json.Unmarshal(row.Record, &jr) == nil
	if rowOK && jr.HandedOn {
		ms = max(0, j.EndedAt.Sub(jr.StartedAt).Milliseconds())
	}
	first, err := m.st.SettleJob(ctx, id, j.ID, ms)
	if err != nil {
		m.log.Warn("settle a job", "session", id, "job", j.ID, "err", err)
		return
	}
	if !first {
		return
	}
	if j.DroppedBytes > 0 {
		m.ledgerAppend(ctx, id, "job.output_truncated", map[string]any{"job": j.ID, "dropped_bytes": j.DroppedBytes,
			"stdout_bytes": j.StdoutBytes, "stderr_bytes": j.StderrBytes})
	}
	if rowOK && jr.Streamed {
		m.recordStreamed(ctx, id, row.Command, jr.Actor, j, ms)
	}
}

// recordStreamed is the second half of a streamed command's record step
// (startJob ledgers job.start as it starts): the exec entry, made once
// when the job ends. The command was counted when it started, as the job
// it is (jobs, job time) and as an exec (execs, so max_execs bounds every
// command); its run time is job time, which settleJob has just added.
func (m *Manager) recordStreamed(ctx context.Context, id, command, actor string, j api.Job, ms int64) {
	entry := map[string]any{"job": j.ID, "command": command, "duration_ms": ms, "streamed": true}
	if j.ExitCode != nil {
		entry["exit_code"] = *j.ExitCode
	}
	if j.Signal != "" {
		entry["signal"] = j.Signal
	}
	if actor == "" || m.ledger == nil {
		m.ledgerAppend(ctx, id, "exec", entry)
		return
	}
	if _, err := m.ledger.Append(ctx, id, "exec", actor, withTool(ctx, entry)); err != nil {
		m.log.Error("ledger append", "session", id, "kind", "exec", "err", err)
	}
}

// followStreamedAgain follows the streamed jobs of an adopted sandbox
// that the host has not settled: the daemon that started them stopped
// while they ran, and its followers with it.
func (m *Manager) followStreamedAgain(ctx context.Context, id string, mc hypervisor.Machine) {
	rows, err := m.st.ListJobs(ctx, id)
	if err != nil {
		m.log.Warn("reattach: list jobs", "session", id, "err", err)
		return
	}
	for _, r := range rows {
		var jr jobRow
		if json.Unmarshal(r.Record, &jr) == nil && jr.Streamed {
			go m.followStreamed(id, clientFor(mc), r.JobID)
		}
	}
}

// followStreamed follows a streamed job from the host until the guest
// reports it ended, then settles it (settleJob): so a streamed command
// is ledgered and its time counted when it ends, whether or not its
// client is still reading. It reads one byte at most per poll and
// moves its offsets to what the guest retained, so it costs a long poll,
// not a copy of the output. It gives up when the guest no longer knows
// the job (a restore, a restarted agent: refreshJobs settles those), when
// the guest cannot be reached a few times running (the sandbox stopped),
// and when the manager shuts down.
func (m *Manager) followStreamed(id string, c *client.Client, job string) {
	ctx := context.Background()
	var off, eoff int64
	for fails := 0; fails < 3 && !m.stopped(); {
		r, err := c.ReadJob(ctx, job, client.ReadOptions{Offset: off, StderrOffset: eoff, Wait: api.MaxWaitMillis * time.Millisecond, Limit: 1})
		if m.stopped() {
			return // shut down or detached meanwhile: the next daemon follows it
		}
		if err != nil {
			if refusedBeforeStart(err) {
				return // the guest does not know the job (any more)
			}
			fails++
			time.Sleep(time.Second)
			continue
		}
		fails = 0
		if r.EndedAt != nil {
			m.settleJob(ctx, id, r.Job)
			return
		}
		if r.StdoutBytes == off && r.StderrBytes == eoff {
			// Nothing new: the wait ran out, or the job closed its
			// output and runs on (the guest then answers at once).
			time.Sleep(time.Second)
		}
		off, eoff = r.StdoutBytes, r.StderrBytes
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

// Start says what is about to start, for the admit step.
type Start string

// What is starting.
const (
	StartExec   Start = "exec"
	StartJob    Start = "job"
	StartStream Start = "exec/stream" // a job that is also a command: its timeout is capped
)

// Admission is what the budgets service allowed a starting command or
// job (Budgets.Admit).
type Admission struct {
	// Timeout is the command's timeout after the budget's caps; Capped
	// says a cap lowered it.
	Timeout int
	Capped  bool
	// OutputCap is max_output_bytes (0: the guest's default).
	OutputCap int64
	// Release gives back the units taken, for a start that failed (never
	// nil).
	Release func()
	// Taken says the unit (an exec or a job) was taken at the start,
	// because a budget limits it; otherwise the core counts it with the
	// rest of the command's usage, in one write, once the start
	// succeeded.
	Taken bool
	// StreamExec says the start is an exec/stream, which is a command as
	// well as a job: it also counts in execs (max_execs);
	// StreamExecTaken says Admit took that unit.
	StreamExec, StreamExecTaken bool
}

// unlimited is the admission of a session without a budget: nothing
// taken, nothing capped.
func unlimited(what Start, timeout int) *Admission {
	return &Admission{Timeout: timeout, Release: func() {}, StreamExec: what == StartStream}
}

// Untaken is the unit the usage step still has to count: 1 unless Admit
// took it.
func (a *Admission) Untaken() int64 {
	if a.Taken {
		return 0
	}
	return 1
}

// UntakenStreamExec is the exec an exec/stream still has to count (0 for
// anything else, or when Admit took it).
func (a *Admission) UntakenStreamExec() int64 {
	if !a.StreamExec || a.StreamExecTaken {
		return 0
	}
	return 1
}

// Budgets holds a session's commands and file writes to its budget
// (hostd/budgets implements it). The core calls it only for a session
// that has a budget: one without is unlimited.
type Budgets interface {
	// Admit checks s's budget before a command or job (what) with
	// timeout starts on the guest c: a limit reached is a *BudgetError
	// (403). When the budget limits the number of execs or jobs it takes
	// the unit now, so racing starts cannot both get the last one.
	Admit(ctx context.Context, s *Session, c *client.Client, what Start, timeout int) (*Admission, error)
	// AdmitWrite refuses a file write or upload (what) of n bytes that
	// would take s's workspace past its budget (*BudgetError, 403).
	AdmitWrite(ctx context.Context, s *Session, c *client.Client, n int64, what string) error
	// Running is told, when the daemon starts (RunSweeper), of every
	// session with a budget that runs on it, adopted ones included: what
	// their sandboxes still run counts before their next command.
	Running(ctx context.Context, s *Session)
}

type budgetsSlot struct {
	mu sync.RWMutex
	b  Budgets
}

// SetBudgets gives the Manager the budgets service. Set it before the
// daemon serves. Without one, every command, job and file write of a
// session that has a budget is refused (503, budgets_unavailable):
// nothing runs unchecked against a budget it was given.
func (m *Manager) SetBudgets(b Budgets) {
	m.budgets.mu.Lock()
	defer m.budgets.mu.Unlock()
	m.budgets.b = b
}

func (m *Manager) budgetsService() Budgets {
	m.budgets.mu.RLock()
	defer m.budgets.mu.RUnlock()
	return m.budgets.b
}

// errNoBudgets is the refusal of a budgeted session's command on a
// Manager without a budgets service.
var errNoBudgets = errdefs.WithCode(errdefs.CodeBudgetsUnavailable, errdefs.ErrUnavailable)

func noBudgetsErr(what string) error {
	return fmt.Errorf("%w: this session has a budget, and this daemon has no budgets service to hold the %s to it, so it is refused", errNoBudgets, what)
}

// admit is the admit step's call: unlimited for a session without a
// budget, else the budgets service's answer (refused when there is none).
func (m *Manager) admit(ctx context.Context, s *Session, c *client.Client, what Start, timeout int) (*Admission, error) {
	if s.Budget == nil {
		return unlimited(what, timeout), nil
	}
	b := m.budgetsService()
	if b == nil {
		return nil, noBudgetsErr(string(what))
	}
	a, err := b.Admit(ctx, s, c, what, timeout)
	if err != nil {
		return nil, err
	}
	if a.Release == nil {
		a.Release = func() {}
	}
	return a, nil
}

// admitWrite asks the budgets service about a file write or upload of n
// bytes to s (nothing for a session without a budget).
func (m *Manager) admitWrite(ctx context.Context, s *Session, c *client.Client, n int64, what string) error {
	if s.Budget == nil {
		return nil
	}
	b := m.budgetsService()
	if b == nil {
		return noBudgetsErr(what)
	}
	return b.AdmitWrite(ctx, s, c, n, what)
}

// tellBudgetsRunning tells the budgets service of every running session
// that has a budget (at start: the sandboxes a daemon adopted may still
// run what burns their compute).
func (m *Manager) tellBudgetsRunning(ctx context.Context) {
	b := m.budgetsService()
	if b == nil {
		return
	}
	rows, err := m.st.ListSessions(ctx, "")
	if err != nil {
		m.log.Warn("list sessions to tell the budgets service", "err", err)
		return
	}
	for _, r := range rows {
		if r.State != StateRunning {
			continue
		}
		var st stored
		if json.Unmarshal(r.Record, &st) == nil && st.Session != nil && st.Session.Budget != nil {
			st.Session.ID = r.ID
			b.Running(ctx, st.Session)
		}
	}
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
func execLedger(command string, out *ExecResult, a *Admission) map[string]any {
	d := map[string]any{"command": command, "exit_code": out.ExitCode, "duration_ms": out.DurationMS, "timed_out": out.TimedOut}
	if a.Capped {
		d["timeout_seconds"] = a.Timeout
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
