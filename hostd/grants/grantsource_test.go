package grants

import (
	"log/slog"
	"testing"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/policy"
)

// TestGrantSource: the grants Service is the proxy's grant source. With the
// policy engine it asks the http Rego module; without one it holds a
// grant to its own methods and paths, as the proxy alone would. Either
// way a grant whose limits do not check out covers nothing.
func TestGrantSource(t *testing.T) {
	eng, err := policy.New(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := egress.Grant{ID: "gr-1", Hosts: []string{"api.test"}, Methods: []string{"GET"}, Paths: []string{"/v1/*"}}
	bad := egress.Grant{ID: "gr-2", Hosts: []string{"api.test"}, Paths: []string{"no-slash"}}
	req := func(method, path string) egress.Request {
		return egress.Request{Sandbox: "ses-1", Host: "api.test", Port: 443, Scheme: "https", Method: method, Path: path}
	}
	for _, m := range []*Service{
		{log: slog.New(slog.DiscardHandler)},
		{log: slog.New(slog.DiscardHandler), policy: eng},
	} {
		name := "native"
		if m.policy != nil {
			name = "rego"
		}
		for _, tc := range []struct {
			g    egress.Grant
			r    egress.Request
			want bool
		}{
			{g, req("GET", "/v1/x"), true},
			{g, req("POST", "/v1/x"), false},
			{g, req("GET", "/v2/x"), false},
			{bad, req("GET", "/v1/x"), false},
		} {
			if got := m.GrantApplies("ses-1", tc.g, tc.r); got != tc.want {
				t.Errorf("%s: grant %s on %s %s: %v, want %v", name, tc.g.ID, tc.r.Method, tc.r.Path, got, tc.want)
			}
		}
	}
}
