package sessiontest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/session"
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
