package sandboxes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// TestSweepRemovesExpiredSandboxes calls Sweep directly with the clock
// moved past the TTL: the core hands the sandboxes to this service, which
// removes them (machine stopped, record gone, ledger kept); sessions are
// only marked expired, and what has not expired is left alone.
func TestSweepRemovesExpiredSandboxes(t *testing.T) {
	r := procboxRig(t, nil)
	m, st := r.m, r.st
	ctx := context.Background()
	sb, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	// A sandbox an earlier sweep marked expired but could not remove.
	stuck, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateSession(ctx, stuck.ID, -1, func(row *store.SessionRow) error { row.State = session.StateExpired; return nil }); err != nil {
		t.Fatal(err)
	}
	young, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	ses, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	mc := m.Machine(sb.ID)
	if mc == nil {
		t.Fatal("no machine for the sandbox")
	}

	if n := m.Sweep(ctx); n != 0 {
		t.Errorf("a sweep before any TTL ran out: %d", n)
	}
	r.clock.Set(601 * time.Second)
	if n := m.Sweep(ctx); n != 3 {
		t.Errorf("sweep: %d, want 3 (two sandboxes removed, one session expired)", n)
	}
	for _, id := range []string{sb.ID, stuck.ID} {
		if _, err := st.GetSession(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("record of %s after the sweep: %v, want not found", id, err)
		}
		if _, err := r.s.Get(ctx, "", id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s) after the sweep: %v", id, err)
		}
		if err := r.s.Delete(ctx, "", id); err != nil {
			t.Errorf("Delete(%s) after the sweep: %v", id, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := mc.Wait(wctx); err != nil {
		t.Errorf("the sandbox's machine still runs: %v", err)
	}
	if ks := sessiontest.LedgerKinds(t, r.led, sb.ID); ks != "session.create,sandbox.expire,session.delete" {
		t.Errorf("ledger of the swept sandbox: %s", ks)
	}
	if ks := sessiontest.LedgerKinds(t, r.led, stuck.ID); ks != "session.create,session.delete" {
		t.Errorf("ledger of the stuck sandbox: %s", ks)
	}
	if got, err := r.s.Get(ctx, "", young.ID); err != nil || got.Status != session.StateRunning {
		t.Errorf("a sandbox within its TTL: %+v %v", got, err)
	}
	if got, err := m.Get(ctx, "", ses.ID); err != nil || got.State != session.StateExpired {
		t.Errorf("the session is kept as expired: %+v %v", got, err)
	}
	if n := m.Sweep(ctx); n != 0 {
		t.Errorf("a second sweep: %d", n)
	}
}

// TestExpiryTimerStoppedOnDelete: a sandbox deleted before its TTL takes
// its removal timer with it, and Shutdown disarms the rest.
func TestExpiryTimerStoppedOnDelete(t *testing.T) {
	r := procboxRig(t, nil)
	ctx := context.Background()
	a, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	if n := r.s.expiryTimers(); n != 2 {
		t.Fatalf("%d removal timers for two sandboxes", n)
	}
	if err := r.s.Delete(ctx, "", a.ID); err != nil {
		t.Fatal(err)
	}
	if n := r.s.expiryTimers(); n != 1 {
		t.Errorf("%d removal timers after deleting one of two sandboxes, want 1", n)
	}
	r.m.Shutdown(ctx)
	if n := r.s.expiryTimers(); n != 0 {
		t.Errorf("%d removal timers after Shutdown, want 0", n)
	}
}

// TestAdoptedSandboxRemovedAtTTL restarts the manager in one process: the
// next daemon adopts a sandbox with a short TTL and arms its removal
// timer again (the core's Adopted hook), so the sandbox goes at its TTL
// without waiting for a sweep.
func TestAdoptedSandboxRemovedAtTTL(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), AdoptLeftovers: true}
	open := func() (*session.Manager, *Service, func()) {
		b, err := procbox.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := session.New(session.Config{Store: st, Ledger: ledger.New(st), Backend: b, DefaultImage: testutil.MiniImageName})
		return m, New(m), func() { b.Close() }
	}
	m1, s1, close1 := open()
	sbx, err := s1.Create(ctx, "", SandboxRequest{TTLSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	m1.Detach(ctx)
	close1()

	m2, s2, close2 := open()
	defer close2()
	defer m2.Shutdown(ctx) // nothing outlives a failed test
	if adopted, lost := m2.Reattach(ctx); adopted != 1 || lost != 0 {
		t.Fatalf("reattach: adopted %d lost %d", adopted, lost)
	}
	if n := s2.expiryTimers(); n != 1 {
		t.Errorf("%d removal timers after adopting one sandbox, want 1", n)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// Looked at in the store: a read through the manager would remove
		// an expired sandbox itself.
		if _, err := st.GetSession(ctx, sbx.ID); errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an adopted sandbox outlived its TTL: its timer was not armed again")
		}
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/paddock/" + sbx.ID); len(left) > 0 {
		t.Errorf("the expired adopted sandbox still runs: %v", left)
	}
}

// TestSandboxProcessJudged: a sandbox's process is judged by the same
// process policy as a session's exec (the operator's modules: a sandbox
// has no rules of its own), refused with the same error and ledgered as
// exec.refused; a command the policy would hold is refused, since the
// sandbox API has no approvals; and it counts in, and is limited by, the
// record's exec budget.
func TestSandboxProcessJudged(t *testing.T) {
	r := procboxRig(t, engine(t, map[string]string{"guard.rego": `package paddock.ext.guard.process

deny contains "no rm -rf here" if contains(input.command, "rm -rf")

ask contains "deploys need a second pair of eyes" if startswith(input.command, "deploy")
`}))
	m := r.m
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	const bad = "touch /tmp/keep; rm -rf /tmp/keep"
	_, execErr := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: bad})
	_, procErr := r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: bad})
	var a, b *session.ProcessRefused
	if !errors.As(execErr, &a) || !errors.As(procErr, &b) {
		t.Fatalf("exec: %v; process: %v; want both refused by the policy", execErr, procErr)
	}
	if diff := cmp.Diff(a.Decision, b.Decision); diff != "" || execErr.Error() != procErr.Error() {
		t.Errorf("the decisions differ (-exec +process):\n%s\n%v\n%v", diff, execErr, procErr)
	}
	if ds := entries(t, r.led, sb.ID, "exec.refused"); len(ds) != 1 || ds[0]["rule"] != a.Decision.Rule || ds[0]["command"] != bad {
		t.Errorf("sandbox exec.refused: %v", ds)
	}
	if out, err := r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "test -e /tmp/keep; echo $?"}); err != nil || out.Stdout != "1\n" {
		t.Errorf("the refused command ran: %+v %v", out, err)
	}
	_, err = r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "deploy prod"})
	if !errors.As(err, &b) || b.Decision.Result != policy.Deny || !strings.Contains(err.Error(), "no approvals") {
		t.Errorf("a command the policy holds: %v, want a refusal saying the sandbox API has no approvals", err)
	}
	if rows, err := r.st.ListApprovals(ctx, sb.ID); err != nil || len(rows) != 0 {
		t.Errorf("approval rows for a sandbox: %v %v", rows, err)
	}

	// The budget: the record's max_execs limits the sandbox's processes
	// (each process so far counted one; the refused ones none).
	execs := func() int64 {
		got, err := m.Load(ctx, "", sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Usage.Execs
	}
	before := execs()
	if before != 1 {
		t.Errorf("execs counted before the budget: %d, want 1 (the refused ones are not counted)", before)
	}
	limit := before + 1
	setBudget(t, r.st, sb.ID, map[string]any{"max_execs": limit})
	if _, err := r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	_, err = r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "true"})
	var be *session.BudgetError
	if !errors.As(err, &be) || be.Budget != "max_execs" {
		t.Errorf("a process past max_execs: %v, want the budget's refusal", err)
	}
	if after := execs(); after != limit {
		t.Errorf("execs counted %d, want %d", after, limit)
	}
}

