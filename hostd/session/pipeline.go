package session

// The command pipeline. Every call that starts something in a sandbox
// (exec, exec/stream, a job, a git verb, a terminal, a sandbox's process)
// or changes its files through the files routes (a write, a delete, an
// upload's completion) walks the same named steps, in this order:
//
//	validate  the request's own fields (400)
//	load      the session record and its machine (404, 409)
//	judge     the process policy, or what stands in for it (403, 428)
//	gate      the session's work slot: a restore or fork waits (409)
//	admit     the budget: limits checked, the unit taken, caps set (403)
//	spend     an approved request, bound to the session as it is now
//	          (given back if the walk stops before the command starts)
//	hooks     the command hooks (AddCommandHook): they may refuse or annotate
//	run       the guest does the work
//	record    the ledger entry (an exec/stream's exec entry is made
//	          when its job ends, by the host: followStreamed)
//	usage     the session's usage counters
//
// An entry lists only the steps it has (a git status is not judged,
// admitted or counted; a terminal is not counted), always in this order,
// and each step is a named function, so a trace (or a log line) says
// where a command stopped. When a step fails the walk stops and what the
// earlier steps took is given back (a budget unit, the work slot), except
// that once run has started the command in the guest, record and usage
// still follow: a command that may have run is always ledgered and
// counted, even when its caller has gone away (record and usage get a
// context the caller's leaving does not cancel).
//
// To add a step: write it as a pipeStep (a name and a function of the
// *pipe), and put it in the lists of the entries it applies to, at its
// place in the order above; TestPipelineSteps lists what each entry
// walks, so it says where the new step landed. A cross-cutting check
// that every command needs (a rewind point, an audit record) is a
// command hook instead, added with AddCommandHook at the daemon's start.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/policy"
)

// CommandKind says which entry a command came through.
type CommandKind string

// The entries of the pipeline.
const (
	CommandExec     CommandKind = "exec"        // POST .../exec
	CommandStream   CommandKind = "exec/stream" // POST .../exec/stream
	CommandJob      CommandKind = "job"         // POST .../jobs
	CommandGit      CommandKind = "git"         // the git verbs
	CommandTerminal CommandKind = "terminal"    // GET .../pty
	CommandProcess  CommandKind = "process"     // POST /v1/sandboxes/{id}/process
	// CommandFile is a change to the sandbox's files through the files
	// routes (write, delete, an upload's completion): not a command the
	// guest runs, but the hooks see it, so a rewind point can be taken
	// before it.
	CommandFile CommandKind = "file"
)

// Step names, in the order an entry walks them.
const (
	StepValidate = "validate"
	StepLoad     = "load"
	StepJudge    = "judge"
	StepGate     = "gate"
	StepAdmit    = "admit"
	StepSpend    = "spend"
	StepHooks    = "hooks"
	StepRun      = "run"
	StepRecord   = "record"
	StepUsage    = "usage"
)

// Command describes one call as it goes through the pipeline: what a
// command hook sees. The fields are filled by the steps before the hooks
// and must not be changed by a hook; a hook adds what it wants recorded
// with Annotate.
type Command struct {
	// Session is the session's (or sandbox's) id, Tenant its tenant as
	// the caller named it ("" is the admin's view), Caller who asked: the
	// zero Actor for a call that carries no caller (the API always gives
	// one; the manager's own tests may not), never the admin by default.
	// Whatever decides on the caller (approvals, grants) refuses such a
	// call itself (callerOf).
	Session string
	Tenant  string
	// SessionTenant is the tenant the session belongs to, whoever asks
	// (the admin's calls carry Tenant "", not the session's): set once
	// the session is loaded, before the hooks run.
	SessionTenant string
	Caller        policy.Actor
	Kind          CommandKind
	// Verb is the git verb (status, diff, log, commit, branch) or the
	// file change (write, delete, upload); empty for the other kinds.
	Verb string
	// Text is the shell line (exec, exec/stream, job, process, and a
	// terminal's command, "" for a login shell), "git <verb>", or the
	// path a file change names.
	Text string
	// Confine is the confinement the guest runs it under (nil: none).
	Confine *api.Confinement
	// Rule is the process policy's rule for a judged command.
	Rule string

	mu    sync.Mutex
	notes map[string]any
}

// Annotate records key=value in the command's ledger entry (under
// "hooks"). A hook calls it to leave a mark, such as the rewind point it
// took.
func (c *Command) Annotate(key string, value any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.notes == nil {
		c.notes = map[string]any{}
	}
	c.notes[key] = value
}

