package sandboxes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"paddock.dev/paddock/hostd/budgets"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/policy"
)

// rig is a Manager (from hostd/session/sessiontest) with the sandboxes
// and budgets services on it, as hostd/daemon wires them, its store and
// ledger, and the clock the test moves.
type rig struct {
	s     *Service
	m     *session.Manager
	st    *store.Store
	led   *ledger.Ledger
	clock *sessiontest.Clock
}

// engine is a policy engine with the operator modules mods (file name →
// Rego); nil: the built-in modules only.
func engine(t *testing.T, mods map[string]string) *policy.Engine {
	t.Helper()
	opts := policy.Options{}
	if len(mods) > 0 {
		dir := t.TempDir()
		for name, text := range mods {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		opts.ExtDir = dir
	}
	eng, err := policy.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

func newRig(t *testing.T, eng *policy.Engine, opts ...sessiontest.Option) *rig {
	t.Helper()
	r := &rig{clock: &sessiontest.Clock{}}
	opts = append(opts, sessiontest.Now(r.clock.Now))
	if eng != nil {
		opts = append(opts, sessiontest.Policy(eng))
	}
	r.m = sessiontest.New(t, opts...)
	r.st, r.led = r.m.Store(), sessiontest.Ledger(r.m)
	r.m.SetBudgets(budgets.New(r.m))
	r.s = New(r.m)
	return r
}

// procboxRig runs real procbox sandboxes (root).
func procboxRig(t *testing.T, eng *policy.Engine) *rig {
	t.Helper()
	return newRig(t, eng, sessiontest.Procbox())
}

// fakeRig runs on the fake backend (hypervisor/fake: the real guest agent
// in the test's process, no namespaces, no root). Its commands run on the
// host as the test's user, so the tests give them relative paths only;
// the files routes are confined to the machine's own directory.
func fakeRig(t *testing.T, eng *policy.Engine) *rig {
	t.Helper()
	return newRig(t, eng)
}

// entries is the data of the entries of kind in record id's ledger.
func entries(t *testing.T, led *ledger.Ledger, id, kind string) []map[string]any {
	t.Helper()
	es, err := led.List(context.Background(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range es {
		if e.Kind != kind {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// stepTrace records the steps every entry walks, per kind.
type stepTrace struct {
	mu    sync.Mutex
	steps map[session.CommandKind][]string
}

func traceSteps(m *session.Manager) *stepTrace {
	tr := &stepTrace{steps: map[session.CommandKind][]string{}}
	m.TraceSteps(func(kind session.CommandKind, step string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.steps[kind] = append(tr.steps[kind], step)
	})
	return tr
}

// take returns the steps kind walked since the last take, and forgets them.
func (tr *stepTrace) take(kind session.CommandKind) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := strings.Join(tr.steps[kind], " ")
	delete(tr.steps, kind)
	return out
}
