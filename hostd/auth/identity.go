// Package auth is who calls the daemon and what they may do. It verifies
// the three kinds of bearer token (the admin token, tenant tokens from the
// tenants file, and session tokens minted for one session), turns a valid
// one into an Identity carried in the request's context, and checks an
// Identity against what a route needs (Identity.Permit).
//
// No token is kept: only SHA-256 hashes, compared with crypto/subtle. A
// session token carries a public id, so the daemon finds its record by
// that id and compares the hash of the whole token in constant time.
//
// The package imports nothing else from hostd: session tokens come from a
// SessionTokens source (the session manager implements it), so the API and
// a gateway module can verify tokens the same way.
package auth

import (
	"context"
	"slices"
	"time"

	apiv1 "paddock.dev/paddock/api"
)

// Kinds of caller.
const (
	KindAdmin   = apiv1.KindAdmin
	KindTenant  = apiv1.KindTenant
	KindSession = apiv1.KindSession
)

// ActorDaemon is the ledger actor of what the daemon does on its own
// (expiry, adoption, egress decisions): no caller is involved.
const ActorDaemon = "daemon"

// Identity is a verified caller.
type Identity struct {
	Kind string
	// Tenant is the tenant's name for a tenant token, and the session's
	// tenant ("" for a session the admin made) for a session token.
	Tenant string
	// Session, TokenID, Ops and ExpiresAt describe a session token.
	Session   string
	TokenID   string
	Ops       []string
	ExpiresAt time.Time
}

// Admin is the admin's identity.
func Admin() Identity { return Identity{Kind: KindAdmin} }

// Actor names the caller in the ledger: "admin", "tenant:<name>" or
// "session-token:<token id>". It never holds a secret.
func (id Identity) Actor() string {
	switch id.Kind {
	case KindAdmin:
		return "admin"
	case KindTenant:
		return "tenant:" + id.Tenant
	case KindSession:
		return "session-token:" + id.TokenID
	}
	return ActorDaemon
}

// Scope is the tenant the caller sees sessions as: "" (every tenant) for
// the admin, its own name for a tenant. A session token sees its session
// as the session's tenant does; Permit keeps it on that one session.
func (id Identity) Scope() string {
	if id.Kind == KindAdmin {
		return ""
	}
	return id.Tenant
}

// Has reports whether the caller may use op: the admin and tenants may
// use every op, a session token the ones it was minted with.
func (id Identity) Has(op string) bool {
	switch id.Kind {
	case KindAdmin, KindTenant:
		return true
	case KindSession:
		return slices.Contains(id.Ops, op)
	}
	return false
}

// WhoAmI is the public wire type api.WhoAmI, kept under this name here.
type WhoAmI = apiv1.WhoAmI

// WhoAmI describes the caller; there is no secret in it.
func (id Identity) WhoAmI() WhoAmI {
	w := WhoAmI{Kind: id.Kind, Tenant: id.Tenant, Session: id.Session, TokenID: id.TokenID, Ops: slices.Clone(id.Ops)}
	if !id.ExpiresAt.IsZero() {
		t := id.ExpiresAt.UTC()
		w.ExpiresAt = &t
	}
	return w
}

type ctxKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	id.Ops = slices.Clone(id.Ops)
	return context.WithValue(ctx, ctxKey{}, &id)
}

// WithoutIdentity returns ctx with no caller, for work the daemon does on
// its own inside a call (an expiry noticed while serving a request).
func WithoutIdentity(ctx context.Context) context.Context {
	return context.WithValue(ctx, ctxKey{}, (*Identity)(nil))
}

// FromContext returns the caller ctx carries, if any.
func FromContext(ctx context.Context) (Identity, bool) {
	p, _ := ctx.Value(ctxKey{}).(*Identity)
	if p == nil {
		return Identity{}, false
	}
	return *p, true
}

// ActorOf is the ledger actor for ctx: the caller's, or ActorDaemon.
func ActorOf(ctx context.Context) string {
	if id, ok := FromContext(ctx); ok {
		return id.Actor()
	}
	return ActorDaemon
}
