package session

// The judge and spend steps' side of approvals. The approval requests
// themselves (filing, waiting, deciding, spending) are the sibling
// package hostd/approvals; the core asks it through the Approvals
// interface, which hostd/daemon sets with SetApprovals.

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/policy"
)

// Limits of the approval flow the core checks itself.
const (
	MaxApprovalWaitSeconds  = apiv1.MaxApprovalWaitSeconds
	MaxApprovalCommandBytes = 4096 // of a command, kept in an approval request and in ledger entries
)

// ErrApprovalRequired is wrapped by a Hold (api.Hold): the command waits
// for an operator's decision (428).
var ErrApprovalRequired = errdefs.ErrApprovalRequired

// Hold is the 428 answer of a command held for approval.
type Hold = apiv1.Hold

// ApprovalCheck is a command the process policy holds for an operator,
// as the approvals service sees it.
type ApprovalCheck struct {
	Kind    string // policy.KindExec or policy.KindJob
	Command string
	Params  map[string]any
	// Wait is how long the caller waits for a decision (0: answer with
	// a Hold at once).
	Wait time.Duration
}

// Approvals is the approval flow the judge and spend steps call
// (hostd/approvals implements it).
type Approvals interface {
	// Request files (or finds) the request for a command the policy held
	// with decision d on session s and answers a *Hold, or, when c.Wait
	// is set, waits for the decision without holding anything of the
	// session and gives back the approved request's id.
	Request(ctx context.Context, s *Session, c ApprovalCheck, d policy.ProcessDecision) (approvalID string, err error)
	// Spend consumes approval id for command c as bound to s now, or
	// says (403) why it cannot. It is a compare-and-set: of two calls
	// with one approval, one gets it.
	Spend(ctx context.Context, s *Session, id string, c ApprovalCheck) error
	// GiveBack returns approval id, which Spend consumed for c, to its
	// approved state: the command did not start after all.
	GiveBack(ctx context.Context, s *Session, id string, c ApprovalCheck) error
}

type approvalsSlot struct {
	mu sync.RWMutex
	a  Approvals
}

// SetApprovals gives the Manager the approvals service. Set it before the
// daemon serves. Without one, a command the policy holds for an operator
// is refused (409) and an approval_id is refused (403): nothing the
// policy holds runs without an operator's decision recorded.
func (m *Manager) SetApprovals(a Approvals) {
	m.appr.mu.Lock()
	defer m.appr.mu.Unlock()
	m.appr.a = a
}

func (m *Manager) approvalsService() Approvals {
	m.appr.mu.RLock()
	defer m.appr.mu.RUnlock()
	return m.appr.a
}

// commandCheck is what judge needs to know of a command about to start.
type commandCheck struct {
	kind       string // policy.KindExec or policy.KindJob
	command    string
	params     map[string]any
	approvalID string
	wait       time.Duration
	// env and cwd are what a sandbox's process is given besides its text
	// (the policy sees them; exec and jobs have none).
	env map[string]string
	cwd string
}

func (c commandCheck) approvalCheck() ApprovalCheck {
	return ApprovalCheck{Kind: c.kind, Command: c.command, Params: c.params, Wait: c.wait}
}

// verdict is judge's answer for a command that may go ahead: the decision
// (for the run's ledger entry) and, when the command needed approval, the
// approved request it must spend once it holds the session (spendFor).
type verdict struct {
	decision policy.ProcessDecision
	check    commandCheck
	approval string
}

