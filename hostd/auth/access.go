package auth

import (
	"fmt"
	"paddock.dev/paddock/errdefs"
	"slices"
	"strings"

	apiv1 "paddock.dev/paddock/api"
)

// Errors, wrapped with %w; of errdefs' kinds, so the API answers 401 and
// 403.
var (
	// ErrUnauthenticated: no token, or one that is unknown, wrong, revoked
	// or expired.
	ErrUnauthenticated = errdefs.New(errdefs.ErrUnauthenticated, "a valid bearer token is required (Authorization: Bearer <token>)")
	// ErrForbidden: a valid token that may not do this.
	ErrForbidden = errdefs.New(errdefs.ErrForbidden, "forbidden")
)

// Operations a session token can be granted. Each route a session token
// may call needs exactly one (the route table is hostd/api/routes).
const (
	OpRead       = apiv1.OpRead
	OpExec       = apiv1.OpExec
	OpJobs       = apiv1.OpJobs
	OpFilesRead  = apiv1.OpFilesRead
	OpFilesWrite = apiv1.OpFilesWrite
	OpGit        = apiv1.OpGit
	OpCheckpoint = apiv1.OpCheckpoint
	OpPreview    = apiv1.OpPreview
)

var grantable = apiv1.GrantableOps()

// GrantableOps lists the ops a session token can carry, in their
// canonical order (api.GrantableOps).
func GrantableOps() []string { return apiv1.GrantableOps() }

// IsOp reports whether op is a grantable op.
func IsOp(op string) bool { return slices.Contains(grantable, op) }

// NormalizeOps checks a mint's ops (a non-empty set of known names) and
// returns them once each, in canonical order. The error names the first
// unknown one.
func NormalizeOps(ops []string) ([]string, error) {
	if len(ops) == 0 {
		return nil, fmt.Errorf("ops is empty: name at least one of %s", strings.Join(grantable, ", "))
	}
	for _, op := range ops {
		if !IsOp(op) {
			return nil, fmt.Errorf("ops: %q is not an operation a session token can be granted (known: %s)", op, strings.Join(grantable, ", "))
		}
	}
	var out []string
	for _, op := range grantable {
		if slices.Contains(ops, op) {
			out = append(out, op)
		}
	}
	return out, nil
}

// Access is what a route asks of its caller: one of the classes below, or
// a grantable op (Access(OpExec)), which admin and tenant tokens always
// have and a session token only when minted with it, on its own session.
type Access string

// Classes of routes that no op opens.
const (
	AccessPublic Access = "public" // no token at all (/healthz)
	AccessAny    Access = "any"    // any valid token (/v1/whoami)
	AccessTenant Access = "tenant" // the admin or a tenant; never a session token
	AccessAdmin  Access = "admin"  // the admin only
)

// Valid reports whether a is a class or a grantable op.
func (a Access) Valid() bool {
	switch a {
	case AccessPublic, AccessAny, AccessTenant, AccessAdmin:
		return true
	}
	return IsOp(string(a))
}

// Permit checks the caller against a route's access. session is the
// session id in the route's path ("" when it has none). A tenant is not
// refused here for another tenant's session: that answers 404, as if the
// session did not exist, where the session is looked up.
func (id Identity) Permit(a Access, session string) error {
	switch a {
	case AccessPublic, AccessAny:
		return nil
	case AccessAdmin:
		if id.Kind == KindAdmin {
			return nil
		}
		return fmt.Errorf("%w: only the admin token may do this", ErrForbidden)
	case AccessTenant:
		if id.Kind == KindAdmin || id.Kind == KindTenant {
			return nil
		}
		return fmt.Errorf("%w: a session token cannot do this; it needs the admin token or a tenant token", ErrForbidden)
	}
	if !IsOp(string(a)) {
		return fmt.Errorf("%w: this route has no access rule", ErrForbidden)
	}
	switch id.Kind {
	case KindAdmin, KindTenant:
		return nil
	case KindSession:
		if session == "" || session != id.Session {
			return fmt.Errorf("%w: this session token works only on /v1/agents/sessions/%s", ErrForbidden, id.Session)
		}
		if !id.Has(string(a)) {
			return fmt.Errorf("%w: this session token was not granted %s (it has %s)", ErrForbidden, a, strings.Join(id.Ops, ", "))
		}
		return nil
	}
	return fmt.Errorf("%w: unknown caller", ErrForbidden)
}
