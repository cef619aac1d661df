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

	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/policy"
)

// Limits of the approval flow.
const (
	MaxApprovalWaitSeconds = 120 // approval_wait_seconds
	MaxPendingApprovals    = 64  // live pending requests per session
	MaxApprovalNoteBytes   = 512
)

// ErrApprovalRequired is wrapped by a Hold: the command waits for an
// operator's decision (428).
var ErrApprovalRequired = errors.New("approval required")

// Hold answers a command that matched an ask rule: it did not run, and
// ApprovalID names the request an operator decides.
type Hold struct {
	ApprovalID string    `json:"approval_id"`
	Summary    string    `json:"summary"`
	Matched    string    `json:"matched"`
	ExpiresAt  time.Time `json:"expires_at"`
}

func (h *Hold) Error() string {
	return fmt.Sprintf("%s: %s matched %s; an operator must approve request %s (POST .../approvals/%s/approve), then retry with approval_id, before %s",
		ErrApprovalRequired, h.Summary, h.Matched, h.ApprovalID, h.ApprovalID, h.ExpiresAt.Format(time.RFC3339))
}

func (h *Hold) Unwrap() error { return ErrApprovalRequired }

// Approval is an approval request as the API shows it.
type Approval struct {
	ID         string     `json:"id"`
	Session    string     `json:"session"`
	Kind       string     `json:"kind"`
	Command    string     `json:"command"`
	Summary    string     `json:"summary"`
	Matched    string     `json:"matched"`
	State      string     `json:"state"` // pending, approved, denied, consumed, expired
	Requester  string     `json:"requester"`
	Decider    string     `json:"decider,omitempty"`
	Note       string     `json:"note,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	DecidedAt  *time.Time `json:"decided_at,omitempty"`
	ConsumedAt *time.Time `json:"consumed_at,omitempty"`
}

// Decision is the body of POST .../approvals/{approval}/approve and /deny.
type Decision struct {
	Note string `json:"note,omitempty"`
}

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

// judge asks the process policy about a command before it starts. Allowed:
// the decision (for the ledger entry of the run). Denied: 403, ledgered as
// <kind>.refused. Held: a *Hold (428), unless the call came with an
// approval that the command's digest can spend, or waits for an operator's
// decision (without taking the session's work slot: nothing has started).
func (m *Manager) judge(ctx context.Context, s *Session, c commandCheck) (policy.ProcessDecision, error) {
	rules := policy.ProcessRules{}
	if s.Policy.Process != nil {
		rules = *s.Policy.Process
	}
	if m.policy == nil {
		if s.Policy.Process != nil {
			return policy.ProcessDecision{}, fmt.Errorf("%w: this daemon has no policy engine, and the session has process rules", ErrConflict)
		}
		if c.approvalID != "" {
			return policy.ProcessDecision{}, bad("approval_id given, but the session has no process rules to ask for approval")
		}
		return policy.ProcessDecision{Result: policy.Allow, Rule: "process.default"}, nil
	}
	d, err := m.policy.Process(ctx, policy.ProcessInput{Session: s.ID, Kind: c.kind, Command: c.command, Rules: rules})
	if err != nil {
		return d, fmt.Errorf("process policy: %w", err)
	}
	refusedKind := c.kind + ".refused"
	switch d.Result {
	case policy.Allow:
		if c.approvalID != "" {
			return d, bad("approval_id given, but the policy allows this command without approval (%s)", d.Rule)
		}
		return d, nil
	case policy.Deny:
		m.ledgerAppend(ctx, s.ID, refusedKind, map[string]any{"command": c.command, "rule": d.Rule, "pattern": d.Pattern, "piece": d.Piece, "reason": d.Reason})
		return d, &ProcessRefused{Decision: d}
	case policy.Ask:
	default:
		return d, fmt.Errorf("process policy: unknown result %q", d.Result)
	}

	h := held{Session: s.ID, Kind: c.kind, Command: c.command, Params: c.params, Process: s.Policy.Process,
		Network: s.Policy.Summary, Revision: s.Revision}
	digest := h.digest()
	matched := d.Rule
	if d.Pattern != "" {
		matched += ": " + d.Pattern
	}
	if c.approvalID != "" {
		return d, m.spend(ctx, s.ID, c.approvalID, digest, c.command)
	}

	now := m.now().UTC()
	req, err := m.policy.Approval(ctx, policy.ApprovalInput{Action: "request", Actor: callerOf(ctx), SessionTenant: s.Tenant, Requester: callerOf(ctx)})
	if err != nil {
		return d, fmt.Errorf("approval policy: %w", err)
	}
	ttl := req.TTL
	if ttl <= 0 || ttl > time.Hour {
		ttl = 10 * time.Minute
	}
	row, created, err := m.st.PutApproval(ctx, store.ApprovalRow{
		ID: newApprovalID(), SessionID: s.ID, Kind: c.kind, Digest: digest, Command: c.command,
		Summary: clipText(c.kind+": "+c.command, 200), Matched: matched, Requester: actorString(callerOf(ctx)),
		CreatedAt: now, ExpiresAt: now.Add(ttl),
	}, now, MaxPendingApprovals)
	if errors.Is(err, store.ErrApprovalLimit) {
		return d, fmt.Errorf("%w: session %s has %d approval requests waiting; decide some first", ErrConflict, s.ID, MaxPendingApprovals)
	}
	if err != nil {
		return d, err
	}
	if created {
		m.ledgerAppend(ctx, s.ID, "approval.requested", map[string]any{"approval": row.ID, "kind": c.kind, "command": c.command, "matched": matched, "expires_at": row.ExpiresAt})
	}
	hold := &Hold{ApprovalID: row.ID, Summary: row.Summary, Matched: row.Matched, ExpiresAt: row.ExpiresAt}
	if c.wait <= 0 {
		return d, hold
	}
	// Wait for the decision, held open without the session's work slot.
	ch, cancel := m.approvals.wait(row.ID)
	defer cancel()
	timer := time.NewTimer(min(c.wait, time.Until(row.ExpiresAt)))
	defer timer.Stop()
	for {
		cur, err := m.st.GetApproval(ctx, s.ID, row.ID)
		if err != nil {
			return d, err
		}
		switch {
		case cur.State == store.ApprovalApproved:
			return d, m.spend(ctx, s.ID, row.ID, digest, c.command)
		case cur.State != store.ApprovalPending || cur.Expired(m.now()):
			return d, m.spend(ctx, s.ID, row.ID, digest, c.command) // says why it cannot run
		}
		select {
		case <-ch:
		case <-timer.C:
			return d, hold
		case <-ctx.Done():
			return d, ctx.Err()
		}
	}
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

func (e *ProcessRefused) Unwrap() error { return ErrForbidden }

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
	who := callerOf(ctx)
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
