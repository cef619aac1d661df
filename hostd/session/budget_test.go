package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
)

func n(v int64) *int64 { return &v }

// TestBudgetCheck: every field is bounded, a refusal names the field, and
// a budget without a field is no budget.
func TestBudgetCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       *Budget
		wantErr string // "" for accepted
		wantNil bool
	}{
		{"none", nil, "", true},
		{"empty", &Budget{}, "", true},
		{"zero execs allowed", &Budget{MaxExecs: n(0)}, "", false},
		{"all at their maximum", &Budget{MaxExecs: n(MaxBudgetExecs), MaxExecSeconds: n(MaxBudgetSeconds), MaxJobs: n(MaxBudgetJobs),
			MaxConcurrentJobs: n(MaxBudgetConcurrentJobs), MaxChildren: n(MaxBudgetChildren), MaxComputeSeconds: n(MaxBudgetSeconds),
			MaxOutputBytes: n(MaxBudgetOutputBytes), MaxWorkspaceBytes: n(MaxBudgetWorkspaceBytes)}, "", false},
		{"negative", &Budget{MaxExecs: n(-1)}, "budget.max_execs -1", false},
		{"exec seconds too many", &Budget{MaxExecSeconds: n(MaxBudgetSeconds + 1)}, "budget.max_exec_seconds", false},
		{"jobs too many", &Budget{MaxJobs: n(MaxBudgetJobs + 1)}, "budget.max_jobs", false},
		{"concurrency too many", &Budget{MaxConcurrentJobs: n(257)}, "budget.max_concurrent_jobs", false},
		{"children too many", &Budget{MaxChildren: n(MaxBudgetChildren + 1)}, "budget.max_children", false},
		{"compute too many", &Budget{MaxComputeSeconds: n(MaxBudgetSeconds + 1)}, "budget.max_compute_seconds", false},
		{"output zero", &Budget{MaxOutputBytes: n(0)}, "budget.max_output_bytes 0 must be from 1", false},
		{"output too many", &Budget{MaxOutputBytes: n(MaxBudgetOutputBytes + 1)}, "budget.max_output_bytes", false},
		{"workspace zero", &Budget{MaxWorkspaceBytes: n(0)}, "budget.max_workspace_bytes", false},
	} {
		got, err := checkBudget(tc.b)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want 400 naming %q", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && (got == nil) != tc.wantNil:
			t.Errorf("%s: budget %+v, want nil: %v", tc.name, got, tc.wantNil)
		case tc.wantErr == "" && got != nil && tc.b == got:
			t.Errorf("%s: check returned the caller's budget, not a copy", tc.name)
		}
	}
}

// TestBudgetChild: a child's budget is what its parent has left of what
// is consumed, the same of what is a cap, and never below zero.
func TestBudgetChild(t *testing.T) {
	parent := &Budget{MaxExecs: n(10), MaxExecSeconds: n(60), MaxJobs: n(3), MaxConcurrentJobs: n(2), MaxChildren: n(4),
		MaxComputeSeconds: n(100), MaxOutputBytes: n(4096), MaxWorkspaceBytes: n(1 << 20)}
	u := Usage{Execs: 4, ExecMS: 20_500, Jobs: 5, JobMS: 9_000, ComputeMS: 29_500, Children: 3}
	want := &Budget{MaxExecs: n(6), MaxExecSeconds: n(39), MaxJobs: n(0), MaxConcurrentJobs: n(2), MaxChildren: n(1),
		MaxComputeSeconds: n(70), MaxOutputBytes: n(4096), MaxWorkspaceBytes: n(1 << 20)}
	if d := cmp.Diff(want, childBudget(parent, u)); d != "" {
		t.Errorf("child budget (-want +got):\n%s", d)
	}
	if *parent.MaxExecs != 10 {
		t.Errorf("the parent's budget changed: %d", *parent.MaxExecs)
	}
	if childBudget(nil, u) != nil {
		t.Error("a child of a session without a budget got one")
	}
	if d := cmp.Diff(&Budget{MaxJobs: n(7)}, childBudget(&Budget{MaxJobs: n(7)}, Usage{Execs: 100})); d != "" {
		t.Errorf("a field the parent did not set appeared (-want +got):\n%s", d)
	}
}

