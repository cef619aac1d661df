package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

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
	// Transparent: programs that ignore the proxy settings are redirected
	// to the same proxy, so the policy holds for every program.
	return hypervisor.NetworkTransparent, m.egressDir(id), nil
}

// openEgress starts serving a running sandbox's egress under pol.
func (m *Manager) openEgress(id string, pol *rules.Compiled) error {
	if pol == nil || pol.Offline() || m.egress == nil {
		return nil
	}
	dir := m.egressDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var judge egress.Policy = pol
	if n, ok := m.policy.(networkJudge); ok {
		judge = n.Network(id, pol) // decided by the http Rego module
	}
	return m.egress.Open(id, dir, judge, m.recordEgress)
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
	if err := os.RemoveAll(m.egressDir(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("remove egress directory", "session", id, "err", err)
	}
}

// egressQueue bounds the decisions waiting for the ledger.
const egressQueue = 4096

// egressLog takes egress decisions off the request path: the proxy hands
// each one over and goes on, and one goroutine appends them to the
// ledger in order (each append is a transaction synced to disk, which a
// request should not wait for). A burst past the queue is counted per
// sandbox and the count ledgered as egress.dropped, so the ledger says it
// is incomplete instead of silently missing entries.
type egressLog struct {
	pending atomic.Int64 // queued and not yet appended
	once    sync.Once
	ch      chan egress.Event
	done    chan struct{}
	mu      sync.Mutex
	dropped map[string]int
	closed  bool
}

// recordEgress queues an egress decision for the sandbox's ledger.
func (m *Manager) recordEgress(ev egress.Event) {
	l := &m.egressLog
	l.once.Do(func() {
		l.ch, l.done, l.dropped = make(chan egress.Event, egressQueue), make(chan struct{}), map[string]int{}
		go m.writeEgressLog()
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.pending.Add(1)
	select {
	case l.ch <- ev:
	default:
		l.pending.Add(-1)
		l.dropped[ev.Sandbox]++
	}
}

// settleEgressLog waits (a little) for queued decisions to reach the
// ledger, so a read of the ledger shows what was decided before it.
func (m *Manager) settleEgressLog() {
	for deadline := time.Now().Add(2 * time.Second); m.egressLog.pending.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

func (m *Manager) writeEgressLog() {
	l := &m.egressLog
	defer close(l.done)
	for ev := range l.ch {
		m.ledgerAppend(context.Background(), ev.Sandbox, ev.Kind, ev)
		l.pending.Add(-1)
		if len(l.ch) > 0 {
			continue
		}
		l.mu.Lock()
		dropped := l.dropped
		l.dropped = map[string]int{}
		l.mu.Unlock()
		for id, n := range dropped {
			m.ledgerAppend(context.Background(), id, "egress.dropped", map[string]any{"count": n, "reason": "more decisions at once than the ledger queue holds"})
		}
	}
}

// flushEgressLog writes what is queued and stops the writer (Shutdown,
// Detach).
func (m *Manager) flushEgressLog() {
	l := &m.egressLog
	l.mu.Lock()
	started := l.ch != nil && !l.closed
	l.closed = true
	l.mu.Unlock()
	if started {
		close(l.ch)
		<-l.done
	}
}
