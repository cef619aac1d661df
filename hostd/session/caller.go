package session

import (
	"context"
	"fmt"
	"strings"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/policy"
)

// Decider is the policy engine (policy.Engine) as the session manager
// uses it: the process module on every exec and job start, the approval
// module on approval requests and decisions.
type Decider interface {
	Process(ctx context.Context, in policy.ProcessInput) (policy.ProcessDecision, error)
	Approval(ctx context.Context, in policy.ApprovalInput) (policy.ApprovalDecision, error)
}

// callerOf is who made the call, for policy decisions: the identity the
// API authenticated. A call that carries none is refused (403), never
// taken for the admin's: every route puts its verified caller in the
// context, so a missing one means a path that skipped the check, and that
// path must not decide approvals as the operator.
func callerOf(ctx context.Context) (policy.Actor, error) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return policy.Actor{}, errNoCaller
	}
	switch id.Kind {
	case auth.KindAdmin:
		return policy.Actor{Kind: "admin", Name: "admin"}, nil
	case auth.KindTenant:
		return policy.Actor{Kind: "tenant", Name: id.Tenant, Tenant: id.Tenant}, nil
	case auth.KindSession:
		return policy.Actor{Kind: "session", Name: id.TokenID, Tenant: id.Tenant, Session: id.Session}, nil
	}
	return policy.Actor{}, fmt.Errorf("%w: the caller is of no known kind (%q)", ErrForbidden, id.Kind)
}

// errNoCaller refuses a call whose context carries no verified caller.
var errNoCaller = fmt.Errorf("%w: this call carries no verified caller", ErrForbidden)

// actorString is an actor as the ledger and approval records name it:
// "admin", "tenant:<name>" or "session-token:<id>".
func actorString(a policy.Actor) string {
	switch a.Kind {
	case "tenant":
		return "tenant:" + a.Name
	case "session":
		return "session-token:" + a.Name
	case "":
		return "unknown"
	}
	return a.Kind
}

// parseActor reads actorString's form back.
func parseActor(s string) policy.Actor {
	if name, ok := strings.CutPrefix(s, "tenant:"); ok {
		return policy.Actor{Kind: "tenant", Name: name, Tenant: name}
	}
	if name, ok := strings.CutPrefix(s, "session-token:"); ok {
		return policy.Actor{Kind: "session", Name: name}
	}
	return policy.Actor{Kind: s, Name: s}
}
