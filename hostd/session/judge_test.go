package session

import (
	"context"
	"errors"
	"strings"
	"testing"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/policy"
)

// TestJudgeWithoutApprovals: a core given no approvals service (core-only
// tests; hostd/daemon always sets one) fails closed. A command the
// process policy holds for an operator is refused (409), and no request
// is filed; a command naming an approval is refused (403) at the spend
// step; neither reaches the guest. A command the policy allows runs.
func TestJudgeWithoutApprovals(t *testing.T) {
	m := fakeManager(t)
	tr := traceSteps(m)
	ctx := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	s, err := m.Create(ctx, "acme", CreateRequest{TTLSeconds: 600, Policy: &PolicyRequest{Process: &policy.ProcessRules{Ask: []string{"deploy*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Exec(ctx, "acme", s.ID, ExecRequest{Command: "deploy now"}); !errors.Is(err, ErrConflict) {
		t.Errorf("exec of an ask command with no approvals service: %v, want 409", err)
	}
	if rows, err := m.st.ListApprovals(ctx, s.ID); err != nil || len(rows) != 0 {
		t.Errorf("approval rows with no approvals service: %v %v", rows, err)
	}
	if _, err := m.Exec(ctx, "acme", s.ID, ExecRequest{Command: "deploy now", ApprovalID: "apr-0123456789abcdef"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("exec naming an approval with no approvals service: %v, want 403", err)
	}
	if got := tr.take(CommandExec); strings.Contains(got, StepRun) {
		t.Errorf("a held command reached the run step: %s", got)
	}
	if _, err := m.Exec(ctx, "acme", s.ID, ExecRequest{Command: "true"}); err != nil {
		t.Errorf("exec of an allowed command: %v", err)
	}
}