// TestBudgetError: a 403 that says the field, the limit and what was used.
func TestBudgetError(t *testing.T) {
	err := error(&BudgetError{Budget: "max_exec_seconds", Limit: 2, Used: 2.003, What: "exec"})
	if !errors.Is(err, ErrForbidden) {
		t.Errorf("not a 403: %v", err)
	}
	for _, want := range []string{"max_exec_seconds", "2.003 of 2 s", "exec"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// TestBudgetCutToCharacter: a stream the guest cut mid-character loses the
// partial character, which counts as dropped; the marker stays.
func TestBudgetCutToCharacter(t *testing.T) {
	m := api.TruncationMarker
	for _, tc := range []struct {
		name      string
		in        string
		truncated bool
		want      string
		cut       int64
	}{
		{"not truncated", "héllo", false, "héllo", 0},
		{"whole characters", "ab" + m, true, "ab" + m, 0},
		{"half of é", "ab\xc3" + m, true, "ab" + m, 1},
		{"two of three bytes of €", "a\xe2\x82" + m, true, "a" + m, 2},
		{"three of four bytes of 😀", "\xf0\x9f\x98" + m, true, m, 3},
		{"whole € at the end", "a€" + m, true, "a€" + m, 0},
		{"binary that is no UTF-8", "\xff\xfe" + m, true, "\xff\xfe" + m, 0},
		{"no marker", "ab\xc3", true, "ab\xc3", 0},
	} {
		got, cut := cutToCharacter([]byte(tc.in), tc.truncated)
		if string(got) != tc.want || cut != tc.cut {
			t.Errorf("%s: %q cut %d, want %q cut %d", tc.name, got, cut, tc.want, tc.cut)
		}
	}
	res := execResult(&api.ExecResult{Stdout: []byte("x\xc3" + m), StdoutTruncated: true, StdoutDropped: 10}, 2)
	if res.Stdout != "x"+m || res.StdoutDropped != 11 || !res.OutputTruncated || res.MaxOutputBytes != 2 || !res.Truncated || res.StderrDropped != 0 {
		t.Errorf("exec result: %+v", res)
	}
}

func TestBudgetWorkspaceNeeded(t *testing.T) {
	b := &Budget{MaxWorkspaceBytes: n(1 << 20)}
	if err := checkBudgetWorkspace(b, Workspace{Path: "/workspace", Note: workspaceNotCreated + "permission denied"}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "max_workspace_bytes") {
		t.Errorf("no workspace: %v, want 400", err)
	}
	if err := checkBudgetWorkspace(b, Workspace{Path: "/workspace", Note: "clone failed: x"}); err != nil {
		t.Errorf("a workspace that exists: %v", err)
	}
	if err := checkBudgetWorkspace(&Budget{MaxExecs: n(1)}, Workspace{Note: workspaceNotCreated + "x"}); err != nil {
		t.Errorf("no max_workspace_bytes: %v", err)
	}
}

func TestLifecycleTestHooks(t *testing.T) {
	h, err := ParseTestHooks("fork-pause:5s, checkpoint-pause:250ms")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]time.Duration{"fork": 5 * time.Second, "checkpoint": 250 * time.Millisecond}, h.Pause); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, bad := range []string{"fork:5s", "nap-pause:1s", "fork-pause:soon", "fork-pause:-1s", "fork-pause"} {
		if _, err := ParseTestHooks(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// budgetsSpy is a Budgets that records what the core asked and answers
// with refuse (nil: an admission that takes nothing).
type budgetsSpy struct {
	mu     sync.Mutex
	asked  []string
	refuse error
}

func (b *budgetsSpy) Admit(_ context.Context, s *Session, _ *client.Client, what Start, timeout int) (*Admission, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, fmt.Sprintf("admit %s %d", what, timeout))
	if b.refuse != nil {
		return nil, b.refuse
	}
	return &Admission{Timeout: timeout, StreamExec: what == StartStream}, nil
}

func (b *budgetsSpy) AdmitWrite(_ context.Context, s *Session, _ *client.Client, n int64, what string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, fmt.Sprintf("write %s %d", what, n))
	return b.refuse
}

func (b *budgetsSpy) Running(_ context.Context, s *Session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, "running "+s.ID)
}

func (b *budgetsSpy) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := strings.Join(b.asked, ", ")
	b.asked = nil
	return out
}

