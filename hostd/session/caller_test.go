package session

import (
	"context"
	"errors"
	"testing"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/policy"
)

// TestCallerFailsClosed: the policy's view of the caller comes from the
// context, and a context with no caller (or one of no known kind) is
// refused with 403, never taken for the admin. Deciding an approval with
// no caller is refused before the manager looks at anything (a zero
// Manager answers it).
func TestCallerFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want policy.Actor // zero: refused
	}{
		{"no caller", context.Background(), policy.Actor{}},
		{"caller removed", auth.WithoutIdentity(auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindAdmin})), policy.Actor{}},
		{"unknown kind", auth.WithIdentity(context.Background(), auth.Identity{Kind: "robot"}), policy.Actor{}},
		{"admin", auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindAdmin}), policy.Actor{Kind: "admin", Name: "admin"}},
		{"tenant", auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "acme"}), policy.Actor{Kind: "tenant", Name: "acme", Tenant: "acme"}},
		{"session token", auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindSession, Tenant: "acme", TokenID: "tok-1", Session: "ses-1"}),
			policy.Actor{Kind: "session", Name: "tok-1", Tenant: "acme", Session: "ses-1"}},
	} {
		got, err := callerOf(tc.ctx)
		if tc.want == (policy.Actor{}) {
			if !errors.Is(err, ErrForbidden) {
				t.Errorf("%s: callerOf = %+v, %v; want 403", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: callerOf = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}
