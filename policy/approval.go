package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Approval actions.
const (
	ActionRequest = "request" // open an approval request for a held command
	ActionDecide  = "decide"  // approve or deny one
)

// Approval decides whether in.Actor may take in.Action on an approval
// request ("decide": only an admin; "request": allowed, with the TTL a new
// request lives). An operator's approval.deny refuses either. An
// evaluation error returns a refusal and the error.
func (e *Engine) Approval(ctx context.Context, in ApprovalInput) (ApprovalDecision, error) {
	if in.Action != ActionRequest && in.Action != ActionDecide {
		err := fmt.Errorf("%w: approval action %q is unknown; use %q or %q", ErrInvalidInput, in.Action, ActionRequest, ActionDecide)
		return ApprovalDecision{Rule: RuleError, Reason: err.Error()}, err
	}
	input := ast.NewObject(
		ast.Item(kAction, ast.StringTerm(in.Action)),
		ast.Item(ast.StringTerm("actor"), actorTerm(in.Actor)),
		ast.Item(ast.StringTerm("session_tenant"), ast.StringTerm(in.SessionTenant)),
		ast.Item(ast.StringTerm("requester"), actorTerm(in.Requester)),
	)
	l := e.cur.Load()
	d, hits, err := l.approval.eval(ctx, input)
	if err != nil {
		e.log.Warn("policy: approval decision failed; refused", "action", in.Action, "actor", in.Actor.Kind, "err", err)
		return ApprovalDecision{Rule: RuleError, Reason: "the policy could not decide (" + err.Error() + ")"}, err
	}
	out := ApprovalDecision{Allow: boolean(d, "allow"), Rule: str(d, "rule"), Reason: str(d, "reason")}
	if s, ok := d["ttl_seconds"].(json.Number); ok {
		if n, err := s.Int64(); err == nil && n > 0 {
			out.TTL = time.Duration(n) * time.Second
		}
	}
	if h, ok := firstHit(hits, "deny"); ok {
		return ApprovalDecision{Rule: h.rule.name, Reason: h.reasons[0], TTL: out.TTL}, nil
	}
	return out, nil
}

func actorTerm(a Actor) *ast.Term {
	return ast.NewTerm(ast.NewObject(
		ast.Item(kKind, ast.StringTerm(a.Kind)),
		ast.Item(ast.StringTerm("name"), ast.StringTerm(a.Name)),
		ast.Item(ast.StringTerm("tenant"), ast.StringTerm(a.Tenant)),
		ast.Item(kSession, ast.StringTerm(a.Session)),
	))
}
