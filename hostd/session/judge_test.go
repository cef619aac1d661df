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

// TestAwaitApprovalWalksTheJudgeStep: exec/stream's wait for an approval
// walks the job start's own validate, load and judge steps (traced as
// exec/stream), so the command is judged there as the start that follows
// judges it: a command the policy allows needs no approval, an empty one
// is refused (400) before the policy is asked, a denied one is 403, and
// an unknown session 404 at load.
func TestAwaitApprovalWalksTheJudgeStep(t *testing.T) {
	m := fakeManager(t)
	tr := traceSteps(m)
	ctx := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	s, err := m.Create(ctx, "acme", CreateRequest{TTLSeconds: 600, Policy: &PolicyRequest{Process: &policy.ProcessRules{Ask: []string{"deploy*"}, Deny: []string{"rm *"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id, command string
		want              error
		steps             string
	}{
		{"allowed", s.ID, "true", nil, "validate load judge"},
		{"empty", s.ID, "  ", ErrBadRequest, "validate"},
		{"denied", s.ID, "rm -rf x", ErrForbidden, "validate load judge"},
		{"held, no approvals service", s.ID, "deploy now", ErrConflict, "validate load judge"},
		{"unknown session", "ses-0123456789abcdef", "true", ErrNotFound, "validate load"},
	} {
		id, err := m.AwaitApproval(ctx, "acme", tc.id, JobStart{Command: tc.command, ApprovalWaitSeconds: 1})
		if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) || id != "" {
			t.Errorf("%s: %q %v, want no approval and %v", tc.name, id, err, tc.want)
		}
		if got := tr.take(CommandStream); got != tc.steps {
			t.Errorf("%s: walked %q, want %q", tc.name, got, tc.steps)
		}
	}
}
