package grants

import (
	"context"
	"errors"
	"testing"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
)

// TestGrantCaller holds the grants service's own check of who asks for a grant,
// which stands even if the API's route table let a caller through: a
// session token gets nothing from Grant, Grants or Ungrant (code
// grant_needs_admin_or_tenant), a tenant's secret_ref is refused (code
// secret_ref_admin_only), a call with no caller at all gets nothing
// either (it is not taken for the admin's), and all are refused before the
// service looks at anything (a zero Service answers them).
func TestGrantCaller(t *testing.T) {
	var m Service
	tok := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindSession, Session: "ses-0123456789abcdef",
		TokenID: "tok-1", Ops: auth.GrantableOps()})
	tenant := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	value := GrantRequest{Value: "v", Hosts: []string{"a.test"}}
	ref := GrantRequest{SecretRef: "X", Hosts: []string{"a.test"}}
	code := func(err error) string {
		var c *session.CodedError
		if errors.As(err, &c) && errors.Is(err, ErrForbidden) {
			return c.Code
		}
		return ""
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"session token: grant a value", func() error { _, err := m.Grant(tok, "", "ses-0123456789abcdef", value); return err }(), CodeGrantNeedsAdminOrTenant},
		{"session token: grant a secret_ref", func() error { _, err := m.Grant(tok, "", "ses-0123456789abcdef", ref); return err }(), CodeGrantNeedsAdminOrTenant},
		{"session token: list", func() error { _, err := m.Grants(tok, "", "ses-0123456789abcdef"); return err }(), CodeGrantNeedsAdminOrTenant},
		{"session token: revoke all", m.Ungrant(tok, "", "ses-0123456789abcdef", ""), CodeGrantNeedsAdminOrTenant},
		{"session token: revoke one", m.Ungrant(tok, "", "ses-0123456789abcdef", "gr-1"), CodeGrantNeedsAdminOrTenant},
		{"tenant: secret_ref", func() error { _, err := m.Grant(tenant, "acme", "ses-0123456789abcdef", ref); return err }(), CodeSecretRefAdminOnly},
		{"no caller: secret_ref", func() error { _, err := m.Grant(context.Background(), "", "ses-0123456789abcdef", ref); return err }(), CodeGrantNeedsAdminOrTenant},
		{"no caller: grant a value", func() error { _, err := m.Grant(context.Background(), "", "ses-0123456789abcdef", value); return err }(), CodeGrantNeedsAdminOrTenant},
		{"no caller: list", func() error { _, err := m.Grants(context.Background(), "", "ses-0123456789abcdef"); return err }(), CodeGrantNeedsAdminOrTenant},
		{"no caller: revoke all", m.Ungrant(context.Background(), "", "ses-0123456789abcdef", ""), CodeGrantNeedsAdminOrTenant},
	} {
		if got := code(tc.err); got != tc.want {
			t.Errorf("%s: %v (code %q), want 403 with code %q", tc.name, tc.err, got, tc.want)
		}
	}
}