// judge asks the process policy about a command before it starts. Allowed:
// a verdict without an approval. Denied: 403, ledgered as <kind>.refused.
// Held: the approvals service files the request and answers a *Hold
// (428), unless the call names an approval (the verdict carries it, to be
// spent by spendFor once the command holds the session) or waits for an
// operator's decision, without the session's work slot.
func (m *Manager) judge(ctx context.Context, s *Session, c commandCheck) (*verdict, error) {
	d, err := m.decide(ctx, s, c)
	if err != nil {
		return nil, err
	}
	v := &verdict{check: c, decision: d}
	if m.policy == nil {
		if c.approvalID != "" {
			return nil, bad("approval_id given, but the session has no process rules to ask for approval")
		}
		return v, nil
	}
	if d.Result == policy.Allow {
		if c.approvalID != "" {
			return nil, bad("approval_id given, but the policy allows this command without approval (%s)", d.Rule)
		}
		return v, nil
	}
	if c.approvalID != "" {
		v.approval = c.approvalID
		return v, nil
	}
	a := m.approvalsService()
	if a == nil {
		return nil, fmt.Errorf("%w: the policy holds this command for an operator, and this daemon has no approvals service", ErrConflict)
	}
	id, err := a.Request(ctx, s, c.approvalCheck(), d)
	if err != nil {
		return nil, err
	}
	v.approval = id // spent once the command holds the session
	return v, nil
}

// spendFor spends v's approval, if it has one, for the command as bound
// to s now: called once the command holds the session (so no checkpoint,
// restore or fork can slip in between) and its budget is admitted, with s
// read again after that, so an approval given at an earlier revision
// (a restore or checkpoint meanwhile) is refused, not run.
func (m *Manager) spendFor(ctx context.Context, s *Session, v *verdict) error {
	if v == nil || v.approval == "" {
		return nil
	}
	a := m.approvalsService()
	if a == nil {
		return fmt.Errorf("%w: approval %s cannot run this command: this daemon has no approvals service", ErrForbidden, v.approval)
	}
	return a.Spend(ctx, s, v.approval, v.check.approvalCheck())
}

// giveBack returns v's approval, spent by spendFor, to the approvals
// service: the walk stopped before the command started. A failure is
// logged: the approval then stays spent, which fails safe.
func (m *Manager) giveBack(ctx context.Context, s *Session, v *verdict) {
	a := m.approvalsService()
	if a == nil || v == nil || v.approval == "" {
		return
	}
	if err := a.GiveBack(ctx, s, v.approval, v.check.approvalCheck()); err != nil {
		m.log.Warn("give an approval back", "session", s.ID, "approval", v.approval, "err", err)
	}
}

// AwaitApproval waits (up to wait) for an operator to decide a command
// that needs approval, holding nothing of the session, and returns the
// approved request's id for the caller to run the command with; "" when
// the command needs none. exec/stream waits here before it takes a stream.
// It walks the first steps of a job start (validate, load, judge: the
// same step functions), as an exec/stream, so the command is judged here
// exactly as the start that follows judges it, and a trace sees it.
func (m *Manager) AwaitApproval(ctx context.Context, tenant, id string, req JobStart) (string, error) {
	p := m.newPipe(ctx, CommandStream, tenant, id)
	if err := p.walk(ctx, validateJob(p, req), loadRunning(), judgeCommand(jobCheck(req))); err != nil {
		return "", err
	}
	return p.v.approval, nil
}

// jobCheck is a job start as judge sees it.
func jobCheck(req JobStart) commandCheck {
	return commandCheck{kind: policy.KindJob, command: req.Command,
		params:     map[string]any{"timeout_seconds": req.TimeoutSeconds, "stdin": req.Stdin, "max_output_bytes": req.MaxOutputBytes},
		approvalID: req.ApprovalID, wait: time.Duration(req.ApprovalWaitSeconds) * time.Second}
}

// ProcessRefused is the 403 of a command the process policy denies.
type ProcessRefused struct {
	Decision policy.ProcessDecision
}

func (e *ProcessRefused) Error() string {
	d := e.Decision
	msg := fmt.Sprintf("%s: the session's process policy refuses this command (%s", ErrForbidden, d.Rule)
	if d.Pattern != "" {
		msg += fmt.Sprintf(" %q", d.Pattern)
	}
	if d.Piece != "" {
		msg += fmt.Sprintf(" on %q", d.Piece)
	}
	msg += ")"
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return msg
}

func (e *ProcessRefused) Unwrap() error { return errPolicyRefused }

// errPolicyRefused is what every ProcessRefused is: forbidden, with its
// own code.
var errPolicyRefused = errdefs.WithCode(errdefs.CodePolicyRefused, ErrForbidden)

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
