package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/policy"
)

// Limits of the approval flow.
const (
	MaxApprovalWaitSeconds  = apiv1.MaxApprovalWaitSeconds
	MaxPendingApprovals     = 64   // live pending requests per session
	MaxApprovalRows         = 1024 // requests kept per session; decided and expired ones older than a day are pruned first
	MaxApprovalNoteBytes    = 512
	MaxApprovalCommandBytes = 4096 // of a command, kept in the request and its ledger entries (the digest binds all of it)
)

// ErrApprovalRequired is wrapped by a Hold (api.Hold): the command waits
// for an operator's decision (428).
var ErrApprovalRequired = errdefs.ErrApprovalRequired

// The public wire types (package api), kept under these names here.
type (
	Hold     = apiv1.Hold
	Approval = apiv1.Approval
	Decision = apiv1.Decision
)

func approvalOut(a store.ApprovalRow, now time.Time) Approval {
	out := Approval{ID: a.ID, Session: a.SessionID, Kind: a.Kind, Command: a.Command, Summary: a.Summary,
		Matched: a.Matched, State: a.State, Requester: a.Requester, Decider: a.Decider, Note: a.Note,
		CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt}
	if a.Expired(now) {
		out.State = "expired"
	}
	if !a.DecidedAt.IsZero() {
		t := a.DecidedAt
		out.DecidedAt = &t
	}
	if !a.ConsumedAt.IsZero() {
		t := a.ConsumedAt
		out.ConsumedAt = &t
	}
	return out
}

// held is what binds an approval: the session, the kind, the exact
// command, its parameters, the policy and the session's revision (which a
// checkpoint, restore or fork changes).
type held struct {
	Session  string               `json:"session"`
	Kind     string               `json:"kind"`
	Command  string               `json:"command"`
	Params   map[string]any       `json:"params"`
	Process  *policy.ProcessRules `json:"process"`
	Network  any                  `json:"network"`
	Revision int64                `json:"revision"`
}

