package session

// The core's surface for its sibling packages (hostd/grants,
// hostd/previews, ...). A sibling imports this package and works through
// these methods; this package never imports a sibling. Where the core
// needs a sibling to act (a session stopped, so its grants and previews
// go), it declares the hook here and the sibling registers itself on it
// when hostd/daemon wires the daemon together. docs/ARCHITECTURE.md
// ("The session core and its siblings") has the rule; deps_test.go holds
// it.

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/policy"
)

// Load returns session id as the caller with tenant sees it ("": the
// admin's view): another tenant's session is ErrNotFound. It may be of
// either kind (a session or a sandbox) and in any state.
func (m *Manager) Load(ctx context.Context, tenant, id string) (*Session, error) {
	s, _, err := m.load(ctx, tenant, id)
	return s, err
}

// LoadSession is Load for the routes that serve agent sessions only
// (grants, previews, tokens): a sandbox's id is refused (NotSession).
func (m *Manager) LoadSession(ctx context.Context, tenant, id string) (*Session, error) {
	s, _, err := m.load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if s.Kind == KindSandbox {
		return nil, notSessionErr(id)
	}
	return s, nil
}

// CreateKind is Create for a record of kind ("" for an agent session,
// KindSandbox for hostd/sandboxes): the same checks, machine, ledger
// and adoption; a sandbox's id starts with SandboxIDPrefix.
func (m *Manager) CreateKind(ctx context.Context, tenant string, req CreateRequest, kind string) (*Session, error) {
	if kind != "" && kind != KindSandbox {
		return nil, bad("kind %q is unknown; use %q or leave it out", kind, KindSandbox)
	}
	return m.create(ctx, tenant, req, kind)
}

// MarkExpired marks record id, running at revision rev, expired, and
// nothing else: its machine and checkpoints stay until the caller deletes
// it (a sandbox, removed at its TTL). Of two calls that race on the same
// revision one succeeds; the other gets ErrRevision.
func (m *Manager) MarkExpired(ctx context.Context, id string, rev int64) error {
	_, err := m.update(ctx, id, rev, func(s *Session) error { s.State = StateExpired; return nil })
	return err
}

// Running is Load for a session that must be running: one in another
// state, or whose sandbox stopped meanwhile, is ErrConflict. It returns
// the session's machine too.
func (m *Manager) Running(ctx context.Context, tenant, id string) (*Session, hypervisor.Machine, error) {
	s, _, mc, err := m.running(ctx, tenant, id)
	return s, mc, err
}

// Machine returns session id's running machine, or nil when it has none
// on this daemon. It reads memory only.
func (m *Manager) Machine(id string) hypervisor.Machine {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.machines[id]
}

// Guest is the guest agent's client of a machine, shared by every caller
// of that machine (so connections are reused).
func Guest(mc hypervisor.Machine) *client.Client { return clientFor(mc) }

// LedgerAppend records kind with data in session id's ledger; the actor
// is the caller in ctx (or the daemon). A failure is logged, not
// returned: the ledger never stops the action it records.
func (m *Manager) LedgerAppend(ctx context.Context, id, kind string, data any) {
	m.ledgerAppend(ctx, id, kind, data)
}

// Now is the Manager's clock (tests may set it).
func (m *Manager) Now() time.Time { return m.now() }

// Logger is the Manager's logger.
func (m *Manager) Logger() *slog.Logger { return m.log }

// Policy is the policy engine (nil when the daemon has none).
func (m *Manager) Policy() Decider { return m.policy }

// ClipText cuts s to at most n bytes (on a rune boundary), marking a cut
// with "…".
func ClipText(s string, n int) string { return clipText(s, n) }

// BadRequest is an ErrBadRequest (400) with a message.
func BadRequest(f string, a ...any) error { return bad(f, a...) }

// CallerOf is who made the call, as policy decisions and approval
// records see it; a call that carries no verified caller is refused (403).
func CallerOf(ctx context.Context) (policy.Actor, error) { return callerOf(ctx) }

// ActorString is an actor as the ledger and approval records name it.
func ActorString(a policy.Actor) string { return actorString(a) }

