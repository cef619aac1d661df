package speculate

import (
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/session"
)

// TestNetworkOf: side_effects.network is false only when the copy could
// reach nothing (offline, or an empty allowlist), true otherwise.
func TestNetworkOf(t *testing.T) {
	for _, tc := range []struct {
		n    apiv1.NetworkSummary
		want bool
	}{
		{apiv1.NetworkSummary{Mode: "offline"}, false},
		{apiv1.NetworkSummary{Mode: "allowlist"}, false},
		{apiv1.NetworkSummary{Mode: "allowlist", AllowHosts: []string{"example.com"}}, true},
		{apiv1.NetworkSummary{Mode: "open"}, true},
		{apiv1.NetworkSummary{}, true},
	} {
		s := &session.Session{}
		s.Policy.NetworkSummary = tc.n
		if got := networkOf(s); got.Network != tc.want || got.Detail == "" {
			t.Errorf("%+v: %+v, want network %v", tc.n, got, tc.want)
		}
	}
}
