package session

// More of the pipeline as the siblings see it (walk.go has the walk
// itself, AdmitStep and Pipe.Admission): the stock steps and the run's
// results that a sibling entry running a shell line or writing a file
// composes, as hostd/sandboxes does for a sandbox's process and
// fs/write. Each one is the core's own step under an exported name, so
// the sibling's entries judge, gate, admit and count exactly as exec and
// the files routes do.

import (
	"context"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/store"
)

// LoadCheckedStep is the load step of an entry with refusals of its own:
// check runs first (a sandbox route refusing a session's id, say, with
// its own message), then the load of LoadRunningStep.
func LoadCheckedStep(check func(ctx context.Context, tenant, id string) error) PipeStep {
	load := loadRunning()
	return pipeStep{StepLoad, func(ctx context.Context, p *pipe) error {
		if err := check(ctx, p.cmd.Tenant, p.cmd.Session); err != nil {
			return err
		}
		return load.fn(ctx, p)
	}}
}

// ProcessCheck is a shell line as the process policy judges it.
type ProcessCheck struct {
	Kind    string // policy.KindExec or policy.KindJob
	Command string
	// Params are what else the ledger and approvals see (timeout_seconds).
	Params map[string]any
	// Env and Cwd are the variables the command is given and the
	// directory it starts in (input.env and input.cwd of the policy).
	Env map[string]string
	Cwd string
}

// JudgeWithoutApprovalsStep is the judge step of an entry that has no
// approvals (a sandbox's process): the process policy decides on the
// check made when the step runs (after load, so it may read
// Pipe.Session); a command it would hold for an operator is refused
// (403), as one it denies is, and ledgered as <kind>.refused.
func JudgeWithoutApprovalsStep(check func(p Pipe) ProcessCheck) PipeStep {
	return pipeStep{StepJudge, func(ctx context.Context, p *pipe) error {
		c := check(Pipe{p})
		return judgeWithoutApprovals(commandCheck{kind: c.Kind, command: c.Command, params: c.Params, env: c.Env, cwd: c.Cwd}).fn(ctx, p)
	}}
}

// GateCommandStep is the gate step of a command: the session's work slot
// for as long as the walk lasts (a checkpoint, restore or fork in
// progress refuses it, 409; one that comes later waits for it).
func GateCommandStep() PipeStep { return gateCommand(false) }

// ExecResult is the answer for the guest's result of a command run under
// the walk's admission (its output cut to whole characters, and marked
// when the budget's cap cut it).
func (x Pipe) ExecResult(res *api.ExecResult) *ExecResult {
	var outCap int64
	if a := x.p.adm; a != nil {
		outCap = a.OutputCap
	}
	return execResult(res, outCap)
}

// ExecLedger is the ledger entry of such a command: command, exit code,
// duration, timeout, and what the caps cut.
func (x Pipe) ExecLedger(command string, out *ExecResult) map[string]any {
	if x.p.adm == nil {
		return execLedger(command, out, &Admission{})
	}
	return execLedger(command, out, x.p.adm)
}

// CountExec is the usage step's work for a command: the session's usage
// counts it (unless admit took its unit already) and the ms it ran.
func (x Pipe) CountExec(ms int64) {
	var n int64 = 1
	if x.p.adm != nil {
		n = x.p.adm.Untaken()
	}
	x.p.m.addUsage(x.p.cmd.Session, store.UsageRow{Execs: n, ExecMS: ms})
}

// GateWriteStep is the gate step of a change to a file at path: the
// session's work slot, and the refusal (403) of a path that would change
// a read-only workspace. The lists the agent checks the write against
// are WriteGuard's.
func GateWriteStep(path string) PipeStep {
	var g guarded
	return gateWrite(path, &g)
}

// RefuseReadOnly is GateWriteStep's refusal on its own, for a write of
// p in s that does not walk the pipeline yet (an upload's open) or whose
// gate does more (an upload's completion): 403 when p would change s's
// read-only workspace, as written or once the links on the way are
// followed through the guest c.
func RefuseReadOnly(ctx context.Context, c *client.Client, s *Session, p string) error {
	return refuseReadOnly(ctx, c, s, p)
}

// WriteGuard is what a write in s carries to the guest agent: the
// directories it must not change (a read-only workspace) and the
// execute list's programs, which no write may create or replace.
func WriteGuard(s *Session) (deny, exec []string) { return denyFor(s), execFor(s) }

// AdmitWriteStep is the admit step of a write of size() bytes (asked when
// the step runs, so the validate step may decode the content first; what
// names the write in a refusal): the budget's max_workspace_bytes (403).
func AdmitWriteStep(size func() int64, what string) PipeStep {
	return pipeStep{StepAdmit, func(ctx context.Context, p *pipe) error {
		return p.m.admitWrite(ctx, p.s, p.cl, size(), what)
	}}
}

// RefusedBeforeStart reports whether a guest client's error means the
// command never started (the agent refused it), as opposed to a call cut
// off on the way, after which it may have run.
func RefusedBeforeStart(err error) bool { return refusedBeforeStart(err) }

// RunCutOff is a run step's answer to its guest call's error err, for a
// call that changes the sandbox's files (a write, a delete, the
// completion that moves an upload into place). Unless the agent refused
// the call (a 4xx: nothing was done), the call may have done its work
// before it was cut off (the caller hung up, the agent went away), so, as
// with an exec cut off that way, the command counts as started, the
// record step follows, and CutOff says so. What the caller gets is
// GuestError(err).
func (x Pipe) RunCutOff(err error) error {
	if !refusedBeforeStart(err) {
		x.Started()
		x.p.cutOff, x.p.lost = true, clipText(err.Error(), 300)
	}
	return guestErr(err)
}

// CutOff reports whether RunCutOff found the run step's guest call cut
// off after it may have done its work: the record step then ledgers the
// verb's usual entry, marked by WithCutOff.
func (x Pipe) CutOff() bool { return x.p.cutOff }

// WithCutOff marks a ledger entry as the record of a call cut off
// (CutOff): "interrupted": true and "error", what cut it off. An entry of
// a call that was not cut off is returned as it is.
func (x Pipe) WithCutOff(entry map[string]any) map[string]any {
	if x.p.cutOff {
		entry["interrupted"], entry["error"] = true, x.p.lost
	}
	return entry
}

// JudgeCommandStep is exec's judge step for a shell line of a sibling's
// entry (a speculation): the process policy decides on c, and a command
// it holds for an operator waits for an approval (428 with the
// approval's id) unless approvalID names an approved one, which
// SpendApprovalStep then spends. A refusal is ledgered as exec's are.
func JudgeCommandStep(c ProcessCheck, approvalID string) PipeStep {
	return judgeCommand(commandCheck{kind: c.Kind, command: c.Command, params: c.Params, approvalID: approvalID, env: c.Env, cwd: c.Cwd})
}

// SpendApprovalStep is exec's spend step: the approval JudgeCommandStep
// matched is spent, bound to the session as it is now, and given back if
// the walk stops before the command starts.
func SpendApprovalStep() PipeStep { return spendApproval() }
