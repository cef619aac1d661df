package sessiontest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/policy"
)

// TestNew: the default manager runs a command on the fake backend with
// the built-in policy (process rules accepted) and ledgers it; Policy(nil)
// gives one without a policy engine (process rules refused, 409); Now
// gives the manager the test's clock; StateDir keeps the store there.
func TestNew(t *testing.T) {
	ctx := context.Background()
	rules := &session.PolicyRequest{Process: &policy.ProcessRules{Deny: []string{"rm *"}}}
	m := New(t)
	s, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600, Policy: rules})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "echo hi"}); err != nil || r.Stdout != "hi\n" {
		t.Fatalf("exec: %+v %v", r, err)
	}
	if k := LedgerKinds(t, Ledger(m), s.ID); k == "" || k[len(k)-4:] != "exec" {
		t.Errorf("ledger kinds %q, want an exec last", k)
	}

	var clock Clock
	dir := t.TempDir()
	bare := New(t, Policy(nil), Now(clock.Now), StateDir(dir))
	s2, err := bare.Create(ctx, "", session.CreateRequest{TTLSeconds: 600, Policy: rules})
	if err == nil {
		_, err = bare.Exec(ctx, "", s2.ID, session.ExecRequest{Command: "true"})
	}
	if !errors.Is(err, session.ErrConflict) {
		t.Errorf("process rules on a manager without a policy engine: %v, want 409", err)
	}
	clock.Set(time.Hour)
	if d := time.Until(bare.Now()); d < 59*time.Minute || d > 61*time.Minute || clock.Offset() != time.Hour {
		t.Errorf("the manager's clock is %v off, want an hour", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "paddock.db")); err != nil {
		t.Errorf("the store is not in the state directory: %v", err)
	}
}

// countingBackend counts the sandboxes made through it.
type countingBackend struct {
	hypervisor.Backend
	made *atomic.Int32
}

func (b countingBackend) Create(ctx context.Context, spec hypervisor.MachineSpec) (hypervisor.Machine, error) {
	b.made.Add(1)
	return b.Backend.Create(ctx, spec)
}

// noEgress is an Egress that opens nothing.
type noEgress struct{}

func (noEgress) Open(string, string, egress.Policy, egress.Recorder) error { return nil }
func (noEgress) Close(string)                                              {}
func (noEgress) Intercepts() bool                                          { return false }

// TestWrapAndEgress: WrapBackend's wrapper makes the manager's sandboxes;
// Egress gives the manager a network service (so, with an egress log, it
// says it has egress).
func TestWrapAndEgress(t *testing.T) {
	ctx := context.Background()
	var made atomic.Int32
	m := New(t, WrapBackend(func(b hypervisor.Backend) hypervisor.Backend { return countingBackend{b, &made} }), Egress(noEgress{}))
	m.SetEgressLog(discardLog{})
	s, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if made.Load() != 1 {
		t.Errorf("the wrapper made %d sandboxes, want 1", made.Load())
	}
	if !s.Capabilities.Egress {
		t.Error("a manager given Egress and an egress log says it has no egress")
	}
}

// discardLog is an egress log that keeps nothing.
type discardLog struct{}

func (discardLog) Record(egress.Event)   {}
func (discardLog) Closed(string)         {}
func (discardLog) Settle()               {}
func (discardLog) Prune(context.Context) {}
func (discardLog) Flush()                {}
