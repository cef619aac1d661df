package rules

import apiv1 "paddock.dev/paddock/api"

// The network part of a session's policy is a public wire type (api/),
// decoded strictly there; rules compiles it.
type (
	PolicyInput = apiv1.PolicyInput
	Network     = apiv1.Network
	AllowEntry  = apiv1.AllowEntry
)
