package session

import (
	"slices"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/policy"
)

// PolicyRequest is the public wire type api.PolicyRequest, kept under this name here.
type PolicyRequest = apiv1.PolicyRequest

// policyNetwork is the network part, nil when there is none (offline: a policy
// with only a process section opens no network).
func policyNetwork(p *PolicyRequest) *rules.PolicyInput {
	if p == nil || p.Preset == "" && p.Network == nil {
		return nil
	}
	in := p.PolicyInput
	return &in
}

// policyProcess is the process part, nil when there is none or it is empty.
func policyProcess(p *PolicyRequest) *policy.ProcessRules {
	if p == nil || p.Process == nil {
		return nil
	}
	pr := *p.Process
	if len(pr.Allow) == 0 && len(pr.Deny) == 0 && len(pr.Ask) == 0 && pr.Enforce == "" {
		return nil
	}
	pr.Allow, pr.Deny, pr.Ask = slices.Clone(pr.Allow), slices.Clone(pr.Deny), slices.Clone(pr.Ask)
	return &pr
}

// Policy is the public wire type api.Policy, kept under this name here.
type Policy = apiv1.Policy
