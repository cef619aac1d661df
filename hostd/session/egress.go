package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hypervisor"
)

// Egress serves a sandbox's way out: its proxy, resolver and redirect
// sockets in one directory, judged by its policy (hostd/egress implements
// it over egress/proxy and egress/dns).
type Egress interface {
	// Open serves sandbox's sockets in dir (which exists, mode 0700) under
	// pol, recording decisions through rec. Opening a sandbox that is
	// open replaces its policy.
	Open(sandbox, dir string, pol egress.Policy, rec egress.Recorder) error
	// Close stops serving sandbox and removes its sockets.
	Close(sandbox string)
	// Intercepts reports whether HTTPS to hosts with method or path
	// rules is judged per request (TLS interception) rather than refused.
	Intercepts() bool
}

// EgressLog is where a sandbox's egress decisions go: hostd/egresslog
// folds them into the egress log and the session's ledger. The core
// hands it every decision of a sandbox's proxy and resolver, and tells it
// when to write what it holds. hostd/daemon sets it (SetEgressLog).
type EgressLog interface {
	// Record takes one decision; the proxy and the resolver call it on
	// their request paths, so it must not wait for the database.
	Record(ev egress.Event)
	// Closed says sandbox's egress closed: what is held for it goes to
	// the log and the ledger before Closed returns.
	Closed(sandbox string)
	// Settle waits (briefly) for the decisions recorded so far to reach
	// the ledger; the core calls it before it reads a ledger.
	Settle()
	// Prune removes what is past the log's retention (the sweep).
	Prune(ctx context.Context)
	// Flush writes everything held and stops taking decisions (Shutdown,
	// Detach). It may be called more than once.
	Flush()
}

// errNoEgressLog refuses a network to a sandbox when no egress log is
// set: its decisions would go unrecorded. hostd/daemon always sets one.
var errNoEgressLog = fmt.Errorf("%w: this daemon keeps no egress log, so it gives no sandbox a network (only an offline policy can be used)", ErrConflict)

type egressLogSlot struct {
	mu sync.RWMutex
	l  EgressLog
}

// SetEgressLog gives the Manager the egress log. Set it before the daemon
// serves. Without one no sandbox is given a network (a policy that is not
// offline is refused with 409, whatever its enforcement), so no decision
// goes unrecorded.
func (m *Manager) SetEgressLog(l EgressLog) {
	m.egressLog.mu.Lock()
	defer m.egressLog.mu.Unlock()
	m.egressLog.l = l
}

func (m *Manager) currentEgressLog() EgressLog {
	m.egressLog.mu.RLock()
	defer m.egressLog.mu.RUnlock()
	return m.egressLog.l
}

// settleEgressLog lets the decisions recorded so far reach the ledger.
func (m *Manager) settleEgressLog() {
	if l := m.currentEgressLog(); l != nil {
		l.Settle()
	}
}

// flushEgressLog writes what the egress log holds and stops it.
func (m *Manager) flushEgressLog() {
	if l := m.currentEgressLog(); l != nil {
		l.Flush()
	}
}

// pruneEgressLog removes egress log rows past their retention.
func (m *Manager) pruneEgressLog(ctx context.Context) {
	if l := m.currentEgressLog(); l != nil {
		l.Prune(ctx)
	}
}

// compilePolicy turns the create body's policy into the compiled policy.
// No policy means no network at all: egress is denied by default (the
// spec's "no policy is open" is not followed on purpose).
func compilePolicy(in *rules.PolicyInput) (*rules.Compiled, error) {
	return compilePolicyFor(in, false)
}

// compilePolicy compiles with this daemon's egress in mind.
func (m *Manager) compilePolicy(in *rules.PolicyInput) (*rules.Compiled, error) {
	return compilePolicyFor(in, m.egress != nil && m.egress.Intercepts())
}

func compilePolicyFor(in *rules.PolicyInput, intercepts bool) (*rules.Compiled, error) {
	p := rules.PolicyInput{Preset: rules.PresetOffline}
	if in != nil {
		p = *in
	}
	c, err := rules.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: policy: %v", ErrBadRequest, err)
	}
	// Method and path rules on HTTPS need TLS interception: without it
	// such hosts are refused over HTTPS (fail closed), so the rules hold
	// over plain HTTP only, and the record says so.
	if c.HasLimits() && !intercepts {
		c.AddUnenforced("method and path rules over HTTPS: TLS interception is not built yet, so HTTPS to a host with such rules is refused; plain HTTP is judged per request")
	}
	return c, nil
}

// egressDir is where sandbox id's sockets live.
func (m *Manager) egressDir(id string) string { return filepath.Join(m.egressRoot, id) }

// networkFor says how a machine reaches the world under pol, and checks
// the daemon can give it.
func (m *Manager) networkFor(id string, pol *rules.Compiled) (network, dir string, err error) {
	if pol.Offline() {
		return hypervisor.NetworkOffline, "", nil
	}
	if m.egress == nil || m.egressRoot == "" {
		if pol.Enforcement() == rules.EnforcementBestEffort {
			pol.AddUnenforced("this daemon serves no egress: the sandbox is offline")
			return hypervisor.NetworkOffline, "", nil
		}
		return "", "", fmt.Errorf("%w: this daemon serves no egress, so only an offline policy can be used (or network.enforcement \"best-effort\", which makes the sandbox offline)", ErrConflict)
	}
	if m.currentEgressLog() == nil {
		return "", "", errNoEgressLog
	}
	// Transparent: programs that ignore the proxy settings are redirected
	// to the same proxy, so the policy holds for every program.
	return hypervisor.NetworkTransparent, m.egressDir(id), nil
}

// openEgress starts serving a running sandbox's egress under pol.
func (m *Manager) openEgress(id string, pol *rules.Compiled) error {
	if pol == nil || pol.Offline() || m.egress == nil {
		return nil
	}
	rec := m.currentEgressLog()
	if rec == nil {
		return errNoEgressLog
	}
	dir := m.egressDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var judge egress.Policy = pol
	if n, ok := m.policy.(networkJudge); ok {
		judge = n.Network(id, pol) // decided by the http Rego module
	}
	return m.egress.Open(id, dir, judge, rec.Record)
}

// networkJudge is an engine that decides a sandbox's network requests
// (policy.Engine: the http Rego module over the compiled policy's data).
type networkJudge interface {
	Network(session string, c *rules.Compiled) egress.Policy
}

// closeEgress stops a sandbox's egress and removes its directory.
func (m *Manager) closeEgress(id string) {
	if m.egress == nil || m.egressRoot == "" {
		return
	}
	m.egress.Close(id)
	// What its open window folded goes to the log and the ledger now,
	// before whatever ends the sandbox is ledgered.
	if l := m.currentEgressLog(); l != nil {
		l.Closed(id)
	}
	if err := os.RemoveAll(m.egressDir(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("remove egress directory", "session", id, "err", err)
	}
}
