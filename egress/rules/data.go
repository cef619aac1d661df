package rules

import "slices"

// Host pattern kinds in Data.
const (
	HostExact    = "exact"    // the name itself
	HostWildcard = "wildcard" // names below Suffix, not the suffix itself
	HostIP       = "ip"       // an IP literal
)

// Data is a compiled policy written out as plain values (strings, numbers,
// lists), for a policy engine that evaluates the same rules elsewhere: the
// Rego module rego/http.rego reads it as input.policy. Everything that
// Compile worked out (merged entries, canonical host patterns, canonical
// path patterns, method lists in canonical order, readable rule names) is
// in it, so the evaluator only matches.
type Data struct {
	Mode string `json:"mode"` // ModeOffline, ModeAllowlist or ModeOpen
	// Ports are the ports allowlist mode allows (80 and 443). Open mode
	// allows 1-65535, offline none.
	Ports []int `json:"ports"`
	// Methods are the methods an entry that limits paths only allows
	// (Methods: never TRACE, CONNECT or an unknown method).
	Methods []string    `json:"methods"`
	Entries []DataEntry `json:"entries"` // allowlist mode only, in the order Decide tries them
	// An index of Entries by host pattern kind: exact names to the
	// entries for them, and the entries that are wildcards and IP
	// literals, each list in Entries' order.
	Exact     map[string][]int `json:"exact"`
	Wildcards []int            `json:"wildcards"`
	IPs       []int            `json:"ips"`
	// Rules names used when no entry decides.
	RuleOffline     string `json:"rule_offline"`
	RuleOpen        string `json:"rule_open"`
	RuleDefaultDeny string `json:"rule_default_deny"`
	RulePorts       string `json:"rule_ports"`
	MaxShownRules   int    `json:"max_shown_rules"` // how many rule names a denial lists
}

// DataEntry is one merged allow entry.
type DataEntry struct {
	Host string `json:"host"` // canonical pattern, as in Summary
	Kind string `json:"kind"` // HostExact, HostWildcard or HostIP
	// Suffix is ".example.com" for "*.example.com" (HostWildcard only).
	Suffix string `json:"suffix,omitempty"`
	// CIDR is the IP literal as a one-address prefix, "203.0.113.7/32"
	// (HostIP only).
	CIDR string `json:"cidr,omitempty"`
	// Limited: the entry limits methods or paths, so only requests within
	// them are allowed and HTTPS to the host must be inspected.
	Limited bool     `json:"limited"`
	Methods []string `json:"methods"` // empty: any of Data.Methods (when Limited)
	Paths   []string `json:"paths"`   // empty: any canonical path (when Limited)
	// Rules are the readable rules, one per path pattern (one when paths
	// are not limited): Rules[i] names Paths[i].
	Rules []string `json:"rules"`
}

// Data returns the compiled policy as plain values. It shares nothing
// with c: the caller may keep or change it.
func (c *Compiled) Data() Data {
	d := Data{
		Mode:            c.mode,
		Ports:           []int{},
		Methods:         slices.Clone(Methods),
		Entries:         []DataEntry{},
		Exact:           map[string][]int{},
		Wildcards:       []int{},
		IPs:             []int{},
		RuleOffline:     RuleOffline,
		RuleOpen:        RuleOpen,
		RuleDefaultDeny: RuleDefaultDeny,
		RulePorts:       RulePorts,
		MaxShownRules:   maxShownRules,
	}
	if c.mode != ModeAllowlist {
		return d
	}
	d.Ports = []int{80, 443}
	for i, e := range c.entries {
		de := DataEntry{
			Host:    e.host.text,
			Kind:    HostExact,
			Limited: !e.limits.Unlimited(),
			Methods: append([]string{}, e.limits.methods...),
			Paths:   append([]string{}, e.limits.paths...),
			Rules:   slices.Clone(e.rules),
		}
		switch {
		case e.host.ip.IsValid():
			de.Kind = HostIP
			de.CIDR = e.host.ip.String() + "/32"
			if e.host.ip.Is6() {
				de.CIDR = e.host.ip.String() + "/128"
			}
			d.IPs = append(d.IPs, i)
		case e.host.suffix != "":
			de.Kind = HostWildcard
			de.Suffix = e.host.suffix
			d.Wildcards = append(d.Wildcards, i)
		default:
			d.Exact[de.Host] = append(d.Exact[de.Host], i)
		}
		d.Entries = append(d.Entries, de)
	}
	return d
}