// Notes returns a copy of what the hooks annotated (nil: nothing).
func (c *Command) Notes() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.notes) == 0 {
		return nil
	}
	return maps.Clone(c.notes)
}

// CommandHook runs before every command reaches the guest, after the
// command was judged, holds the session's work slot and has its budget:
// what it sees would run. A non-nil error refuses the command: nothing
// runs, the budget unit goes back, and the ledger gets <kind>.refused
// naming the hook. The error keeps its kind when it wraps one of
// errdefs' (ErrConflict answers 409, and so on); any other error
// answers 403. A hook must be quick and must not call back into the
// Manager for the same session's commands (it holds the work slot).
type CommandHook func(ctx context.Context, c *Command) error

// commandHooks are the Manager's command hooks and the test's step trace.
type commandHooks struct {
	mu    sync.RWMutex
	hooks []namedHook
	// trace, when set (tests), is told every step an entry starts.
	trace func(kind CommandKind, step string)
}

type namedHook struct {
	name string
	fn   CommandHook
}

// AddCommandHook adds a hook that every command sees before it runs (see
// CommandHook), after those added before it. name says in the ledger
// which hook refused a command. Add hooks before the daemon serves.
func (m *Manager) AddCommandHook(name string, h CommandHook) {
	if name == "" || h == nil {
		panic("session: AddCommandHook needs a name and a hook")
	}
	m.cmds.mu.Lock()
	defer m.cmds.mu.Unlock()
	m.cmds.hooks = append(m.cmds.hooks, namedHook{name, h})
}

// HookRefused is a command a command hook refused.
type HookRefused struct {
	Hook string
	Err  error
}

// ownKind reports whether the hook's error is of an errdefs kind (other
// than internal), whose status it then keeps.
func (e *HookRefused) ownKind() bool {
	k, ok := errdefs.KindOf(e.Err)
	return ok && k.Err != errdefs.ErrInternal
}

func (e *HookRefused) Error() string {
	if e.ownKind() {
		return fmt.Sprintf("the %s hook refused this command: %v", e.Hook, e.Err)
	}
	return fmt.Sprintf("%v: the %s hook refused this command: %v", ErrForbidden, e.Hook, e.Err)
}

// Unwrap gives the hook's own error, and ErrForbidden when that wraps
// none of the session's errors.
func (e *HookRefused) Unwrap() []error {
	if e.ownKind() {
		return []error{e.Err}
	}
	return []error{ErrForbidden, e.Err}
}

// pipe is one command's walk: the Command the hooks see, and what the
// steps found and took on the way.
type pipe struct {
	m   *Manager
	cmd *Command

	s  *Session
	mc hypervisor.Machine
	cl *client.Client
	v  *verdict
	// adm is the budget's admission (admit); nil before it, or for an
	// entry that has no admit step.
	adm *Admission

	// ran says run started the command in the guest (or may have):
	// record and usage follow even when it failed.
	ran bool
	// kept says what the steps took stays taken (the command started,
	// or a terminal was handed to its caller): undo is not run.
	kept bool
	// answered says a step gave the answer already (an upload completed
	// before): the walk ends there, successfully.
	answered bool
	// err is the walk's first error, for record and usage to see (they
	// only follow run, so it is run's).
	err error
	// cutOff says run's guest call was cut off after it may have done
	// its work (Pipe.RunCutOff), and lost is why.
	cutOff bool
	lost   string
	// undo gives back what a step took, for a walk that stops before
	// the command starts; after runs at the walk's end whatever happens.
	undo, after []func()
}

// pipeStep is one named step of an entry.
type pipeStep struct {
	name string
	fn   func(ctx context.Context, p *pipe) error
}

// newPipe starts a command of kind on session id.
func (m *Manager) newPipe(ctx context.Context, kind CommandKind, tenant, id string) *pipe {
	caller, _ := callerOf(ctx) // zero when the call carries none
	return &pipe{m: m, cmd: &Command{Session: id, Tenant: tenant, Caller: caller, Kind: kind}}
}

