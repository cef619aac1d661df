package session

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor/fake"
	"paddock.dev/paddock/policy"
)

// stepTrace records the steps every entry walks, per kind.
type stepTrace struct {
	mu    sync.Mutex
	steps map[CommandKind][]string
}

func traceSteps(m *Manager) *stepTrace {
	tr := &stepTrace{steps: map[CommandKind][]string{}}
	m.TraceSteps(func(kind CommandKind, step string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.steps[kind] = append(tr.steps[kind], step)
	})
	return tr
}

// take returns the steps kind walked since the last take, and forgets them.
func (tr *stepTrace) take(kind CommandKind) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := strings.Join(tr.steps[kind], " ")
	delete(tr.steps, kind)
	return out
}

// policyManager is sandboxManager with a policy engine whose operator
// modules are mods (file name → Rego).
func policyManager(t *testing.T, mods map[string]string) *Manager {
	t.Helper()
	m, _, _, _ := sandboxManager(t)
	dir := t.TempDir()
	for name, text := range mods {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := policy.New(policy.Options{ExtDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m.policy = eng
	return m
}

// fakeManager is a Manager on the fake backend (hypervisor/fake: the real
// guest agent in the test's process, no namespaces, no root), with a
// store, a ledger and the built-in policy. Its commands run on the host
// as the test's user, so the tests give them relative paths only.
func fakeManager(t *testing.T) *Manager {
	t.Helper()
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := fake.New(filepath.Join(state, "fake"))
	t.Cleanup(func() { b.Close() })
	eng, err := policy.New(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := New(Config{Store: st, Ledger: ledger.New(st), Backend: b, DefaultImage: "any", Policy: eng})
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

// ledgerKinds is the kinds of session id's ledger, in order.
func pipeKinds(t *testing.T, m *Manager, id string) []string {
	t.Helper()
	es, err := m.Events(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Kind)
	}
	return out
}

// lastEntry is the data of the last entry of kind in session id's ledger.
func lastEntry(t *testing.T, m *Manager, id, kind string) map[string]any {
	t.Helper()
	es, err := m.Events(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Kind == kind {
			var d map[string]any
			if err := json.Unmarshal(es[i].Data, &d); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no %s entry in %v", kind, pipeKinds(t, m, id))
	return nil
}

// TestPipelineSteps: every entry of the core (exec, exec/stream, a
// job) walks the pipeline's named steps in order, and the command hooks
// see each of them with its kind. (A terminal's walk is hostd/terminals'
// TestTerminalPipelineSteps, a sandbox's process and fs/write
// hostd/sandboxes' TestSandboxPipelineSteps, a git verb's and a file
// change's hostd/workspace's TestWorkspacePipelineSteps.)
func TestPipelineSteps(t *testing.T) {
	m := policyManager(t, nil)
	tr := traceSteps(m)
	var seenMu sync.Mutex
	var seen []string
	m.AddCommandHook("watch", func(_ context.Context, c *Command) error {
		seenMu.Lock()
		defer seenMu.Unlock()
		seen = append(seen, string(c.Kind)+":"+c.Text)
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	const full = "validate load judge gate admit spend hooks run record usage"
	if _, err := m.Exec(ctx, "", s.ID, ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.StartExecStream(ctx, "", s.ID, ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.StartJob(ctx, "", s.ID, JobStart{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, got, want string }{
		{"exec", tr.take(CommandExec), full},
		{"exec/stream", tr.take(CommandStream), full},
		{"job", tr.take(CommandJob), full},
	} {
		if c.got != c.want {
			t.Errorf("%s walked %q, want %q", c.name, c.got, c.want)
		}
	}
	want := []string{"exec:true", "exec/stream:true", "job:true"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("the hook saw (-want +got):\n%s", diff)
	}

	// A walk stops at the step that refuses: an empty command at
	// validate, a session that is not there at load.
	m.Exec(ctx, "", s.ID, ExecRequest{Command: " "})
	m.Exec(ctx, "", "ses-0000000000000000", ExecRequest{Command: "true"})
	if got := tr.take(CommandExec); got != "validate validate load" {
		t.Errorf("refused execs walked %q, want %q", got, "validate validate load")
	}
}

// TestPipelineHookRefuses runs on the fake backend (no root), with
// relative paths only. A hook that refuses stops the command before
// the guest sees it and the ledger says which hook and why; a hook's
// annotation lands in the command's entry; a hook's conflict keeps its
// 409. (That a refused command's budget unit goes back is
// hostd/budgets.TestBudgetUnitBackWhenHookRefuses; a file write and a git
// verb refused by a hook are hostd/workspace's TestWorkspaceHookRefuses.)
func TestPipelineHookRefuses(t *testing.T) {
	m := fakeManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m.AddCommandHook("rewind", func(_ context.Context, c *Command) error {
		switch {
		case strings.Contains(c.Text, "conflict"):
			return errorsJoinConflict
		case strings.Contains(c.Text, "refuse-me"):
			return errors.New("no point could be taken")
		}
		c.Annotate("point", 7)
		return nil
	})
	s, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Exec(ctx, "", s.ID, ExecRequest{Command: "touch marker # refuse-me"})
	var hr *HookRefused
	if !errors.As(err, &hr) || hr.Hook != "rewind" || !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "no point could be taken") {
		t.Fatalf("refused by the hook: %v, want a HookRefused of rewind (403)", err)
	}
	d := lastEntry(t, m, s.ID, "exec.refused")
	if d["hook"] != "rewind" || d["command"] != "touch marker # refuse-me" || !strings.Contains(d["reason"].(string), "no point") {
		t.Errorf("exec.refused: %v", d)
	}
	// The guest never ran it.
	r, err := m.Exec(ctx, "", s.ID, ExecRequest{Command: "test -e marker; echo $?"})
	if err != nil || r.Stdout != "1\n" {
		t.Fatalf("the refused command ran: %+v %v", r, err)
	}
	e := lastEntry(t, m, s.ID, "exec")
	if n, _ := e["hooks"].(map[string]any); n == nil || n["point"] != float64(7) {
		t.Errorf("exec entry without the hook's note: %v", e)
	}

	// A hook's own kind of error is kept.
	_, err = m.Exec(ctx, "", s.ID, ExecRequest{Command: "echo conflict > x"})
	if !errors.Is(err, ErrConflict) || errors.Is(err, ErrForbidden) {
		t.Errorf("a hook's conflict: %v, want ErrConflict only", err)
	}
	if e := lastEntry(t, m, s.ID, "exec.refused"); e["hook"] != "rewind" || e["command"] != "echo conflict > x" {
		t.Errorf("exec.refused of the conflict: %v", e)
	}
	if r, err := m.Exec(ctx, "", s.ID, ExecRequest{Command: "test -e x; echo $?"}); err != nil || r.Stdout != "1\n" {
		t.Errorf("the refused command ran: %+v %v", r, err)
	}
}

var errorsJoinConflict = errors.Join(errors.New("a restore is being taken"), ErrConflict)

// TestPipelineWalk holds the walk's rules without a sandbox: a step that fails
// stops the walk and what earlier steps took is given back; once run has
// started the command, record and usage still follow and nothing is given
// back; a step that answers ends the walk successfully; what runs after
// always does, last taken first.
func TestPipelineWalk(t *testing.T) {
	m := New(Config{})
	for _, tc := range []struct {
		name     string
		failAt   string // the step that fails
		ran      bool   // run started the command before failing
		answerAt string
		want     string
		wantErr  bool
	}{
		{name: "all", want: "validate load gate admit hooks run record usage after2 after1"},
		{name: "refused at hooks", failAt: StepHooks, want: "validate load gate admit hooks undo-admit after2 after1", wantErr: true},
		{name: "refused at validate", failAt: StepValidate, want: "validate", wantErr: true},
		{name: "cut off in run", failAt: StepRun, ran: true, want: "validate load gate admit hooks run record usage after2 after1", wantErr: true},
		{name: "refused by the guest", failAt: StepRun, want: "validate load gate admit hooks run undo-admit after2 after1", wantErr: true},
		{name: "answered at gate", answerAt: StepGate, want: "validate load gate after2 after1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			p := m.newPipe(context.Background(), CommandExec, "", "ses-1")
			mk := func(name string, extra func(p *pipe)) pipeStep {
				return pipeStep{name, func(_ context.Context, p *pipe) error {
					got = append(got, name)
					if extra != nil {
						extra(p)
					}
					if name == tc.answerAt {
						p.answered = true
					}
					if name == tc.failAt {
						p.ran, p.kept = tc.ran, tc.ran
						return ErrForbidden
					}
					return nil
				}}
			}
			err := p.walk(context.Background(),
				mk(StepValidate, nil),
				mk(StepLoad, nil),
				mk(StepGate, func(p *pipe) {
					p.after = append(p.after, func() { got = append(got, "after1") }, func() { got = append(got, "after2") })
				}),
				mk(StepAdmit, func(p *pipe) { p.undo = append(p.undo, func() { got = append(got, "undo-admit") }) }),
				mk(StepHooks, nil),
				mk(StepRun, func(p *pipe) {
					if tc.failAt == "" {
						p.ran, p.kept = true, true
					}
				}),
				mk(StepRecord, nil),
				mk(StepUsage, nil),
			)
			if (err != nil) != tc.wantErr {
				t.Errorf("err %v, want an error: %v", err, tc.wantErr)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("walked %q, want %q", g, tc.want)
			}
		})
	}
}

// TestPipelineHookSeesSessionTenant: a hook keyed by tenant reads the
// session's own tenant, also when the admin (whose view is "") calls.
func TestPipelineHookSeesSessionTenant(t *testing.T) {
	m := fakeManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var seen []string
	m.AddCommandHook("tenants", func(_ context.Context, c *Command) error {
		seen = append(seen, c.Tenant+"|"+c.SessionTenant)
		return nil
	})
	s, err := m.Create(ctx, "acme", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	for _, caller := range []string{"acme", ""} {
		if _, err := m.Exec(ctx, caller, s.ID, ExecRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"acme|acme", "|acme"}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("hook saw %q, want %q", seen, want)
	}
}
