// Package approvals is the sessions' approval requests: a command the
// process policy holds (an ask rule) waits for an operator to approve or
// deny it, and an approved request runs that one command once. The
// session core's judge and spend steps call the Service through the
// session.Approvals interface (hostd/daemon sets it with
// Manager.SetApprovals); hostd/api serves its List and Decide.
package approvals

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
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/policy"
)

// Limits of the approval flow.
const (
	MaxApprovalWaitSeconds  = session.MaxApprovalWaitSeconds
	MaxPendingApprovals     = 64   // live pending requests per session
	MaxApprovalRows         = 1024 // requests kept per session; decided and expired ones older than a day are pruned first
	MaxApprovalNoteBytes    = 512
	MaxApprovalCommandBytes = session.MaxApprovalCommandBytes // of a command, kept in the request and its ledger entries (the digest binds all of it)
)

// Service is the approval requests of a Manager's sessions.
type Service struct {
	m       *session.Manager
	waiters approvalWaiters
}

// New makes the approvals service of m. hostd/daemon registers it with
// m.SetApprovals.
func New(m *session.Manager) *Service { return &Service{m: m} }

var _ session.Approvals = (*Service)(nil)

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

// digestFor binds a command to s as it is now: its policy and revision.
func digestFor(s *session.Session, c session.ApprovalCheck) string {
	return held{Session: s.ID, Kind: c.Kind, Command: c.Command, Params: c.Params, Process: s.Policy.Process,
		Network: s.Policy.NetworkSummary, Revision: s.Revision}.digest()
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

// Request files (or finds) the request for a command the policy held
// with decision d: a *Hold (428), or, when c.Wait is set, the approved
// request's id once an operator approves it (waiting without holding
// anything of the session). It is session.Approvals' Request.
func (a *Service) Request(ctx context.Context, s *session.Session, c session.ApprovalCheck, d policy.ProcessDecision) (string, error) {
	m := a.m
	matched := d.Rule
	if d.Pattern != "" {
		matched += ": " + d.Pattern
	}
	if len(c.Command) > MaxApprovalCommandBytes {
		// The request keeps this much of a command; approving the rest
		// unseen would defeat the approval.
		return "", errdefs.WithCode(errdefs.CodeApprovalCommandTooLong, fmt.Errorf(
			"%w: the command needs approval and is %d bytes, longer than the %d an approval request keeps for the approver to read: shorten it (run a script file instead)",
			session.ErrConflict, len(c.Command), MaxApprovalCommandBytes))
	}
	digest := digestFor(s, c)
	now := m.Now().UTC()
	caller, err := session.CallerOf(ctx)
	if err != nil {
		return "", err
	}
	pol := m.Policy()
	if pol == nil {
		return "", fmt.Errorf("%w: this daemon has no policy engine", session.ErrConflict)
	}
	req, err := pol.Approval(ctx, policy.ApprovalInput{Action: "request", Actor: caller, SessionTenant: s.Tenant, Requester: caller})
	if err != nil {
		return "", fmt.Errorf("approval policy: %w", err)
	}
	ttl := req.TTL
	if ttl <= 0 || ttl > time.Hour {
		ttl = 10 * time.Minute
	}
	row, created, err := m.Store().PutApproval(ctx, store.ApprovalRow{
		ID: newApprovalID(), SessionID: s.ID, Kind: c.Kind, Digest: digest, Command: c.Command,
		Summary: session.ClipText(c.Kind+": "+c.Command, 200), Matched: matched, Requester: session.ActorString(caller),
		CreatedAt: now, ExpiresAt: now.Add(ttl),
	}, now, MaxPendingApprovals, MaxApprovalRows)
	switch {
	case errors.Is(err, store.ErrApprovalLimit):
		return "", fmt.Errorf("%w: session %s has as many approval requests as it may keep (%d waiting at once, %d in all); decide the waiting ones first", session.ErrConflict, s.ID, MaxPendingApprovals, MaxApprovalRows)
	case errors.Is(err, store.ErrNotFound):
		return "", fmt.Errorf("%w: session %s", session.ErrNotFound, s.ID)
	case err != nil:
		return "", err
	}
	if created {
		m.LedgerAppend(ctx, s.ID, "approval.requested", map[string]any{"approval": row.ID, "kind": c.Kind, "command": row.Command, "matched": matched, "expires_at": row.ExpiresAt})
	}
	hold := &Hold{ApprovalID: row.ID, Summary: row.Summary, Matched: row.Matched, ExpiresAt: row.ExpiresAt}
	if c.Wait <= 0 {
		return "", hold
	}
	// Wait for the decision, holding nothing of the session.
	ch, cancel := a.waiters.wait(row.ID)
	defer cancel()
	timer := time.NewTimer(min(c.Wait, time.Until(row.ExpiresAt)))
	defer timer.Stop()
	// A decision wakes the wait; the tick notices what does not (the
	// session deleted or expired meanwhile).
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		cur, err := m.Store().GetApproval(ctx, s.ID, row.ID)
		if errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("%w: session %s ended while the command waited for approval", session.ErrConflict, s.ID)
		}
		if err != nil {
			return "", err
		}
		switch {
		case cur.State == store.ApprovalApproved && !cur.Expired(m.Now()):
			return row.ID, nil
		case cur.State != store.ApprovalPending || cur.Expired(m.Now()):
			return "", a.spend(ctx, s.ID, row.ID, digest, c.Command) // says why it cannot run
		}
		if cur, err := m.Load(ctx, "", s.ID); err != nil || cur.State != session.StateRunning {
			return "", fmt.Errorf("%w: session %s is no longer running; the command waited for approval and will not run", session.ErrConflict, s.ID)
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-timer.C:
			return "", hold
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Spend consumes approval id for command c as bound to s now (its policy
// and revision), or says (403) why it cannot. It is session.Approvals'
// Spend.
func (a *Service) Spend(ctx context.Context, s *session.Session, id string, c session.ApprovalCheck) error {
	return a.spend(ctx, s.ID, id, digestFor(s, c), c.Command)
}

// GiveBack returns approval id, spent by Spend for command c, to its
// approved state: the command did not start (a command hook refused it,
// or the guest refused to start it), so the operator's decision still
// stands for a retry. It is session.Approvals' GiveBack.
func (a *Service) GiveBack(ctx context.Context, s *session.Session, id string, c session.ApprovalCheck) error {
	m := a.m
	if err := m.Store().ReturnApproval(ctx, s.ID, id); err != nil {
		return err
	}
	m.LedgerAppend(ctx, s.ID, "approval.returned", map[string]any{"approval": id, "command": session.ClipText(c.Command, MaxApprovalCommandBytes),
		"reason": "the command did not start"})
	return nil
}

// spend consumes an approval for the command with digest, or says (403)
// why it cannot: denied, expired, used, or bound to something else.
func (a *Service) spend(ctx context.Context, sess, id, digest, command string) error {
	m := a.m
	row, err := m.Store().ConsumeApproval(ctx, sess, id, digest, m.Now().UTC())
	if err == nil {
		m.LedgerAppend(ctx, sess, "approval.consumed", map[string]any{"approval": id, "command": command})
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
	case row.Expired(m.Now()):
		why = "it expired at " + row.ExpiresAt.Format(time.RFC3339)
	case row.State == store.ApprovalPending:
		why = "no operator has approved it yet"
	case row.Digest != digest:
		why = "it was given for another command, other parameters, another policy or an earlier revision of the session"
	default:
		why = "it is " + row.State
	}
	m.LedgerAppend(ctx, sess, "approval.refused", map[string]any{"approval": id, "command": command, "reason": why})
	return fmt.Errorf("%w: approval %s cannot run this command: %s", session.ErrForbidden, id, why)
}

// List lists a session's approval requests, oldest first.
func (a *Service) List(ctx context.Context, tenant, id string) ([]Approval, error) {
	m := a.m
	if _, err := m.Load(ctx, tenant, id); err != nil {
		return nil, err
	}
	rows, err := m.Store().ListApprovals(ctx, id)
	if err != nil {
		return nil, err
	}
	now := m.Now()
	out := make([]Approval, 0, len(rows))
	for _, r := range rows {
		out = append(out, approvalOut(r, now))
	}
	return out, nil
}

// Decide approves or denies a pending request, if the approval policy lets
// the caller decide.
func (a *Service) Decide(ctx context.Context, tenant, id, approval string, approve bool, req Decision) (*Approval, error) {
	// Who decides is known before anything is looked at (a zero Service
	// refuses a call with no caller too).
	who, err := session.CallerOf(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.Note) > MaxApprovalNoteBytes || strings.ContainsFunc(req.Note, func(r rune) bool { return r < 0x20 && r != '\t' }) {
		return nil, session.BadRequest("note must be at most %d bytes, without control characters", MaxApprovalNoteBytes)
	}
	m := a.m
	s, err := m.Load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	row, err := m.Store().GetApproval(ctx, id, approval)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: approval %s of session %s", session.ErrNotFound, approval, id)
	}
	if err != nil {
		return nil, err
	}
	pol := m.Policy()
	if pol == nil {
		return nil, fmt.Errorf("%w: this daemon has no policy engine", session.ErrConflict)
	}
	pd, err := pol.Approval(ctx, policy.ApprovalInput{Action: "decide", Actor: who, SessionTenant: s.Tenant, Requester: session.ParseActor(row.Requester)})
	if err != nil {
		return nil, fmt.Errorf("approval policy: %w", err)
	}
	if !pd.Allow {
		return nil, fmt.Errorf("%w: %s may not decide approval requests (%s): %s", session.ErrForbidden, session.ActorString(who), pd.Rule, pd.Reason)
	}
	state, kind := store.ApprovalDenied, "approval.denied"
	if approve {
		state, kind = store.ApprovalApproved, "approval.approved"
	}
	now := m.Now().UTC()
	out, err := m.Store().DecideApproval(ctx, id, approval, state, session.ActorString(who), req.Note, now)
	if errors.Is(err, store.ErrApprovalState) {
		st := approvalOut(out, now).State
		return nil, fmt.Errorf("%w: approval %s is %s; only a pending request can be decided", session.ErrConflict, approval, st)
	}
	if err != nil {
		return nil, err
	}
	m.LedgerAppend(ctx, id, kind, map[string]any{"approval": approval, "command": row.Command, "approver": session.ActorString(who), "note": req.Note, "rule": pd.Rule})
	a.waiters.wake(approval)
	ao := approvalOut(out, now)
	return &ao, nil
}

func newApprovalID() string {
	var b [8]byte
	rand.Read(b[:])
	return "apr-" + hex.EncodeToString(b[:])
}