// ParseActor reads ActorString's form back.
func ParseActor(s string) policy.Actor { return parseActor(s) }

// StopReason says why a session stopped running, for a StopHook.
type StopReason string

// The reasons a session stops running on this daemon.
const (
	StopDeleted  StopReason = "session deleted"
	StopExpired  StopReason = "session expired"
	StopLost     StopReason = "sandbox lost"
	StopShutdown StopReason = "" // the daemon stops; the session stays running for the next start to adopt or find lost
)

// StopHook is told when a session stops running on this daemon, after its
// sandbox stopped: a sibling forgets what it held for the session (and
// ledgers what it revoked, except at StopShutdown, which records nothing).
// It must not call back into the Manager's lifecycle (Delete, Sweep).
type StopHook func(ctx context.Context, id string, why StopReason)

// hookList is the hooks of one kind siblings added, in order.
type hookList[H any] struct {
	mu    sync.RWMutex
	hooks []H
}

func (l *hookList[H]) add(h H) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hooks = append(l.hooks, h)
}

func (l *hookList[H]) list() []H {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.hooks
}

// OnStop adds a hook every stop of a session runs, after those added
// before it. Add hooks before the daemon serves.
func (m *Manager) OnStop(h StopHook) {
	if h == nil {
		panic("session: OnStop needs a hook")
	}
	m.stops.add(h)
}

// runStopHooks runs the stop hooks for session id.
func (m *Manager) runStopHooks(ctx context.Context, id string, why StopReason) {
	if why == StopDeleted || why == StopExpired {
		m.vmEvent(id, VMEventStop, map[string]any{"reason": why.String()})
	}
	for _, h := range m.stops.list() {
		h(ctx, id, why)
	}
}

// AdoptHook is told when this daemon adopts a running session that an
// earlier daemon on the state dir left behind (Reattach), after its
// sandbox is tracked again: a sibling loads what it keeps in the store
// for the session. It must not call back into the Manager's lifecycle.
type AdoptHook func(ctx context.Context, id string)

// OnAdopt adds a hook every adoption runs. Add hooks before the daemon
// serves (Reattach runs before it serves).
func (m *Manager) OnAdopt(h AdoptHook) {
	if h == nil {
		panic("session: OnAdopt needs a hook")
	}
	m.adopts.add(h)
}

func (m *Manager) runAdoptHooks(ctx context.Context, id string) {
	for _, h := range m.adopts.list() {
		h(ctx, id)
	}
}

// String is the reason as the ledger writes it.
func (r StopReason) String() string {
	if r == StopShutdown {
		return "daemon shutdown"
	}
	return string(r)
}

// Usage is session id's usage as its counters and its unsettled jobs
// give it now (compute is the larger of exec plus job time and CPU time).
func (m *Manager) Usage(ctx context.Context, id string) Usage { return m.usage(ctx, id) }

// RefreshJobs asks the guest c of session id for its jobs, settles the
// ended ones and those the guest no longer knows into the usage, and
// returns the running ones.
func (m *Manager) RefreshJobs(ctx context.Context, id string, c *client.Client) ([]api.Job, error) {
	return m.refreshJobs(ctx, id, c)
}

// ChargeCPU charges session id the CPU time its sandbox used since the
// last charge and returns usage.cpu_ms; ok is false when its machine
// does not report CPU time.
func (m *Manager) ChargeCPU(ctx context.Context, id string) (cpuMS int64, ok bool) {
	return m.chargeCPU(ctx, id)
}

// AdmitWrite asks the budgets service whether a file write or upload
// (what) of n bytes may go to s's workspace: nothing to ask for a session
// without a budget, and refused (503) when the service is missing.
func (m *Manager) AdmitWrite(ctx context.Context, s *Session, c *client.Client, n int64, what string) error {
	return m.admitWrite(ctx, s, c, n, what)
}

// Stopped reports whether Shutdown or Detach ran: a sibling's background
// work (a watcher) ends.
func (m *Manager) Stopped() bool { return m.stopped() }