// TestSandboxProcessNeedsBudgets: a sandbox's process walks the admit
// step, so with a budget on its record and no budgets service it is
// refused (503 budgets_unavailable) and nothing runs; without the budget
// it runs again. It runs on the fake backend.
func TestSandboxProcessNeedsBudgets(t *testing.T) {
	r := fakeRig(t, nil)
	r.m.SetBudgets(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	setBudget(t, r.st, sb.ID, map[string]any{"max_execs": 5})
	_, err = r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "touch unchecked"})
	if !errors.Is(err, errdefs.ErrUnavailable) || errdefs.Code(err) != errdefs.CodeBudgetsUnavailable {
		t.Errorf("a process of a budgeted sandbox without a budgets service: %v, want 503 %s", err, errdefs.CodeBudgetsUnavailable)
	}
	_, err = r.s.WriteFile(ctx, "", sb.ID, SandboxWrite{Path: "/workspace/unchecked", Content: "x"})
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("a write to a budgeted sandbox without a budgets service: %v, want 503", err)
	}
	setBudget(t, r.st, sb.ID, nil)
	if out, err := r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "test -e unchecked; echo $?"}); err != nil || out.Stdout != "1\n" {
		t.Errorf("the refused process ran: %+v %v", out, err)
	}
	if _, err := r.s.ReadFile(ctx, "", sb.ID, "/workspace/unchecked"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused write was written: %v", err)
	}
}

