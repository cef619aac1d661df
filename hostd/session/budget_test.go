package session

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/guest/api"
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

func TestBudgetParseDU(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want int64
		ok   bool
	}{
		{"12\t/workspace\n", 12 << 10, true},
		{"du: cannot read directory '/workspace/x': Permission denied\n8\t/workspace\n", 8 << 10, true},
		{"", 0, false},
		{"many\t/workspace\n", 0, false},
	} {
		got, ok := parseDU([]byte(tc.out))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.out, got, ok, tc.want, tc.ok)
		}
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
