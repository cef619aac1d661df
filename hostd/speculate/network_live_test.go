package speculate_test

import (
	"context"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	hegress "paddock.dev/paddock/hostd/egress"
	"paddock.dev/paddock/policy"
)

// TestSpeculateNetworkLive: the copy of a session whose policy lets it
// reach a host says side_effects.network true (what it called really
// happened), where an offline session's says false.
func TestSpeculateNetworkLive(t *testing.T) {
	eng, err := policy.New(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := daemontest.New(t, daemontest.WithEgress(hegress.Config{}), daemontest.WithPolicy(eng))
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		pol  *apiv1.PolicyRequest
		want bool
	}{
		{"allowlist", &apiv1.PolicyRequest{PolicyInput: rules.PolicyInput{Network: &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "example.com"}}}}}, true},
		{"offline", nil, false},
	} {
		s, err := d.Client.CreateSession(ctx, apiv1.CreateRequest{Policy: tc.pol})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var cs apiv1.Changeset
		if st, _ := call(t, d, d.Token, "POST", "/v1/agents/sessions/"+s.ID+"/speculate", apiv1.SpeculateRequest{Command: "true", Paths: []string{"."}}, &cs); st != 201 {
			t.Fatalf("%s: speculate %d", tc.name, st)
		}
		if cs.SideEffects.Network != tc.want || cs.SideEffects.Detail == "" {
			t.Errorf("%s: side_effects %+v, want network %v", tc.name, cs.SideEffects, tc.want)
		}
	}
}
