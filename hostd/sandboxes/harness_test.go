package sandboxes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/budgets"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/fake"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// rig is a Manager with the sandboxes and budgets services on it, its
// store and ledger, and the skew the test adds to the Manager's clock.
type rig struct {
	s    *Service
	m    *session.Manager
	st   *store.Store
	led  *ledger.Ledger
	skew *atomic.Int64
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

func newRig(t *testing.T, state string, b hypervisor.Backend, image string, eng *policy.Engine) *rig {
	t.Helper()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &rig{st: st, led: ledger.New(st), skew: new(atomic.Int64)}
	cfg := session.Config{Store: st, Ledger: r.led, Backend: b, DefaultImage: image,
		Now: func() time.Time { return time.Now().Add(time.Duration(r.skew.Load())) }}
	if eng != nil {
		cfg.Policy = eng
	}
	r.m = session.New(cfg)
	r.m.SetBudgets(budgets.New(r.m)) // as hostd/daemon does
	r.s = New(r.m)
	t.Cleanup(func() { r.m.Shutdown(context.Background()) })
	return r
}

// procboxRig runs real procbox sandboxes (root).
func procboxRig(t *testing.T, eng *policy.Engine) *rig {
	t.Helper()
	testutil.RequiresRoot(t)
	state := t.TempDir()
	b, err := procbox.New(hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return newRig(t, state, b, testutil.MiniImageName, eng)
}

// fakeRig runs on the fake backend (hypervisor/fake: the real guest agent
// in the test's process, no namespaces, no root). Its commands run on the
// host as the test's user, so the tests give them relative paths only;
// the files routes are confined to the machine's own directory.
func fakeRig(t *testing.T, eng *policy.Engine) *rig {
	t.Helper()
	state := t.TempDir()
	b := fake.New(filepath.Join(state, "fake"))
	t.Cleanup(func() { b.Close() })
	if eng == nil {
		eng = engine(t, nil)
	}
	return newRig(t, state, b, "any", eng)
}

// ledgerKinds is the kinds of record id's ledger, in order, joined by ",".
func ledgerKinds(t *testing.T, led *ledger.Ledger, id string) string {
	t.Helper()
	es, err := led.List(context.Background(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, e := range es {
		ks = append(ks, e.Kind)
	}
	return strings.Join(ks, ",")
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