// walk runs steps in order (see the file's comment).
func (p *pipe) walk(ctx context.Context, steps ...pipeStep) (err error) {
	defer func() {
		if err != nil && !p.kept {
			for i := len(p.undo) - 1; i >= 0; i-- {
				p.undo[i]()
			}
		}
		for i := len(p.after) - 1; i >= 0; i-- {
			p.after[i]()
		}
	}()
	p.m.cmds.mu.RLock()
	trace := p.m.cmds.trace
	p.m.cmds.mu.RUnlock()
	for _, st := range steps {
		if err != nil && !(p.ran && (st.name == StepRecord || st.name == StepUsage)) {
			continue
		}
		if trace != nil {
			trace(p.cmd.Kind, st.name)
		}
		sctx := ctx
		if st.name == StepRecord || st.name == StepUsage {
			// What reached the guest is ledgered and counted even when
			// the caller has gone away meanwhile (a client that hangs up
			// as its command ends).
			sctx = context.WithoutCancel(ctx)
		}
		if e := st.fn(sctx, p); e != nil && err == nil {
			err, p.err = e, e
			p.m.log.Debug("command stopped", "session", p.cmd.Session, "kind", p.cmd.Kind, "step", st.name, "err", RedactSecrets(e.Error()))
		}
		if p.answered && err == nil {
			break
		}
	}
	return err
}

// step makes a step of an entry's own function.
func step(name string, fn func(ctx context.Context) error) pipeStep {
	return pipeStep{name, func(ctx context.Context, _ *pipe) error { return fn(ctx) }}
}

// loadRunning is the load step of a session's command: the session,
// running, and its machine.
func loadRunning() pipeStep {
	return pipeStep{StepLoad, func(ctx context.Context, p *pipe) error {
		s, _, mc, err := p.m.running(ctx, p.cmd.Tenant, p.cmd.Session)
		if err != nil {
			return err
		}
		p.s, p.mc, p.cl = s, mc, clientFor(mc)
		p.cmd.Confine = confinement(s)
		return nil
	}}
}

// judgeCommand is the judge step of a shell command: the process policy
// (judge), with approvals.
func judgeCommand(c commandCheck) pipeStep {
	return pipeStep{StepJudge, func(ctx context.Context, p *pipe) error {
		v, err := p.m.judge(ctx, p.s, c)
		if err != nil {
			return err
		}
		p.v, p.cmd.Rule = v, v.decision.Rule
		return nil
	}}
}

// gateCommand is the gate step of a command or job: it takes the
// session's work slot (a restore or fork refuses while it is held) and,
// when an approval is to be spent, reads the session again, as it is now
// that the command holds it (an approval is bound to that revision). A
// job start on a budget that counts running jobs also waits for the
// session's other job starts.
func gateCommand(reload bool) pipeStep {
	return pipeStep{StepGate, func(ctx context.Context, p *pipe) error {
		done, err := p.m.commandStarts(p.cmd.Session)
		if err != nil {
			return err
		}
		p.after = append(p.after, done)
		if reload || (p.v != nil && p.v.approval != "") {
			if p.s, _, p.mc, err = p.m.running(ctx, p.cmd.Tenant, p.cmd.Session); err != nil {
				return err
			}
			p.cl = clientFor(p.mc)
		}
		if (p.cmd.Kind == CommandJob || p.cmd.Kind == CommandStream) && p.s.Budget != nil && p.s.Budget.MaxConcurrentJobs != nil {
			p.after = append(p.after, p.m.lockJobStarts(p.cmd.Session))
		}
		return nil
	}}
}

// admitStep is the admit step: the session's budget for a start of
// what with timeout (admit). The unit goes back if the walk stops before
// the command starts.
func admitStep(what Start, timeout int) pipeStep {
	return pipeStep{StepAdmit, func(ctx context.Context, p *pipe) error {
		adm, err := p.m.admit(ctx, p.s, p.cl, what, timeout)
		if err != nil {
			return err
		}
		p.adm = adm
		p.undo = append(p.undo, adm.Release)
		return nil
	}}
}

// spendApproval is the spend step: the verdict's approval, if any, spent
// for the command as bound to the session now. Spending before the hooks
// and the run makes the approval this walk's alone (a second call with
// it is refused, 403) before anything acts on it; if the walk then stops
// before the command starts (a hook refuses, the guest refuses to start
// it), the undo gives the approval back, so it is not used up for
// nothing.
func spendApproval() pipeStep {
	return pipeStep{StepSpend, func(ctx context.Context, p *pipe) error {
		if err := p.m.spendFor(ctx, p.s, p.v); err != nil {
			return err
		}
		if p.v != nil && p.v.approval != "" {
			s, v := p.s, p.v
			p.undo = append(p.undo, func() { p.m.giveBack(context.WithoutCancel(ctx), s, v) })
		}
		return nil
	}}
}

