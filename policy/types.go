// Package policy makes Paddock's decisions with OPA: the Rego modules in
// rego/ (process, http, approval) and an operator's own modules, compiled
// once and prepared, evaluated per decision, answered as typed results
// that name the rule that decided.
//
// This file is the package's contract with hostd; engine.go and the rest
// implement it.
package policy

import (
	"time"

	apiv1 "paddock.dev/paddock/api"
)

// Result is what a process or approval decision says.
type Result string

const (
	Allow Result = "allow"
	Deny  Result = "deny"
	Ask   Result = "ask" // hold the command for an operator's approval
)

// ProcessRules is the public wire type api.ProcessRules, kept under this name here.
type ProcessRules = apiv1.ProcessRules

// Process kinds.
const (
	KindExec = "exec"
	KindJob  = "job"
)

// ProcessInput is one command to judge.
type ProcessInput struct {
	Session string       `json:"session"`
	Kind    string       `json:"kind"` // KindExec or KindJob
	Command string       `json:"command"`
	Rules   ProcessRules `json:"rules"`
	// Env and Cwd are what the caller gave the command besides its text:
	// the variables it adds to the environment (names to values) and the
	// directory it starts in. Only a sandbox's process
	// (POST /v1/sandboxes/{id}/process) takes them; a session's exec and
	// jobs run in the workspace with the sandbox's own environment and
	// leave both empty. The module sees them as input.env and input.cwd,
	// present only when set.
	Env map[string]string `json:"env,omitempty"`
	Cwd string            `json:"cwd,omitempty"`
}

// ProcessDecision is the answer for one command. Rule names the rule that
// decided ("process.deny", "process.allow", "process.ask",
// "process.not_allowed", "process.default", or "ext.<package>" for an
// operator's module); Pattern and Piece say which pattern matched which
// piece of the command.
type ProcessDecision struct {
	Result  Result `json:"result"`
	Rule    string `json:"rule"`
	Pattern string `json:"pattern,omitempty"`
	Piece   string `json:"piece,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Actor is who is asking, as the API authenticated them.
type Actor struct {
	Kind    string `json:"kind"` // "admin", "tenant" or "session"
	Name    string `json:"name"` // the tenant's name, or the token's id
	Tenant  string `json:"tenant,omitempty"`
	Session string `json:"session,omitempty"` // a session token's session
}

// ApprovalInput asks whether actor may take action on an approval request
// of a session ("request": how long a new request lives; "decide":
// approve or deny it).
type ApprovalInput struct {
	Action        string `json:"action"` // "request" or "decide"
	Actor         Actor  `json:"actor"`
	SessionTenant string `json:"session_tenant,omitempty"`
	Requester     Actor  `json:"requester"` // who asked for the held command
}

// ApprovalDecision is the answer: for "decide", Allow says whether the
// actor may decide; for "request", TTL is how long the request lives.
type ApprovalDecision struct {
	Allow  bool          `json:"allow"`
	Rule   string        `json:"rule"`
	Reason string        `json:"reason,omitempty"`
	TTL    time.Duration `json:"ttl"`
}

// GrantInput asks whether a credential grant applies to one request inside
// intercepted TLS. It never carries the secret.
type GrantInput struct {
	Session string   `json:"session"`
	Grant   string   `json:"grant"` // the grant's id
	Hosts   []string `json:"hosts"`
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
	Scheme  string   `json:"scheme"`
	Host    string   `json:"host"` // canonical
	Port    int      `json:"port"`
	Method  string   `json:"method"`
	Path    string   `json:"path"` // canonical
}

// Status is what the engine runs on now: the built-in modules, the
// operator's, and the last load error (the previous set stays in force
// when a load fails).
type Status struct {
	Revision  int       `json:"revision"` // bumped by every successful load
	LoadedAt  time.Time `json:"loaded_at"`
	Builtin   []string  `json:"builtin"`
	Operator  []string  `json:"operator"`
	Source    string    `json:"source,omitempty"` // the operator directory or bundle
	LastError string    `json:"last_error,omitempty"`
	FailedAt  time.Time `json:"failed_at,omitzero"`
}