func (h held) digest() string {
	b, _ := json.Marshal(h)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// approvalWaiters wakes requests held open for a decision.
type approvalWaiters struct {
	mu sync.Mutex
	m  map[string][]chan struct{} // approval id → waiters
}

func (w *approvalWaiters) wait(id string) (ch chan struct{}, cancel func()) {
	ch = make(chan struct{}, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string][]chan struct{}{}
	}
	w.m[id] = append(w.m[id], ch)
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		list := w.m[id]
		for i, c := range list {
			if c == ch {
				w.m[id] = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(w.m[id]) == 0 {
			delete(w.m, id)
		}
	}
}

func (w *approvalWaiters) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.m[id] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// commandCheck is what judge needs to know of a command about to start.
type commandCheck struct {
	kind       string // policy.KindExec or policy.KindJob
	command    string
	params     map[string]any
	approvalID string
	wait       time.Duration
}

// verdict is judge's answer for a command that may go ahead: the decision
// (for the run's ledger entry) and, when the command needed approval, the
// approved request it must spend once it holds the session (spendFor).
type verdict struct {
	decision policy.ProcessDecision
	check    commandCheck
	approval string
}

// digestFor binds a command to s as it is now: its policy and revision.
func (c commandCheck) digestFor(s *Session) string {
	return held{Session: s.ID, Kind: c.kind, Command: c.command, Params: c.params, Process: s.Policy.Process,
		Network: s.Policy.NetworkSummary, Revision: s.Revision}.digest()
}

// judge asks the process policy about a command before it starts. Allowed:
// a verdict without an approval. Denied: 403, ledgered as <kind>.refused.
// Held: a *Hold (428), unless the call names an approval (the verdict
// carries it, to be spent by spendFor once the command holds the session)
// or waits for an operator's decision — without the session's work slot,
// since nothing has started.
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
	matched := d.Rule
	if d.Pattern != "" {
		matched += ": " + d.Pattern
	}
	digest := c.digestFor(s)
	now := m.now().UTC()
	caller, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	req, err := m.policy.Approval(ctx, policy.ApprovalInput{Action: "request", Actor: caller, SessionTenant: s.Tenant, Requester: caller})
	if err != nil {
		return nil, fmt.Errorf("approval policy: %w", err)
	}
	ttl := req.TTL
	if ttl <= 0 || ttl > time.Hour {
		ttl = 10 * time.Minute
	}
	row, created, err := m.st.PutApproval(ctx, store.ApprovalRow{
		ID: newApprovalID(), SessionID: s.ID, Kind: c.kind, Digest: digest, Command: clipText(c.command, MaxApprovalCommandBytes),
		Summary: clipText(c.kind+": "+c.command, 200), Matched: matched, Requester: actorString(caller),
		CreatedAt: now, ExpiresAt: now.Add(ttl),
	}, now, MaxPendingApprovals, MaxApprovalRows)
	switch {
	case errors.Is(err, store.ErrApprovalLimit):
		return nil, fmt.Errorf("%w: session %s has as many approval requests as it may keep (%d waiting at once, %d in all); decide the waiting ones first", ErrConflict, s.ID, MaxPendingApprovals, MaxApprovalRows)
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("%w: session %s", ErrNotFound, s.ID)
	case err != nil:
		return nil, err
	}
	if created {
		m.ledgerAppend(ctx, s.ID, "approval.requested", map[string]any{"approval": row.ID, "kind": c.kind, "command": row.Command, "matched": matched, "expires_at": row.ExpiresAt})
	}
	hold := &Hold{ApprovalID: row.ID, Summary: row.Summary, Matched: row.Matched, ExpiresAt: row.ExpiresAt}
	if c.wait <= 0 {
		return nil, hold
	}
	// Wait for the decision, holding nothing of the session.
	ch, cancel := m.approvals.wait(row.ID)
	defer cancel()
	timer := time.NewTimer(min(c.wait, time.Until(row.ExpiresAt)))
	defer timer.Stop()
	// A decision wakes the wait; the tick notices what does not (the
	// session deleted or expired meanwhile).
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		cur, err := m.st.GetApproval(ctx, s.ID, row.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: session %s ended while the command waited for approval", ErrConflict, s.ID)
		}
		if err != nil {
			return nil, err
		}
		switch {
		case cur.State == store.ApprovalApproved && !cur.Expired(m.now()):
			v.approval = row.ID // spent once the command holds the session
			return v, nil
		case cur.State != store.ApprovalPending || cur.Expired(m.now()):
			return nil, m.spend(ctx, s.ID, row.ID, digest, c.command) // says why it cannot run
		}
		if cur, _, err := m.load(ctx, "", s.ID); err != nil || cur.State != StateRunning {
			return nil, fmt.Errorf("%w: session %s is no longer running; the command waited for approval and will not run", ErrConflict, s.ID)
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-timer.C:
			return nil, hold
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
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
	return m.spend(ctx, s.ID, v.approval, v.check.digestFor(s), v.check.command)
}

// AwaitApproval waits (up to wait) for an operator to decide a command
// that needs approval, holding nothing of the session, and returns the
// approved request's id for the caller to run the command with; "" when
// the command needs none. exec/stream waits here before it takes a stream.
func (m *Manager) AwaitApproval(ctx context.Context, tenant, id string, req JobStart) (string, error) {
	if err := checkApprovalFields(req.ApprovalID, req.ApprovalWaitSeconds); err != nil {
		return "", err
	}
	s, _, _, err := m.running(ctx, tenant, id)
	if err != nil {
		return "", err
	}
	v, err := m.judge(ctx, s, jobCheck(req))
	if err != nil {
		return "", err
	}
	return v.approval, nil
}

// jobCheck is a job start as judge sees it.
func jobCheck(req JobStart) commandCheck {
	return commandCheck{kind: policy.KindJob, command: req.Command,
		params:     map[string]any{"timeout_seconds": req.TimeoutSeconds, "stdin": req.Stdin, "max_output_bytes": req.MaxOutputBytes},
		approvalID: req.ApprovalID, wait: time.Duration(req.ApprovalWaitSeconds) * time.Second}
}

// spend consumes an approval for the command with digest, or says (403)
// why it cannot: denied, expired, used, or bound to something else.
func (m *Manager) spend(ctx context.Context, session, id, digest, command string) error {
	row, err := m.st.ConsumeApproval(ctx, session, id, digest, m.now().UTC())
	if err == nil {
		m.ledgerAppend(ctx, session, "approval.consumed", map[string]any{"approval": id, "command": command})
		return nil
	}
	var why string
	switch {
	case errors.Is(err, store.ErrNotFound):
		why = "there is no such approval request on this session"
	case !errors.Is(err, store.ErrApprovalState):
		return err
	case row.State == store.ApprovalDenied:
		why = "it was denied"
		if row.Note != "" {
			why += " (" + row.Note + ")"
		}
	case row.State == store.ApprovalConsumed:
		why = "it was used already: an approval runs one command once"
	case row.Expired(m.now()):
		why = "it expired at " + row.ExpiresAt.Format(time.RFC3339)
	case row.State == store.ApprovalPending:
		why = "no operator has approved it yet"
	case row.Digest != digest:
		why = "it was given for another command, other parameters, another policy or an earlier revision of the session"
	default:
		why = "it is " + row.State
	}
	m.ledgerAppend(ctx, session, "approval.refused", map[string]any{"approval": id, "command": command, "reason": why})
	return fmt.Errorf("%w: approval %s cannot run this command: %s", ErrForbidden, id, why)
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

// Approvals lists a session's approval requests, oldest first.
func (m *Manager) Approvals(ctx context.Context, tenant, id string) ([]Approval, error) {
	if _, _, err := m.load(ctx, tenant, id); err != nil {
		return nil, err
	}
	rows, err := m.st.ListApprovals(ctx, id)
	if err != nil {
		return nil, err
	}
	now := m.now()
	out := make([]Approval, 0, len(rows))
	for _, r := range rows {
		out = append(out, approvalOut(r, now))
	}
	return out, nil
}

// Decide approves or denies a pending request, if the approval policy lets
// the caller decide.
func (m *Manager) Decide(ctx context.Context, tenant, id, approval string, approve bool, req Decision) (*Approval, error) {
	// Who decides is known before anything is looked at.
	who, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.Note) > MaxApprovalNoteBytes || strings.ContainsFunc(req.Note, func(r rune) bool { return r < 0x20 && r != '\t' }) {
		return nil, bad("note must be at most %d bytes, without control characters", MaxApprovalNoteBytes)
	}
	s, _, err := m.load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	row, err := m.st.GetApproval(ctx, id, approval)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: approval %s of session %s", ErrNotFound, approval, id)
	}
	if err != nil {
		return nil, err
	}
	if m.policy == nil {
		return nil, fmt.Errorf("%w: this daemon has no policy engine", ErrConflict)
	}
	pd, err := m.policy.Approval(ctx, policy.ApprovalInput{Action: "decide", Actor: who, SessionTenant: s.Tenant, Requester: parseActor(row.Requester)})
	if err != nil {
		return nil, fmt.Errorf("approval policy: %w", err)
	}
	if !pd.Allow {
		return nil, fmt.Errorf("%w: %s may not decide approval requests (%s): %s", ErrForbidden, actorString(who), pd.Rule, pd.Reason)
	}
	state, kind := store.ApprovalDenied, "approval.denied"
	if approve {
		state, kind = store.ApprovalApproved, "approval.approved"
	}
	now := m.now().UTC()
	out, err := m.st.DecideApproval(ctx, id, approval, state, actorString(who), req.Note, now)
	if errors.Is(err, store.ErrApprovalState) {
		st := approvalOut(out, now).State
		return nil, fmt.Errorf("%w: approval %s is %s; only a pending request can be decided", ErrConflict, approval, st)
	}
	if err != nil {
		return nil, err
	}
	m.ledgerAppend(ctx, id, kind, map[string]any{"approval": approval, "command": row.Command, "approver": actorString(who), "note": req.Note, "rule": pd.Rule})
	m.approvals.wake(approval)
	a := approvalOut(out, now)
	return &a, nil
}

func newApprovalID() string {
	var b [8]byte
	rand.Read(b[:])
	return "apr-" + hex.EncodeToString(b[:])
}

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
