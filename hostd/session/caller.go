package session

import (
	"context"
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
// API authenticated. A call with none is the daemon's own work (an expiry,
// a sweep) and is the daemon, never the admin: the approval module lets
// only an admin decide, so a call that lost its caller on the way decides
// nothing. An identity of a kind this code does not know is nobody (kind
// "", which no policy rule allows).
func callerOf(ctx context.Context) policy.Actor {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return policy.Actor{Kind: auth.ActorDaemon, Name: auth.ActorDaemon}
	}
	switch id.Kind {
	case auth.KindAdmin:
		return policy.Actor{Kind: "admin", Name: "admin"}
	case auth.KindTenant:
		return policy.Actor{Kind: "tenant", Name: id.Tenant, Tenant: id.Tenant}
	case auth.KindSession:
		return policy.Actor{Kind: "session", Name: id.TokenID, Tenant: id.Tenant, Session: id.Session}
	}
	return policy.Actor{}
}

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
