// Package egress is the host side of a sandbox's network: what a sandbox
// may reach, and the parts that hold it to that.
//
//   - egress/addr: host and address canonicalisation and classification
//     (loopback, private, link-local, CGNAT, metadata, embedded IPv4…).
//   - egress/rules: a session's network policy compiled into a Policy
//     (presets, allow entries with methods and paths, canonical paths).
//     The Rego engine (policy/) will implement the same interface.
//   - egress/dns: the per-sandbox resolver (miekg/dns) that answers only
//     names the policy allows and never forwards the rest.
//   - egress/proxy: the per-sandbox HTTP/HTTPS proxy (goproxy) that
//     resolves once, checks the address, and dials exactly that.
//
// A sandbox reaches each of these through its own listener (a unix socket
// per sandbox), so who is asking is known from where the connection came
// in, never from an address the sandbox could choose.
package egress

import (
	"context"
	"net/netip"
	"time"
)

// Request is one outbound request of a sandbox, as the proxy sees it.
type Request struct {
	Sandbox string // the sandbox (session) id, from the listener
	Host    string // canonical host (addr.CanonicalHost): lower case, no trailing dot, A-labels, or an IP literal
	Port    int
	Scheme  string // "http" or "https"
	Method  string // upper case; empty for a tunnel decision
	Path    string // canonical path (rules.CanonicalPath); empty for a tunnel decision
}

// Decision is a policy's answer.
type Decision struct {
	Allow  bool   `json:"allow"`
	Rule   string `json:"rule,omitempty"`   // the rule that decided, for the ledger
	Reason string `json:"reason,omitempty"` // why not, in words a person can act on
	// Inspect: the host has method or path rules (or a credential grant),
	// so HTTPS to it can only be judged per request, with TLS intercepted;
	// without interception such a tunnel must be refused (fail closed).
	Inspect bool `json:"inspect,omitempty"`
}

// Policy decides what a sandbox may reach. egress/rules implements it
// natively; the Rego engine will implement it too.
type Policy interface {
	// AllowsName reports whether any request to host could be allowed:
	// the resolver answers names only when it does.
	AllowsName(host string) bool
	// Tunnel decides whether a connection to host:port (a CONNECT, or a
	// redirected connection) may start at all.
	Tunnel(host string, port int) Decision
	// Decide judges one HTTP request (plain, or inside intercepted TLS).
	Decide(r Request) Decision
}

// Event is one decision worth keeping (the session's ledger), never with a
// secret in it.
type Event struct {
	Sandbox string `json:"-"`
	Kind    string `json:"kind"` // "egress.allow", "egress.deny", "dns.deny"
	Host    string `json:"host"`
	Port    int    `json:"port,omitempty"`
	Method  string `json:"method,omitempty"`
	Path    string `json:"path,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Grant   string `json:"grant,omitempty"` // the id of a grant that was injected
}

// Recorder receives events. It must not block for long.
type Recorder func(Event)

// Resolver looks names up; *net.Resolver is one (tests point it at a DNS
// server of their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// GrantSource is where the proxy finds a sandbox's live credential
// grants (GrantsFor, called on every intercepted request, so it must be
// cheap and safe for concurrent use) and asks whether one covers a
// request inside intercepted TLS (GrantApplies). hostd/grants' Service
// is the daemon's.
type GrantSource interface {
	GrantsFor(sandbox string) []Grant
	GrantApplies(sandbox string, g Grant, r Request) bool
}

// Grant is a credential the proxy injects into a sandbox's requests to
// some hosts, so the sandbox never holds it.
type Grant struct {
	ID        string    `json:"id"`
	SecretRef string    `json:"secret_ref,omitempty"`
	Hosts     []string  `json:"hosts"`
	Methods   []string  `json:"methods,omitempty"`
	Paths     []string  `json:"paths,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
	// Header is the header to set (default Authorization) and Value its
	// value. Value is never serialised, logged or ledgered.
	Header string `json:"header,omitempty"`
	Value  string `json:"-"`
}