// TestBudgetsSeam holds the core's side of the budgets service: a
// session without a budget is unlimited and the service is never asked;
// a session with one asks it at every exec, job and file write, and its
// refusal stops the command before the guest runs it; and with no service
// set, a budgeted session's commands and writes fail closed (503
// budgets_unavailable) while one without a budget runs as before.
func TestBudgetsSeam(t *testing.T) {
	m := fakeManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	free, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	capped, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600, Budget: &Budget{MaxExecs: n(100)}})
	if err != nil {
		t.Fatal(err)
	}
	// A write of two bytes to path, walked as the siblings that write
	// files (hostd/workspace, hostd/sandboxes) walk it, up to its admit.
	write := func(id, path string) error {
		return m.Walk(ctx, CommandFile, "", id, LoadRunningStep(), GateWriteStep("/workspace/"+path),
			AdmitWriteStep(func() int64 { return 2 }, "file write"))
	}
	job := func(id string) error {
		_, err := m.StartJob(ctx, "", id, JobStart{Command: "true"})
		return err
	}

	// No service set: fail closed for the budgeted session only.
	for what, err := range map[string]error{
		"exec": func() error {
			_, err := m.Exec(ctx, "", capped.ID, ExecRequest{Command: "touch unchecked"})
			return err
		}(),
		"job":        job(capped.ID),
		"file write": write(capped.ID, "unchecked"),
	} {
		if !errors.Is(err, errdefs.ErrUnavailable) || errdefs.Code(err) != errdefs.CodeBudgetsUnavailable || !strings.Contains(err.Error(), what) {
			t.Errorf("%s of a budgeted session without a budgets service: %v, want 503 %s naming it", what, err, errdefs.CodeBudgetsUnavailable)
		}
	}
	if u := m.usage(ctx, capped.ID); u.Execs != 0 || u.Jobs != 0 {
		t.Errorf("refused starts were counted: %+v", u)
	}
	if _, err := m.Exec(ctx, "", free.ID, ExecRequest{Command: "true"}); err != nil {
		t.Errorf("exec without a budget or a service: %v", err)
	}
	if err := write(free.ID, "free"); err != nil {
		t.Errorf("write without a budget or a service: %v", err)
	}

	spy := &budgetsSpy{}
	m.SetBudgets(spy)
	if _, err := m.Exec(ctx, "", free.ID, ExecRequest{Command: "true", TimeoutSeconds: 7}); err != nil {
		t.Fatal(err)
	}
	if err := job(free.ID); err != nil {
		t.Fatal(err)
	}
	if err := write(free.ID, "free2"); err != nil {
		t.Fatal(err)
	}
	if got := spy.take(); got != "" {
		t.Errorf("a session without a budget asked the service: %s", got)
	}
	if _, err := m.Exec(ctx, "", capped.ID, ExecRequest{Command: "true", TimeoutSeconds: 7}); err != nil {
		t.Fatal(err)
	}
	if err := job(capped.ID); err != nil {
		t.Fatal(err)
	}
	if err := write(capped.ID, "counted"); err != nil {
		t.Fatal(err)
	}
	if got, want := spy.take(), "admit exec 7, admit job 0, write file write 2"; got != want {
		t.Errorf("the service was asked %q, want %q", got, want)
	}
	if u := m.usage(ctx, capped.ID); u.Execs != 1 || u.Jobs != 1 {
		t.Errorf("what the service did not take, the core counts: %+v, want 1 exec and 1 job", u)
	}
	// At start (RunSweeper), the service is told of the running sessions
	// with a budget, and of no other.
	sweepCtx, stopSweep := context.WithCancel(ctx)
	swept := make(chan struct{})
	go func() { m.RunSweeper(sweepCtx); close(swept) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		spy.mu.Lock()
		told := len(spy.asked)
		spy.mu.Unlock()
		if told > 0 || time.Now().After(deadline) {
			break
		}
	}
	stopSweep()
	<-swept
	if got, want := spy.take(), "running "+capped.ID; got != want {
		t.Errorf("at start the service was told %q, want %q", got, want)
	}
	spy.refuse = &BudgetError{Budget: "max_execs", Limit: 1, Used: 1, What: "exec"}
	if _, err := m.Exec(ctx, "", capped.ID, ExecRequest{Command: "touch refused"}); !errors.As(err, new(*BudgetError)) {
		t.Errorf("the service's refusal: %v", err)
	}
	spy.refuse = nil
	if r, err := m.Exec(ctx, "", capped.ID, ExecRequest{Command: "test -e refused; echo $?"}); err != nil || r.Stdout != "1\n" {
		t.Errorf("a command the service refused ran: %+v %v", r, err)
	}
}