// runHooks is the hooks step: every command hook, in the order they
// were added; the first refusal stops the command and is ledgered as
// <kind>.refused.
func runHooks(ledgerKind string) pipeStep {
	return pipeStep{StepHooks, func(ctx context.Context, p *pipe) error {
		p.m.cmds.mu.RLock()
		hooks := p.m.cmds.hooks
		p.m.cmds.mu.RUnlock()
		if p.s != nil {
			p.cmd.SessionTenant = p.s.Tenant
		}
		for _, h := range hooks {
			if err := h.fn(ctx, p.cmd); err != nil {
				p.m.ledgerAppend(ctx, p.cmd.Session, ledgerKind+".refused", map[string]any{
					"command": clipText(p.cmd.Text, MaxApprovalCommandBytes), "hook": h.name, "reason": clipText(err.Error(), 300)})
				return &HookRefused{Hook: h.name, Err: err}
			}
		}
		return nil
	}}
}

// withNotes adds what the hooks annotated to a ledger entry.
func (p *pipe) withNotes(entry map[string]any) map[string]any {
	if n := p.cmd.Notes(); n != nil {
		entry["hooks"] = n
	}
	return entry
}

// judgeWithoutApprovals is the judge step of a sandbox's process: the
// same process policy as a session's exec, but the sandbox API has no
// approvals, so a command the policy would hold for an operator is
// refused (403) instead, with the policy's rule.
func judgeWithoutApprovals(c commandCheck) pipeStep {
	return pipeStep{StepJudge, func(ctx context.Context, p *pipe) error {
		d, err := p.m.decide(ctx, p.s, c)
		if err != nil {
			return err
		}
		if d.Result == policy.Ask {
			d.Result = policy.Deny
			why := "this command needs an operator's approval, and the sandbox API has no approvals; run it in an agent session"
			if d.Reason != "" {
				why = d.Reason + "; " + why
			}
			d.Reason = why
			p.m.ledgerAppend(ctx, p.s.ID, c.kind+".refused", refusedEntry(c, d))
			return &ProcessRefused{Decision: d}
		}
		p.v, p.cmd.Rule = &verdict{decision: d, check: c}, d.Rule
		return nil
	}}
}

// decide asks the process policy about a command: Allow and Ask come
// back as decisions, Deny as a *ProcessRefused (403), ledgered as
// <kind>.refused. Without a policy engine a session with process rules
// is refused (409) and any other allowed (process.default).
func (m *Manager) decide(ctx context.Context, s *Session, c commandCheck) (policy.ProcessDecision, error) {
	if m.policy == nil {
		if s.Policy.Process != nil {
			return policy.ProcessDecision{}, fmt.Errorf("%w: this daemon has no policy engine, and the session has process rules", ErrConflict)
		}
		return policy.ProcessDecision{Result: policy.Allow, Rule: "process.default"}, nil
	}
	rules := policy.ProcessRules{}
	if s.Policy.Process != nil {
		rules = *s.Policy.Process
	}
	d, err := m.policy.Process(ctx, policy.ProcessInput{Session: s.ID, Kind: c.kind, Command: c.command, Rules: rules, Env: c.env, Cwd: c.cwd})
	if err != nil {
		return d, fmt.Errorf("process policy: %w", err)
	}
	switch d.Result {
	case policy.Allow, policy.Ask:
		return d, nil
	case policy.Deny:
		m.ledgerAppend(ctx, s.ID, c.kind+".refused", refusedEntry(c, d))
		return d, &ProcessRefused{Decision: d}
	}
	return d, fmt.Errorf("process policy: unknown result %q", d.Result)
}

// refusedEntry is the ledger entry of a command the policy refused: what
// it judged, and, for a sandbox's process, the directory and the names
// (never the values) of the variables it was given.
func refusedEntry(c commandCheck, d policy.ProcessDecision) map[string]any {
	e := map[string]any{"command": clipText(c.command, MaxApprovalCommandBytes), "rule": d.Rule, "pattern": d.Pattern, "piece": d.Piece, "reason": d.Reason}
	if len(c.env) > 0 {
		e["env"] = slices.Sorted(maps.Keys(c.env))
	}
	if c.cwd != "" {
		e["cwd"] = c.cwd
	}
	return e
}

// gateWrite is the gate step of a file write or delete of path: the
// session's work slot (a restore or fork waits for it), then, on the
// machine the write will reach, the read-only workspace's refusal
// (refuseReadOnly) and the lists the agent checks the write against
// (guardFor).
func gateWrite(path string, g *guarded) pipeStep {
	return pipeStep{StepGate, func(ctx context.Context, p *pipe) error {
		done, err := p.m.commandStarts(p.cmd.Session)
		if err != nil {
			return err
		}
		p.after = append(p.after, done)
		if err := refuseReadOnly(ctx, p.cl, p.s, path); err != nil {
			return err
		}
		*g = guardFor(p.s)
		return nil
	}}
}
