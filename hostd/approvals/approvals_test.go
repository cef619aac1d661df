package approvals

import (
	"context"
	"errors"
	"testing"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
	"paddock.dev/paddock/policy"
)

// fakeManager is a session Manager on the fake backend with the built-in
// policy (sessiontest's default), and this package's Service registered
// on it as hostd/daemon does.
func fakeManager(t *testing.T) (*session.Manager, *Service) {
	t.Helper()
	m := sessiontest.New(t)
	a := New(m)
	m.SetApprovals(a)
	return m, a
}

// TestDecideNoCallerIsNotAdmin: Decide with no verified caller in the context is
// refused (403) before anything is looked at, on a zero Service too, and
// never taken for the admin's: a real pending approval, which the admin
// could approve, stays pending after such a call.
func TestDecideNoCallerIsNotAdmin(t *testing.T) {
	var zero Service
	for _, approve := range []bool{true, false} {
		_, err := zero.Decide(context.Background(), "", "ses-0123456789abcdef", "apr-0123456789abcdef", approve, Decision{})
		if !errors.Is(err, session.ErrForbidden) {
			t.Errorf("deciding (approve=%v) with no caller: %v, want 403", approve, err)
		}
	}

	m, a := fakeManager(t)
	ctx := context.Background()
	acme := auth.WithIdentity(ctx, auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	s, err := m.Create(acme, "acme", session.CreateRequest{TTLSeconds: 600, Policy: &session.PolicyRequest{Process: &policy.ProcessRules{Ask: []string{"deploy*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Exec(acme, "acme", s.ID, session.ExecRequest{Command: "deploy now"})
	var h *session.Hold
	if !errors.As(err, &h) {
		t.Fatalf("exec of an ask command: %v, want a hold", err)
	}
	if _, err := a.Decide(ctx, "", s.ID, h.ApprovalID, true, Decision{}); !errors.Is(err, session.ErrForbidden) {
		t.Errorf("a decision with no caller: %v, want 403", err)
	}
	as, err := a.List(acme, "acme", s.ID)
	if err != nil || len(as) != 1 || as[0].State != "pending" {
		t.Errorf("the approval after a decision with no caller: %+v %v, want it pending", as, err)
	}
	// The admin can decide it: the refusal above was for the caller.
	if _, err := a.Decide(auth.WithIdentity(ctx, auth.Admin()), "", s.ID, h.ApprovalID, true, Decision{}); err != nil {
		t.Errorf("the admin's decision: %v", err)
	}
	// And the approved request runs the command once, through the core's
	// spend step calling this service.
	if _, err := m.Exec(acme, "acme", s.ID, session.ExecRequest{Command: "deploy now", ApprovalID: h.ApprovalID}); err != nil {
		t.Errorf("exec with the approved request: %v", err)
	}
	if _, err := m.Exec(acme, "acme", s.ID, session.ExecRequest{Command: "deploy now", ApprovalID: h.ApprovalID}); !errors.Is(err, session.ErrForbidden) {
		t.Errorf("exec with the request used already: %v, want 403", err)
	}
}