// setBudget writes budget into record id as the store keeps it (a
// sandbox's create takes no budget; the record may still carry one).
func setBudget(t *testing.T, st *store.Store, id string, budget map[string]any) {
	t.Helper()
	if _, err := st.UpdateSession(context.Background(), id, -1, func(row *store.SessionRow) error {
		var rec map[string]any
		if err := json.Unmarshal(row.Record, &rec); err != nil {
			return err
		}
		if budget == nil {
			delete(rec["session"].(map[string]any), "budget")
		} else {
			rec["session"].(map[string]any)["budget"] = budget
		}
		raw, err := json.Marshal(rec)
		row.Record = raw
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestSandboxProcessJudgedOnEnv: the process policy sees what a sandbox's
// process is given besides its text, as input.env and input.cwd (the
// directory it starts in, the workdir when it gives none), so an
// operator's rule over them refuses it before the guest runs anything,
// with the rule in the answer and the ledger. It runs on the fake backend.
func TestSandboxProcessJudgedOnEnv(t *testing.T) {
	r := fakeRig(t, engine(t, map[string]string{"envguard.rego": `package paddock.ext.envguard.process

deny contains "LD_PRELOAD loads code the command does not show" if input.env.LD_PRELOAD

deny contains "nothing runs from /secrets" if startswith(input.cwd, "/secrets")

deny contains "the policy was not told the directory" if {
	input.env.CHECK_CWD
	not input.cwd == "/workspace"
}
`}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		req  ProcessRequest
		says string // the refusal's reason; "" when it runs
	}{
		{"LD_PRELOAD", ProcessRequest{Command: "touch preloaded", Env: map[string]string{"LD_PRELOAD": "/tmp/evil.so", "A": "1"}}, "LD_PRELOAD loads code"},
		{"cwd", ProcessRequest{Command: "touch fromsecrets", Cwd: "/secrets/x"}, "nothing runs from /secrets"},
		{"default cwd", ProcessRequest{Command: "echo $CHECK_CWD", Env: map[string]string{"CHECK_CWD": "told"}}, ""},
		{"harmless env", ProcessRequest{Command: "echo $GREETING", Env: map[string]string{"GREETING": "hello"}}, ""},
	} {
		out, err := r.s.Process(ctx, "", sb.ID, c.req)
		if c.says == "" {
			if err != nil || out.ExitCode != 0 {
				t.Errorf("%s: %+v %v, want it run", c.name, out, err)
			}
			continue
		}
		var pr *session.ProcessRefused
		if !errors.As(err, &pr) || pr.Decision.Rule != "ext.envguard.process" || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %+v %v, want refused by ext.envguard.process saying %q", c.name, out, err, c.says)
		}
	}
	if out, err := r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "echo $GREETING", Env: map[string]string{"GREETING": "hello"}}); err != nil || out.Stdout != "hello\n" {
		t.Errorf("the environment reached the command: %+v %v", out, err)
	}
	if out, err := r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "ls preloaded fromsecrets 2>/dev/null | wc -l"}); err != nil || strings.TrimSpace(out.Stdout) != "0" {
		t.Errorf("a refused process ran: %+v %v", out, err)
	}
	// The refusals say what was judged: the variables' names (never
	// their values) and the directory.
	refused := entries(t, r.led, sb.ID, "exec.refused")
	if len(refused) != 2 || refused[0]["rule"] != "ext.envguard.process" || refused[0]["command"] != "touch preloaded" ||
		mustJSON(t, refused[0]["env"]) != `["A","LD_PRELOAD"]` || refused[1]["cwd"] != "/secrets/x" {
		t.Errorf("exec.refused entries: %v", refused)
	}
	for _, kind := range []string{"exec", "exec.refused"} {
		for _, d := range entries(t, r.led, sb.ID, kind) {
			if j := mustJSON(t, d); strings.Contains(j, "hello") || strings.Contains(j, "told") || strings.Contains(j, "evil") {
				t.Errorf("an environment value reached the ledger: %v", d)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSandboxPipelineSteps: a sandbox's process and fs/write walk the
// core's pipeline in its order, and the command hooks see each of them
// with its kind. A write larger than one agent call (written as an upload
// in parts) walks it once, exactly as a small one does: one judgement of
// the hooks, one admission, one ledger entry. It runs on the fake
// backend.
func TestSandboxPipelineSteps(t *testing.T) {
	r := fakeRig(t, nil)
	tr := traceSteps(r.m)
	var seenMu sync.Mutex
	var seen []string
	r.m.AddCommandHook("watch", func(_ context.Context, c *session.Command) error {
		seenMu.Lock()
		defer seenMu.Unlock()
		seen = append(seen, string(c.Kind)+":"+c.Verb+":"+c.Text)
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	process := tr.take(session.CommandProcess)
	if _, err := r.s.WriteFile(ctx, "", sb.ID, SandboxWrite{Path: "/workspace/small", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	small := tr.take(session.CommandFile)
	big := make([]byte, api.MaxFileWriteBytes+api.MaxPartBytes+123) // three parts
	rand.Read(big)
	w, err := r.s.WriteFile(ctx, "", sb.ID, SandboxWrite{Path: "/workspace/big", ContentBase64: base64.StdEncoding.EncodeToString(big), Mode: "0600"})
	if err != nil {
		t.Fatal(err)
	}
	large := tr.take(session.CommandFile)
	if w.Size != int64(len(big)) || w.Mode != "0600" {
		t.Errorf("the large write answered %+v", w)
	}
	const write = "validate load gate admit hooks run record"
	for _, c := range []struct{ name, got, want string }{
		{"process", process, "validate load judge gate admit hooks run record usage"},
		{"small write", small, write},
		{"large write", large, write},
	} {
		if c.got != c.want {
			t.Errorf("%s walked %q, want %q", c.name, c.got, c.want)
		}
	}
	want := []string{"process::true", "file:write:/workspace/small", "file:write:/workspace/big"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("the hook saw (-want +got):\n%s", diff)
	}
	got, err := r.s.ReadFile(ctx, "", sb.ID, "/workspace/big")
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := base64.StdEncoding.DecodeString(got.ContentBase64); !bytes.Equal(data, big) {
		t.Errorf("read back %d bytes, not what was written", len(data))
	}
	writes := entries(t, r.led, sb.ID, "file.write")
	if len(writes) != 2 || writes[1]["path"] != "/workspace/big" || writes[1]["size"] != float64(len(big)) {
		t.Errorf("file.write entries: %v, want one per write", writes)
	}

	// A walk stops at the step that refuses.
	r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "true", TimeoutSeconds: -1})
	if got := tr.take(session.CommandProcess); got != "validate" {
		t.Errorf("a refused process walked %q, want validate only", got)
	}
	r.s.WriteFile(ctx, "", sb.ID, SandboxWrite{Path: "relative", Content: "x"})
	if got := tr.take(session.CommandFile); got != "validate" {
		t.Errorf("a refused write walked %q, want validate only", got)
	}
}

// TestSandboxHookRefuses: a command hook that refuses stops a sandbox's
// process or write before the guest sees it, with the hook's own kind of
// error kept and the refusal ledgered; a write larger than one agent
// call is refused whole, before any part reaches the guest. It runs on
// the fake backend.
func TestSandboxHookRefuses(t *testing.T) {
	r := fakeRig(t, nil)
	r.m.AddCommandHook("rewind", func(_ context.Context, c *session.Command) error {
		switch {
		case strings.Contains(c.Text, "conflict"):
			return errors.Join(errors.New("a restore is being taken"), session.ErrConflict)
		case strings.Contains(c.Text, "refuse-me"):
			return errors.New("no point could be taken")
		}
		c.Annotate("point", 7)
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "echo conflict > x"})
	if !errors.Is(err, session.ErrConflict) || errors.Is(err, session.ErrForbidden) {
		t.Errorf("a hook's conflict: %v, want ErrConflict only", err)
	}
	if ds := entries(t, r.led, sb.ID, "exec.refused"); len(ds) != 1 || ds[0]["hook"] != "rewind" {
		t.Errorf("sandbox exec.refused: %v", ds)
	}
	out, err := r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "test -e x; echo $?"})
	if err != nil || out.Stdout != "1\n" {
		t.Errorf("the refused process ran: %+v %v", out, err)
	}

	big := base64.StdEncoding.EncodeToString(make([]byte, api.MaxFileWriteBytes+1))
	for _, content := range []string{"aGk=", big} {
		_, err := r.s.WriteFile(ctx, "", sb.ID, SandboxWrite{Path: "/workspace/refuse-me", ContentBase64: content})
		var hr *session.HookRefused
		if !errors.As(err, &hr) || hr.Hook != "rewind" || !errors.Is(err, session.ErrForbidden) {
			t.Errorf("a write of %d base64 bytes: %v, want the hook's refusal (403)", len(content), err)
		}
		if _, err := r.s.ReadFile(ctx, "", sb.ID, "/workspace/refuse-me"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the refused write of %d base64 bytes was written: %v", len(content), err)
		}
	}
	if ds := entries(t, r.led, sb.ID, "file.refused"); len(ds) != 2 || ds[1]["command"] != "/workspace/refuse-me" || ds[1]["hook"] != "rewind" {
		t.Errorf("file.refused: %v", ds)
	}
	// What the hook lets through carries its note, large or small.
	if _, err := r.s.WriteFile(ctx, "", sb.ID, SandboxWrite{Path: "/workspace/ok", ContentBase64: big}); err != nil {
		t.Fatal(err)
	}
	ws := entries(t, r.led, sb.ID, "file.write")
	if n, _ := ws[len(ws)-1]["hooks"].(map[string]any); n == nil || n["point"] != float64(7) {
		t.Errorf("file.write without the hook's note: %v", ws)
	}
}

// TestCheckPath: the paths fs/read and fs/write take, and cwd.
func TestCheckPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"/workspace/a b/ünï 文件.txt":     true,
		"/":                             true,
		"/a/./b":                        true,
		"/a/..b/c":                      true,
		"":                              false,
		"a/b":                           false,
		"/a/../b":                       false,
		"/..":                           false,
		"/a\nb":                         false,
		"/a\rb":                         false,
		"/a\x00b":                       false,
		"/" + strings.Repeat("a", 4096): false,
	} {
		if err := checkPath("path", p); (err == nil) != ok || (err != nil && !errors.Is(err, session.ErrBadRequest)) {
			t.Errorf("checkPath(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"/workspace/x", "a/../b", "/a\x00", "/ü/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if checkPath("path", p) != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\n\r") || strings.Contains("/"+p+"/", "/../") {
			t.Errorf("accepted %q", p)
		}
	})
}
