package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// PolicyRequest is the create body's policy: the network part (preset,
// network; compiled by egress/rules) and the process part (judged by the
// Rego process module on every exec and job start).
type PolicyRequest struct {
	PolicyInput
	Process *ProcessRules `json:"process,omitempty"`
}

// Policy is the session record's view of its policy: the compiled network
// policy and the process rules as accepted.
type Policy struct {
	NetworkSummary
	Process *ProcessRules `json:"process,omitempty"`
	// ExecPrograms are the files an enforced process policy lets start
	// (process.enforce "exec"), as found in the sandbox at create.
	ExecPrograms []string `json:"exec_programs,omitempty"`
}

// ProcessRules is the process section of a session's policy, as written in
// the create body ("policy": {"process": {...}}).
type ProcessRules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Ask   []string `json:"ask,omitempty"`
	// Enforce "exec" also makes the programs named by the first word of
	// each allow and ask pattern the only ones the guest kernel lets start
	// (Landlock execute right). "" leaves the rules as string rules.
	Enforce string `json:"enforce,omitempty"`
}

// PolicyInput is the network part of a session's policy as a client
// writes it:
//
//	{"preset": "developer-safe",
//	 "network": {"default": "deny",
//	             "allow": ["pypi.org", {"host": "github.com", "methods": ["GET"], "paths": ["/org/*"]}],
//	             "enforcement": "strict"}}
//
// Its JSON decoding refuses unknown and duplicate fields and compares field
// names exactly (encoding/json alone would take "Host" for "host"). A
// larger policy object (with process or filesystem sections) should hold
// Preset and Network as fields of its own and build a PolicyInput from
// them.
type PolicyInput struct {
	Preset  string   `json:"preset,omitempty"`  // "offline", "developer-safe", "open"; "" is no preset
	Network *Network `json:"network,omitempty"` // nil: the preset alone
}

// Network is the network section of a policy.
type Network struct {
	// Default is "deny" (only the allow entries, and the preset's hosts)
	// or "allow" (open). Empty: the preset's ("deny" for offline and
	// developer-safe, "allow" for open); without a preset, "deny" when
	// there are allow entries and "allow" otherwise.
	Default string       `json:"default,omitempty"`
	Allow   []AllowEntry `json:"allow,omitempty"`
	// Enforcement is "strict" (the default: the caller refuses a policy
	// it cannot enforce) or "best-effort" (the caller goes ahead and
	// records what is not enforced with Compiled.AddUnenforced).
	Enforcement string `json:"enforcement,omitempty"`
}

// AllowEntry is one network.allow entry: in JSON either a host pattern
// ("example.com", "*.example.com") or an object with host and optional
// methods and paths.
type AllowEntry struct {
	Host    string   `json:"host"`
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
}

// NetworkSummary is what the daemon compiled of a network policy, as the
// session record shows it.
type NetworkSummary struct {
	Mode        string   `json:"mode"`
	Preset      string   `json:"preset,omitempty"`
	AllowHosts  []string `json:"allow_hosts,omitempty"` // host patterns, each once, preset's first
	HTTPRules   []string `json:"http_rules,omitempty"`  // every rule a Decision can name, allowlist mode only
	Enforcement string   `json:"enforcement"`
	Unenforced  []string `json:"unenforced,omitempty"`
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
			var pr ProcessRules
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

// UnmarshalJSON decodes a policy object strictly.
func (p *PolicyInput) UnmarshalJSON(data []byte) error {
	var out PolicyInput
	err := decodeObject(data, "policy", map[string]any{
		"preset":  &out.Preset,
		"network": &out.Network,
	})
	if err != nil {
		return err
	}
	*p = out
	return nil
}

// UnmarshalJSON decodes a network object strictly.
func (n *Network) UnmarshalJSON(data []byte) error {
	var out Network
	err := decodeObject(data, "network", map[string]any{
		"default":     &out.Default,
		"allow":       &out.Allow,
		"enforcement": &out.Enforcement,
	})
	if err != nil {
		return err
	}
	*n = out
	return nil
}

// UnmarshalJSON takes a string (a host pattern) or an object with host,
// methods and paths, strictly.
func (e *AllowEntry) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var host string
		if err := json.Unmarshal(data, &host); err != nil {
			return err
		}
		*e = AllowEntry{Host: host}
		return nil
	}
	var out AllowEntry
	var methods, paths *[]string
	err := decodeObject(data, "allow entry", map[string]any{
		"host":    &out.Host,
		"methods": &methods,
		"paths":   &paths,
	})
	if err != nil {
		return err
	}
	if out.Host == "" {
		return fmt.Errorf("allow entry: host is missing")
	}
	// Keep an explicit empty list apart from an absent one, so that
	// Compile can refuse "methods": [].
	if methods != nil {
		out.Methods = append([]string{}, *methods...)
	}
	if paths != nil {
		out.Paths = append([]string{}, *paths...)
	}
	*e = out
	return nil
}

// MarshalJSON writes an entry without limits as its host string, and one
// with limits as an object.
func (e AllowEntry) MarshalJSON() ([]byte, error) {
	if e.Methods == nil && e.Paths == nil {
		return json.Marshal(e.Host)
	}
	type plain AllowEntry // no MarshalJSON
	return json.Marshal(plain(e))
}

// decodeObject decodes a JSON object (or null, which leaves the fields
// alone) into fields, refusing anything that is not an object, field
// names that are not exactly one of fields, and repeated fields.
func decodeObject(data []byte, what string, fields map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%s: must be an object", what)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		key, _ := tok.(string)
		dst, ok := fields[key]
		if !ok {
			names := make([]string, 0, len(fields))
			for k := range fields {
				names = append(names, k)
			}
			slices.Sort(names)
			return fmt.Errorf("%s: unknown field %q (known: %s)", what, key, strings.Join(names, ", "))
		}
		if seen[key] {
			return fmt.Errorf("%s: field %q given twice", what, key)
		}
		seen[key] = true
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("%s.%s: %w", what, key, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// String is the summary on one line, for logs.
func (s NetworkSummary) String() string {
	var b strings.Builder
	b.WriteString(s.Mode)
	if s.Preset != "" {
		fmt.Fprintf(&b, " (preset %s)", s.Preset)
	}
	if len(s.HTTPRules) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(s.HTTPRules, "; "))
	}
	return b.String()
}

// PolicyCompileRequest is the body of POST /v1/policy/compile: a create
// body's policy, and the backend the session would run on ("" for the
// daemon's default), since what a backend can enforce decides some
// refusals.
type PolicyCompileRequest struct {
	Policy  *PolicyRequest `json:"policy,omitempty"`
	Backend string         `json:"backend,omitempty"`
}

// PolicyCompile answers POST /v1/policy/compile: what a create with the
// policy would record, and every reason it would be refused, without
// creating anything.
type PolicyCompile struct {
	// OK is true when the policy raises no refusal (a create can still
	// fail for other reasons: capacity, the image, the workspace).
	OK bool `json:"ok"`
	// Policy is the policy as a session record would show it; nil when
	// the network part does not compile.
	Policy *Policy `json:"policy,omitempty"`
	// Network is how the sandbox would reach the world: "offline" or
	// "egress" (through the daemon's egress proxy); "" when refused.
	Network string `json:"network,omitempty"`
	// Refusals are the errors a create would answer, each with the code
	// and status it would carry.
	Refusals []PolicyRefusal `json:"refusals"`
}

// PolicyRefusal is one reason a create with the policy would be refused.
type PolicyRefusal struct {
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
	Error  string `json:"error"`
}
