package session

// The pipeline as the siblings see it: a sibling that starts a command
// in a sandbox (a terminal, a git verb) or changes its files (a write, a
// delete, an upload's completion) walks the same named steps as the
// core's own entries, with the stock steps the core exports and steps of
// its own.
// See pipeline.go for the order and what a walk gives back when it stops.

import (
	"context"
	"sync"

	"paddock.dev/paddock/guest/client"
)

// PipeStep is one named step of a command's walk (StepLoad, StepJudge, ...).
type PipeStep = pipeStep

// Pipe is a sibling's view of one command's walk.
type Pipe struct{ p *pipe }

// Command is what the command hooks see; a step before the hooks fills
// it (its Text, Verb, Confine), never one after.
func (x Pipe) Command() *Command { return x.p.cmd }

// Session is the session the load step found (nil before it).
func (x Pipe) Session() *Session { return x.p.s }

// Guest is the guest client of the session's machine (nil before load).
func (x Pipe) Guest() *client.Client { return x.p.cl }

// OnUndo adds what to give back if the walk stops before the command
// starts (a slot a step took, a count).
func (x Pipe) OnUndo(f func()) { x.p.undo = append(x.p.undo, f) }

// Started says the run step started the command in the guest: what the
// steps took stays taken (undo is not run), and record follows even if a
// later step fails.
func (x Pipe) Started() { x.p.ran, x.p.kept = true, true }

// WithNotes adds what the hooks annotated to a ledger entry.
func (x Pipe) WithNotes(entry map[string]any) map[string]any { return x.p.withNotes(entry) }

// LoadRunning is the load step's work, for a sibling whose load step
// checks more (a git verb's repository): the session, running, its
// machine's guest client and the confinement its commands run under
// (404, 409).
func (x Pipe) LoadRunning(ctx context.Context) error { return loadRunning().fn(ctx, x.p) }

// RunBegan says the run step has begun in the guest (a git verb's first
// git): record and usage follow even if a later step fails, but what the
// steps took is still given back unless Keep is called.
func (x Pipe) RunBegan() { x.p.ran = true }

// Keep says what the steps took stays taken (the command's unit is
// spent), whatever happens next.
func (x Pipe) Keep() { x.p.kept = true }

// Kept reports whether Keep (or Started) was called.
func (x Pipe) Kept() bool { return x.p.kept }

// Err is the walk's first error, for record and usage to see (nil while
// the walk goes well).
func (x Pipe) Err() error { return x.p.err }

// AtEnd adds what to run when the walk ends, whatever happened (a work
// slot to give back).
func (x Pipe) AtEnd(f func()) { x.p.after = append(x.p.after, f) }

// Answered says a step gave the answer already (an upload completed
// before): the walk ends after this step, successfully.
func (x Pipe) Answered() { x.p.answered = true }

// Admit is AdmitStep's work, for a sibling whose admit step does more
// (a git commit names itself in the budget's refusal): the limits
// checked, the unit taken (given back if the walk stops before Keep),
// the caps in Admission.
func (x Pipe) Admit(ctx context.Context, what Start, timeout int) error {
	return admitStep(what, timeout).fn(ctx, x.p)
}

// NewStep makes a step named name (one of the Step… names, at its place
// in the order) of fn.
func NewStep(name string, fn func(ctx context.Context, p Pipe) error) PipeStep {
	return pipeStep{name, func(ctx context.Context, p *pipe) error { return fn(ctx, Pipe{p}) }}
}

// LoadRunningStep is the load step of a command on a running session:
// the session and its machine's guest client (404, 409).
func LoadRunningStep() PipeStep { return loadRunning() }

// AdmitStep is the admit step of a command or job (what) with timeout:
// the session's budget, through the budgets service (see Budgets). What
// it took goes back if the walk stops before the command starts; the
// later steps read the answer with Pipe.Admission.
func AdmitStep(what Start, timeout int) PipeStep { return admitStep(what, timeout) }

// Admission is what the admit step allowed (nil before it, or for a walk
// without one).
func (x Pipe) Admission() *Admission { return x.p.adm }

// HooksStep is the hooks step: every command hook; a refusal is ledgered
// as <ledgerKind>.refused.
func HooksStep(ledgerKind string) PipeStep { return runHooks(ledgerKind) }

// Walk runs a command of kind on session id (as the caller with tenant
// sees it) through steps, in order (see pipeline.go).
func (m *Manager) Walk(ctx context.Context, kind CommandKind, tenant, id string, steps ...PipeStep) error {
	return m.newPipe(ctx, kind, tenant, id).walk(ctx, steps...)
}

// WalkVerb is Walk for a command whose Verb and Text are known before
// its first step: a file change (verb write, delete or upload, text the
// path) or a git verb (text "git <verb>").
func (m *Manager) WalkVerb(ctx context.Context, kind CommandKind, tenant, id, verb, text string, steps ...PipeStep) error {
	p := m.newPipe(ctx, kind, tenant, id)
	p.cmd.Verb, p.cmd.Text = verb, text
	return p.walk(ctx, steps...)
}

// WorkSlot takes session id's work slot, as a command does: a checkpoint,
// restore or fork in progress refuses it (409), and a restore or fork
// waits for it or refuses while it is held. done gives it back.
func (m *Manager) WorkSlot(id string) (done func(), err error) { return m.commandStarts(id) }

// GuestError is the error a caller gets for a guest agent's: its refusal
// with the same kind, or 502.
func GuestError(err error) error { return guestErr(err) }

// BudgetLimitsCommands reports whether budget b limits the session's
// commands (what a terminal would walk around).
func BudgetLimitsCommands(b *Budget) bool { return budgetLimitsCommands(b) }

// TraceSteps has fn told every step every command starts (tests only;
// nil stops it).
func (m *Manager) TraceSteps(fn func(kind CommandKind, step string)) {
	m.cmds.mu.Lock()
	defer m.cmds.mu.Unlock()
	m.cmds.trace = fn
}

// A BusyCheck refuses op (restore, fork) on session id while the
// sibling holds something of the session's machine (a terminal open on
// it), with the error the caller gets.
type BusyCheck func(id, op string) error

// AddBusyCheck adds a check every restore and fork runs before it
// replaces a session's machine. Add checks before the daemon serves.
func (m *Manager) AddBusyCheck(c BusyCheck) {
	m.sib.mu.Lock()
	defer m.sib.mu.Unlock()
	m.sib.busy = append(m.sib.busy, c)
}

// OnShutdown adds f to what Shutdown and Detach run first, before any
// sandbox stops (a sibling closes what it has open on them).
func (m *Manager) OnShutdown(f func()) {
	m.sib.mu.Lock()
	defer m.sib.mu.Unlock()
	m.sib.shutdown = append(m.sib.shutdown, f)
}

// siblingHooks are the busy checks and shutdown hooks siblings added.
type siblingHooks struct {
	mu       sync.RWMutex
	busy     []BusyCheck
	shutdown []func()
}

// busyBySibling is the first busy check's refusal of op on id.
func (m *Manager) busyBySibling(id, op string) error {
	m.sib.mu.RLock()
	checks := m.sib.busy
	m.sib.mu.RUnlock()
	for _, c := range checks {
		if err := c(id, op); err != nil {
			return err
		}
	}
	return nil
}

// runShutdownHooks runs the siblings' shutdown hooks.
func (m *Manager) runShutdownHooks() {
	m.sib.mu.RLock()
	hooks := m.sib.shutdown
	m.sib.mu.RUnlock()
	for _, f := range hooks {
		f()
	}
}
