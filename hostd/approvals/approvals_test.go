package approvals

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"paddock.dev/paddock/errdefs"
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

// TestApprovalGivenBackWhenCommandDoesNotStart: an approval spent for a
// command that then does not start (a command hook refuses it; the guest
// refuses to start it, its working directory gone) is given back
// (approval.returned in the ledger), so the approved command runs on a
// retry, once: the run after it is refused as used. Of eight calls at
// once with one approval, exactly one runs.
func TestApprovalGivenBackWhenCommandDoesNotStart(t *testing.T) {
	m, a := fakeManager(t)
	ctx := context.Background()
	admin := auth.WithIdentity(ctx, auth.Admin())
	acme := auth.WithIdentity(ctx, auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	s, err := m.Create(acme, "acme", session.CreateRequest{TTLSeconds: 600, Policy: &session.PolicyRequest{Process: &policy.ProcessRules{Ask: []string{"deploy*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Exec(acme, "acme", s.ID, session.ExecRequest{Command: "pwd"})
	if err != nil {
		t.Fatal(err)
	}
	workspace := strings.TrimSpace(res.Stdout) // on the host: the fake backend's machine
	approve := func(cmd string) string {
		t.Helper()
		_, err := m.Exec(acme, "acme", s.ID, session.ExecRequest{Command: cmd})
		var h *session.Hold
		if !errors.As(err, &h) {
			t.Fatalf("exec of an ask command: %v, want a hold", err)
		}
		if _, err := a.Decide(admin, "", s.ID, h.ApprovalID, true, Decision{}); err != nil {
			t.Fatal(err)
		}
		return h.ApprovalID
	}
	id := approve("deploy now")
	var refuse atomic.Bool
	refuse.Store(true)
	m.AddCommandHook("not-yet", func(_ context.Context, c *session.Command) error {
		if refuse.Load() {
			return errors.New("not yet")
		}
		return nil
	})
	run := func() error {
		_, err := m.Exec(acme, "acme", s.ID, session.ExecRequest{Command: "deploy now", ApprovalID: id})
		return err
	}
	var hr *session.HookRefused
	if err := run(); !errors.As(err, &hr) {
		t.Fatalf("exec refused by a hook: %v", err)
	}
	refuse.Store(false)
	if err := os.Rename(workspace, workspace+".away"); err != nil {
		t.Fatal(err)
	}
	if err := run(); err == nil || errors.Is(err, session.ErrForbidden) {
		t.Errorf("exec with the workspace gone: %v, want the guest's refusal", err)
	}
	if err := os.Rename(workspace+".away", workspace); err != nil {
		t.Fatal(err)
	}
	if err := run(); err != nil {
		t.Fatalf("exec with the approval after two commands that did not start: %v", err)
	}
	if err := run(); !errors.Is(err, session.ErrForbidden) {
		t.Errorf("exec with the approval used: %v, want 403", err)
	}
	es, err := m.Events(ctx, "", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	returned := 0
	for _, e := range es {
		if e.Kind == "approval.returned" {
			returned++
		}
	}
	if returned != 2 {
		t.Errorf("%d approval.returned entries, want 2", returned)
	}

	// Eight calls at once with one approval: one runs, the others are
	// refused (the spend is a compare-and-set), and none gives back what
	// another spent.
	id = approve("deploy again")
	var wg sync.WaitGroup
	var ran, refused atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Exec(acme, "acme", s.ID, session.ExecRequest{Command: "deploy again", ApprovalID: id})
			switch {
			case err == nil:
				ran.Add(1)
			case errors.Is(err, session.ErrForbidden), errors.Is(err, session.ErrConflict):
				refused.Add(1)
			default:
				t.Errorf("a concurrent exec with one approval: %v", err)
			}
		}()
	}
	wg.Wait()
	if ran.Load() != 1 || refused.Load() != 7 {
		t.Errorf("8 concurrent execs with one approval: %d ran, %d refused; want 1 and 7", ran.Load(), refused.Load())
	}
}

// TestLongCommandIsNotHeldUnseen: a command that needs approval is held
// whole and shown whole in the approvals list up to what a request keeps;
// one longer than that is refused (409 approval_command_too_long) instead
// of held clipped, so no approver approves what they cannot read.
func TestLongCommandIsNotHeldUnseen(t *testing.T) {
	m, a := fakeManager(t)
	acme := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	s, err := m.Create(acme, "acme", session.CreateRequest{TTLSeconds: 600, Policy: &session.PolicyRequest{Process: &policy.ProcessRules{Ask: []string{"deploy*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	fits := "deploy " + strings.Repeat("x", MaxApprovalCommandBytes-len("deploy "))
	_, err = m.Exec(acme, "acme", s.ID, session.ExecRequest{Command: fits})
	var h *session.Hold
	if !errors.As(err, &h) {
		t.Fatalf("exec of a %d-byte ask command: %v, want a hold", len(fits), err)
	}
	long := "deploy " + strings.Repeat("y", 5000)
	_, err = m.Exec(acme, "acme", s.ID, session.ExecRequest{Command: long})
	if !errors.Is(err, session.ErrConflict) || errdefs.Code(err) != errdefs.CodeApprovalCommandTooLong {
		t.Errorf("exec of a %d-byte ask command: %v, want 409 %s", len(long), err, errdefs.CodeApprovalCommandTooLong)
	}
	as, err := a.List(acme, "acme", s.ID)
	if err != nil || len(as) != 1 || as[0].Command != fits {
		t.Fatalf("approvals: %d, %v; want the one that fits, shown whole", len(as), err)
	}
}
