package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/policy"
)

// PolicyRequest is the create body's policy: the network part (preset,
// network; compiled by egress/rules) and the process part (judged by the
// Rego process module on every exec and job start).
type PolicyRequest struct {
	rules.PolicyInput
	Process *policy.ProcessRules `json:"process,omitempty"`
}

// UnmarshalJSON decodes strictly: the process section here, the rest by
// egress/rules (which refuses unknown fields).
func (p *PolicyRequest) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("policy must be a JSON object: %v", err)
	}
	var out PolicyRequest
	if v, ok := raw["process"]; ok {
		delete(raw, "process")
		if !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			var pr policy.ProcessRules
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&pr); err != nil {
				return fmt.Errorf("policy.process: %v (fields: allow, deny, ask, enforce)", err)
			}
			out.Process = &pr
		}
	}
	rest, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	if err := out.PolicyInput.UnmarshalJSON(rest); err != nil {
		return err
	}
	*p = out
	return nil
}

// MarshalJSON writes both parts as one object.
func (p PolicyRequest) MarshalJSON() ([]byte, error) {
	net, err := json.Marshal(p.PolicyInput)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(net, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	if p.Process != nil {
		b, err := json.Marshal(p.Process)
		if err != nil {
			return nil, err
		}
		m["process"] = b
	}
	return json.Marshal(m)
}

// network is the network part, nil when there is none (offline: a policy
// with only a process section opens no network).
func (p *PolicyRequest) network() *rules.PolicyInput {
	if p == nil || p.Preset == "" && p.Network == nil {
		return nil
	}
	in := p.PolicyInput
	return &in
}

// process is the process part, nil when there is none or it is empty.
func (p *PolicyRequest) process() *policy.ProcessRules {
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

// Policy is the session record's view of its policy: the compiled network
// policy and the process rules as accepted.
type Policy struct {
	rules.Summary
	Process *policy.ProcessRules `json:"process,omitempty"`
	// ExecPrograms are the files an enforced process policy lets start
	// (process.enforce "exec"), as found in the sandbox at create.
	ExecPrograms []string `json:"exec_programs,omitempty"`
}
