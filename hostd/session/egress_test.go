package session_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
	"paddock.dev/paddock/hypervisor"
)

// openEgress is an Egress that serves nothing: it keeps the recorder each
// sandbox was opened with, so a test can play the proxy.
type openEgress struct {
	mu     sync.Mutex
	rec    map[string]egress.Recorder
	closed []string
}

func (e *openEgress) Open(sandbox, dir string, pol egress.Policy, rec egress.Recorder) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rec[sandbox] = rec
	return nil
}

func (e *openEgress) Close(sandbox string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = append(e.closed, sandbox)
}

func (e *openEgress) Intercepts() bool { return false }

func (e *openEgress) recorder(id string) egress.Recorder {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rec[id]
}

// callLog is an EgressLog that notes what the core asks of it. Closed
// ledgers an entry, as hostd/egresslog ledgers a window's summary, so the
// test can see where it falls in the session's ledger.
type callLog struct {
	m *session.Manager

	mu     sync.Mutex
	events []egress.Event
	calls  []string
}

func (l *callLog) note(c string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

func (l *callLog) Record(ev egress.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *callLog) Closed(sandbox string) {
	l.note("closed " + sandbox)
	l.m.LedgerAppend(context.Background(), sandbox, "egress.summary", map[string]any{"closed": true})
}

func (l *callLog) Settle()                   { l.note("settle") }
func (l *callLog) Prune(ctx context.Context) { l.note("prune") }
func (l *callLog) Flush()                    { l.note("flush") }

// count is how many times the core asked c.
func (l *callLog) count(c string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, x := range l.calls {
		if x == c {
			n++
		}
	}
	return n
}

func (l *callLog) saw(c string) bool { return l.count(c) > 0 }

// networkBackend is the fake backend taking a sandbox with a network:
// the fake serves no network mode but offline, and what is tested here
// is the core's side of egress, not the sandbox's.
type networkBackend struct{ hypervisor.Backend }

func (b networkBackend) Create(ctx context.Context, spec hypervisor.MachineSpec) (hypervisor.Machine, error) {
	spec.Network, spec.EgressDir = hypervisor.NetworkOffline, ""
	return b.Backend.Create(ctx, spec)
}

// egressManager is a manager on the fake backend with an Egress that
// keeps its recorders, and no egress log yet.
func egressManager(t *testing.T) (*session.Manager, *openEgress) {
	t.Helper()
	eg := &openEgress{rec: map[string]egress.Recorder{}}
	m := sessiontest.New(t, sessiontest.Egress(eg),
		sessiontest.WrapBackend(func(b hypervisor.Backend) hypervisor.Backend { return networkBackend{b} }))
	return m, eg
}

func allowPolicy(enforcement string) *session.PolicyRequest {
	return &session.PolicyRequest{PolicyInput: rules.PolicyInput{Network: &rules.Network{
		Allow: []rules.AllowEntry{{Host: "example.com"}}, Enforcement: enforcement}}}
}

// TestEgressLogFedByCore: the core gives the egress log the decisions of
// a sandbox's egress (the recorder the proxy is opened with is the log's),
// closes the sandbox's part before the delete is ledgered, settles it
// before a ledger is read, prunes it in the sweep and flushes it at
// shutdown.
func TestEgressLogFedByCore(t *testing.T) {
	m, eg := egressManager(t)
	log := &callLog{m: m}
	m.SetEgressLog(log)
	ctx := context.Background()
	s, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600, Policy: allowPolicy("")})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Capabilities.Egress {
		t.Error("a daemon with egress and an egress log says it has no egress")
	}
	rec := eg.recorder(s.ID)
	if rec == nil {
		t.Fatal("the sandbox's egress was not opened")
	}
	rec(egress.Event{Sandbox: s.ID, Kind: "egress.deny", Host: "other.test"})
	if len(log.events) != 1 || log.events[0].Host != "other.test" {
		t.Errorf("the egress log got %+v, want the proxy's decision", log.events)
	}
	// Every reader of the ledger settles the log before it reads.
	for _, r := range []struct {
		name string
		read func() error
	}{
		{"Events", func() error { _, err := m.Events(ctx, "", s.ID); return err }},
		{"EventsAfter", func() error { _, err := m.EventsAfter(ctx, "", s.ID, 0); return err }},
		{"Trajectory", func() error { _, err := m.Trajectory(ctx, "", s.ID); return err }},
	} {
		before := log.count("settle")
		if err := r.read(); err != nil || log.count("settle") != before+1 {
			t.Errorf("%s did not settle the egress log before reading the ledger (%v, calls %v)", r.name, err, log.calls)
		}
	}
	if err := m.Delete(ctx, "", s.ID); err != nil {
		t.Fatal(err)
	}
	if !log.saw("closed " + s.ID) {
		t.Errorf("deleting the session did not close its egress log: %v", log.calls)
	}
	kinds := strings.Split(sessiontest.LedgerKinds(t, sessiontest.Ledger(m), s.ID), ",")
	if i, j := slices.Index(kinds, "egress.summary"), slices.Index(kinds, "session.delete"); i < 0 || j < 0 || i > j {
		t.Errorf("ledger %v: the egress log's entry must come before session.delete", kinds)
	}
	m.Sweep(ctx)
	if !log.saw("prune") {
		t.Errorf("the sweep did not prune the egress log: %v", log.calls)
	}
	m.Shutdown(ctx)
	if !log.saw("flush") {
		t.Errorf("shutdown did not flush the egress log: %v", log.calls)
	}
}

// TestNoEgressLogNoNetwork: without an egress log the core fails closed:
// a network policy is refused (409), best-effort or not, and no egress is
// opened, so no decision can go unrecorded; the daemon says it has no
// egress. An offline session is still made. A fork of a session with a
// network, made once the log is gone, is refused too.
func TestNoEgressLogNoNetwork(t *testing.T) {
	m, eg := egressManager(t)
	ctx := context.Background()
	for _, enf := range []string{"", rules.EnforcementBestEffort} {
		_, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600, Policy: allowPolicy(enf)})
		if !errors.Is(err, session.ErrConflict) || !strings.Contains(err.Error(), "no egress log") {
			t.Errorf("a network policy (enforcement %q) with no egress log: %v, want 409 naming the egress log", enf, err)
		}
	}
	s, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatalf("an offline session with no egress log: %v", err)
	}
	if s.Capabilities.Egress {
		t.Error("a daemon without an egress log says it has egress")
	}
	eg.mu.Lock()
	opened := len(eg.rec)
	eg.mu.Unlock()
	if opened != 0 {
		t.Errorf("egress was opened for %d sandboxes with no egress log", opened)
	}

	// A session with a network, made while there was a log, forked
	// after it went: the child is made, but its egress is not opened
	// (the fork logs why), so none of its decisions can go unrecorded.
	m.SetEgressLog(&callLog{m: m})
	net, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600, Policy: allowPolicy("")})
	if err != nil {
		t.Fatal(err)
	}
	m.SetEgressLog(nil)
	kids, err := m.Fork(ctx, "", net.ID, -1, session.ForkRequest{Count: 1})
	if err != nil || len(kids) != 1 {
		t.Fatalf("fork: %v %v", kids, err)
	}
	if eg.recorder(kids[0].ID) != nil || eg.recorder(net.ID) == nil {
		t.Errorf("egress opened for the fork child with no egress log (parent's: %v)", eg.recorder(net.ID) != nil)
	}
}
