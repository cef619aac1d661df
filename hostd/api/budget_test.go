package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor"
)

// budgetBody is the 403 of a budget (hostd/api budgetError).
type budgetBody struct {
	Error  string  `json:"error"`
	Budget string  `json:"budget"`
	Limit  int64   `json:"limit"`
	Used   float64 `json:"used"`
}

// budgetSession creates a session with budget (JSON) and removes it at
// the end of the test.
func budgetSession(t *testing.T, d *testDaemon, budget string) *session.Session {
	t.Helper()
	var s session.Session
	if code := call(t, d.url, "POST", "/v1/agents/sessions", json.RawMessage(`{"budget":`+budget+`}`), &s); code != 201 {
		t.Fatalf("create with budget %s: %d", budget, code)
	}
	t.Cleanup(func() { d.c.DeleteSession(context.Background(), s.ID) })
	return &s
}

// refused checks a 403 budget body: the field, its limit, and used at
// least minUsed.
func refused(t *testing.T, what string, code int, b budgetBody, field string, limit int64, minUsed float64) {
	t.Helper()
	if code != 403 || b.Budget != field || b.Limit != limit || b.Used < minUsed || !strings.Contains(b.Error, field) {
		t.Errorf("%s: %d %+v, want 403 for %s (limit %d, used ≥ %v)", what, code, b, field, limit, minUsed)
	}
}

func sp(id string) string { return "/v1/agents/sessions/" + id }

// waitJobEnd reads a job until it has ended.
func waitJobEnd(t *testing.T, url, id, job string) session.JobRead {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		var rd session.JobRead
		if code := call(t, url, "GET", sp(id)+"/jobs/"+job+"?wait_ms=2000", nil, &rd); code != 200 {
			t.Fatalf("read job %s: %d", job, code)
		}
		if rd.State != "running" {
			return rd
		}
	}
	t.Fatalf("job %s did not end", job)
	return session.JobRead{}
}

// TestBudgetCreate: every field is checked (400 naming it), the budget is
// in the record, and the lower sandbox API has none.
func TestBudgetCreate(t *testing.T) {
	d := newTestDaemon(t)
	for _, body := range []string{
		`{"budget":{"max_execs":-1}}`,
		`{"budget":{"max_exec_seconds":2592001}}`,
		`{"budget":{"max_concurrent_jobs":257}}`,
		`{"budget":{"max_output_bytes":0}}`,
		`{"budget":{"max_workspace_bytes":1099511627777}}`,
		`{"budget":{"max_forks":1}}`,
	} {
		var e budgetBody
		code := call(t, d.url, "POST", "/v1/agents/sessions", json.RawMessage(body), &e)
		field := strings.Split(strings.Split(body, `{"budget":{"`)[1], `"`)[0]
		if code != 400 || !strings.Contains(e.Error, field) {
			t.Errorf("%s: %d %q, want 400 naming %s", body, code, e.Error, field)
		}
	}
	s := budgetSession(t, d, `{"max_execs":5,"max_children":0}`)
	got, err := d.c.GetSession(context.Background(), s.ID)
	if err != nil || got.Budget == nil || got.Budget.MaxExecs == nil || *got.Budget.MaxExecs != 5 ||
		got.Budget.MaxChildren == nil || *got.Budget.MaxChildren != 0 || got.Budget.MaxJobs != nil {
		t.Errorf("budget in the record: %+v %v", got.Budget, err)
	}
	if code := call(t, d.url, "POST", "/v1/sandboxes", json.RawMessage(`{"budget":{"max_execs":1}}`), nil); code != 400 {
		t.Errorf("a sandbox with a budget: %d, want 400 (the lower API has none)", code)
	}
}

// TestBudgetExecs: max_execs refuses the exec past it with the limit and
// what was used; usage is on GET and counting never moves the revision.
func TestBudgetExecs(t *testing.T) {
	d := newTestDaemon(t)
	s := budgetSession(t, d, `{"max_execs":2}`)
	for i := range 2 {
		if code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": "true"}, nil); code != 200 {
			t.Fatalf("exec %d: %d", i, code)
		}
	}
	var b budgetBody
	code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": "touch /workspace/third"}, &b)
	refused(t, "third exec", code, b, "max_execs", 2, 2)
	got, err := d.c.GetSession(context.Background(), s.ID)
	if err != nil || got.Usage.Execs != 2 || got.Revision != s.Revision {
		t.Errorf("after the refusal: usage %+v, revision %d (was %d), %v", got.Usage, got.Revision, s.Revision, err)
	}
	if r, err := d.c.Exec(context.Background(), s.ID, session.ExecRequest{Command: "true"}); err == nil {
		t.Errorf("a refused exec ran: %+v", r)
	}
	if _, err := d.c.Checkpoint(context.Background(), s.ID, s.Revision, session.CheckpointRequest{Tag: "after"}); err != nil {
		t.Errorf("If-Match with the create revision after counted execs: %v", err)
	}
}

// TestBudgetExecSeconds: a command's timeout is lowered to the seconds
// max_exec_seconds leaves, and the next exec is refused.
func TestBudgetExecSeconds(t *testing.T) {
	d := newTestDaemon(t)
	s := budgetSession(t, d, `{"max_exec_seconds":2}`)
	var r session.ExecResult
	if code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": "sleep 20", "timeout_seconds": 300}, &r); code != 200 {
		t.Fatalf("exec: %d", code)
	}
	if !r.TimedOut || r.DurationMS < 1500 || r.DurationMS > 6000 {
		t.Errorf("sleep 20 under 2 s of budget: timed_out %v after %d ms", r.TimedOut, r.DurationMS)
	}
	var b budgetBody
	code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": "true"}, &b)
	refused(t, "exec after the seconds ran out", code, b, "max_exec_seconds", 2, 1.5)
	es, _ := d.c.Events(context.Background(), s.ID)
	capped := false
	for _, e := range es {
		var data struct {
			Timeout int  `json:"timeout_seconds"`
			Capped  bool `json:"timeout_capped_by_budget"`
		}
		json.Unmarshal(e.Data, &data)
		capped = capped || (e.Kind == "exec" && data.Capped && data.Timeout == 2)
	}
	if !capped {
		t.Errorf("the lowered timeout is not in the ledger")
	}
}

// TestBudgetJobs: max_concurrent_jobs counts running jobs, max_jobs job
// starts; exec/stream is a job for both.
func TestBudgetJobs(t *testing.T) {
	d := newTestDaemon(t)
	s := budgetSession(t, d, `{"max_jobs":2,"max_concurrent_jobs":1}`)
	var j session.Job
	if code := call(t, d.url, "POST", sp(s.ID)+"/jobs", map[string]any{"command": "sleep 60"}, &j); code != 201 {
		t.Fatalf("first job: %d", code)
	}
	var b budgetBody
	code := call(t, d.url, "POST", sp(s.ID)+"/jobs", map[string]any{"command": "true"}, &b)
	refused(t, "a second job while one runs", code, b, "max_concurrent_jobs", 1, 1)
	code = call(t, d.url, "POST", sp(s.ID)+"/exec/stream", map[string]any{"command": "true"}, &b)
	refused(t, "exec/stream while a job runs", code, b, "max_concurrent_jobs", 1, 1)
	if code := call(t, d.url, "DELETE", sp(s.ID)+"/jobs/"+j.ID+"?signal=KILL", nil, nil); code != 200 {
		t.Fatalf("kill: %d", code)
	}
	waitJobEnd(t, d.url, s.ID, j.ID)
	if code := call(t, d.url, "POST", sp(s.ID)+"/jobs", map[string]any{"command": "true"}, &j); code != 201 {
		t.Fatalf("second job after the first ended: %d", code)
	}
	waitJobEnd(t, d.url, s.ID, j.ID)
	code = call(t, d.url, "POST", sp(s.ID)+"/jobs", map[string]any{"command": "true"}, &b)
	refused(t, "a third job", code, b, "max_jobs", 2, 2)
	got, _ := d.c.GetSession(context.Background(), s.ID)
	if got.Usage.Jobs != 2 || got.Usage.Execs != 0 {
		t.Errorf("usage %+v, want 2 jobs and no execs", got.Usage)
	}
}

// TestBudgetCompute: compute is exec time plus job time (a finished job
// by its start and end, a running one up to now), a command's timeout is
// capped to what is left, and a start past it is refused.
func TestBudgetCompute(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s := budgetSession(t, d, `{"max_compute_seconds":3}`)
	var j session.Job
	if code := call(t, d.url, "POST", sp(s.ID)+"/jobs", map[string]any{"command": "sleep 1.2"}, &j); code != 201 {
		t.Fatalf("job: %d", code)
	}
	waitJobEnd(t, d.url, s.ID, j.ID)
	got, _ := d.c.GetSession(ctx, s.ID)
	if got.Usage.JobMS < 1100 || got.Usage.JobMS > 3000 || got.Usage.ComputeMS != got.Usage.ExecMS+got.Usage.JobMS {
		t.Errorf("after a 1.2 s job: %+v", got.Usage)
	}
	var r session.ExecResult
	if code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": "sleep 20", "timeout_seconds": 300}, &r); code != 200 {
		t.Fatalf("exec: %d", code)
	}
	if !r.TimedOut || r.DurationMS > 4000 {
		t.Errorf("sleep 20 with about 1.8 s of compute left: timed_out %v after %d ms", r.TimedOut, r.DurationMS)
	}
	var b budgetBody
	code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": "true"}, &b)
	refused(t, "exec after compute ran out", code, b, "max_compute_seconds", 3, 2.9)
	code = call(t, d.url, "POST", sp(s.ID)+"/jobs", map[string]any{"command": "true"}, &b)
	refused(t, "job after compute ran out", code, b, "max_compute_seconds", 3, 2.9)

	// A running job counts up to now: it is not stopped, but the next
	// start is refused.
	s2 := budgetSession(t, d, `{"max_compute_seconds":1}`)
	if code := call(t, d.url, "POST", sp(s2.ID)+"/jobs", map[string]any{"command": "sleep 30"}, &j); code != 201 {
		t.Fatalf("long job: %d", code)
	}
	time.Sleep(1300 * time.Millisecond)
	code = call(t, d.url, "POST", sp(s2.ID)+"/exec", map[string]any{"command": "true"}, &b)
	refused(t, "exec while a job used the compute", code, b, "max_compute_seconds", 1, 1)
	var rd session.JobRead
	if call(t, d.url, "GET", sp(s2.ID)+"/jobs/"+j.ID, nil, &rd); rd.State != "running" {
		t.Errorf("the budget stopped a running job: %s", rd.State)
	}
}

// TestBudgetOutput: max_output_bytes cuts what an exec returns per stream
// (at a character boundary, reported in the answer and the ledger) and
// what a job keeps; the command runs to its end.
func TestBudgetOutput(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s := budgetSession(t, d, `{"max_output_bytes":100}`)
	// stdout: 1000 x; stderr: "a" then 100 é (2 bytes each), so the cap
	// at 100 bytes falls in the middle of an é.
	cmd := `head -c 1000 /dev/zero | tr '\0' x; printf a >&2; i=0; while [ $i -lt 100 ]; do printf '\303\251' >&2; i=$((i+1)); done; echo done > /workspace/ran`
	var r session.ExecResult
	if code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": cmd}, &r); code != 200 {
		t.Fatalf("exec: %d", code)
	}
	marker := "\n[paddock: output truncated]\n"
	if r.ExitCode != 0 || r.Stdout != strings.Repeat("x", 100)+marker || r.StdoutDropped != 900 {
		t.Errorf("stdout: exit %d, %d bytes, dropped %d", r.ExitCode, len(r.Stdout), r.StdoutDropped)
	}
	if r.Stderr != "a"+strings.Repeat("é", 49)+marker || r.StderrDropped != 102 {
		t.Errorf("stderr %q dropped %d, want a and 49 é (the half é dropped), 102 dropped", r.Stderr, r.StderrDropped)
	}
	if !r.Truncated || !r.OutputTruncated || r.MaxOutputBytes != 100 {
		t.Errorf("truncation not reported: %+v", r)
	}
	if out, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "cat /workspace/ran"}); err != nil || out.Stdout != "done\n" {
		t.Errorf("the command did not run to its end: %+v %v", out, err)
	}
	es, _ := d.c.Events(ctx, s.ID)
	var inLedger bool
	for _, e := range es {
		var data struct {
			Truncated bool  `json:"output_truncated"`
			Out       int64 `json:"stdout_dropped_bytes"`
			Err       int64 `json:"stderr_dropped_bytes"`
		}
		json.Unmarshal(e.Data, &data)
		inLedger = inLedger || (e.Kind == "exec" && data.Truncated && data.Out == 900 && data.Err == 102)
	}
	if !inLedger {
		t.Errorf("the truncation is not in the ledger")
	}
	// A job keeps at most the cap per stream, even when it asks for more.
	var j session.Job
	if code := call(t, d.url, "POST", sp(s.ID)+"/jobs", map[string]any{"command": "head -c 5000 /dev/zero", "max_output_bytes": 4096}, &j); code != 201 {
		t.Fatalf("job: %d", code)
	}
	rd := waitJobEnd(t, d.url, s.ID, j.ID)
	if rd.ExitCode == nil || *rd.ExitCode != 0 || rd.StdoutBytes != 100 || rd.DroppedBytes != 4900 || !rd.Truncated {
		t.Errorf("job: exit %v, kept %d, dropped %d, truncated %v", rd.ExitCode, rd.StdoutBytes, rd.DroppedBytes, rd.Truncated)
	}
	es, _ = d.c.Events(ctx, s.ID)
	var started, cut bool
	for _, e := range es {
		var data struct {
			Job     string `json:"job"`
			Max     int64  `json:"max_output_bytes"`
			Dropped int64  `json:"dropped_bytes"`
		}
		json.Unmarshal(e.Data, &data)
		started = started || (e.Kind == "job.start" && data.Job == j.ID && data.Max == 100)
		cut = cut || (e.Kind == "job.output_truncated" && data.Job == j.ID && data.Dropped == 4900)
	}
	if !started || !cut {
		t.Errorf("the job's cap (%v) or its truncation (%v) is not in the ledger", started, cut)
	}
}

// TestBudgetWorkspace: the workspace is measured (du) at each start; a
// command that grows it past the limit runs to its end (growth during a
// run is not stopped), and the next command and job are refused.
func TestBudgetWorkspace(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s := budgetSession(t, d, `{"max_workspace_bytes":65536}`)
	if _, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "true"}); err != nil {
		t.Fatalf("exec in an empty workspace: %v", err)
	}
	if _, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "head -c 102400 /dev/zero > /workspace/big.bin"}); err != nil {
		t.Fatalf("grow the workspace: %v", err)
	}
	var b budgetBody
	code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": "true"}, &b)
	refused(t, "exec over the workspace limit", code, b, "max_workspace_bytes", 65536, 100<<10)
	code = call(t, d.url, "POST", sp(s.ID)+"/jobs", map[string]any{"command": "true"}, &b)
	refused(t, "job over the workspace limit", code, b, "max_workspace_bytes", 65536, 100<<10)
	got, _ := d.c.GetSession(ctx, s.ID)
	if got.Usage.WorkspaceBytes < 100<<10 || got.Usage.Execs != 2 || got.Usage.Jobs != 0 {
		t.Errorf("usage %+v", got.Usage)
	}
	if code := call(t, d.url, "DELETE", sp(s.ID)+"/files?path=/workspace/big.bin", nil, nil); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	if _, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "true"}); err != nil {
		t.Errorf("exec after the workspace shrank: %v", err)
	}
}

// forkRefusing wraps a backend whose machines refuse to fork refuse
// children at once, as a backend out of room would.
type forkRefusing struct {
	hypervisor.Backend
	refuse int
}

func (b *forkRefusing) Create(ctx context.Context, spec hypervisor.MachineSpec) (hypervisor.Machine, error) {
	m, err := b.Backend.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &forkRefusingMachine{Machine: m, refuse: b.refuse}, nil
}

type forkRefusingMachine struct {
	hypervisor.Machine
	refuse int
}

func (m *forkRefusingMachine) Fork(ctx context.Context, s hypervisor.Snapshot, n int) ([]hypervisor.Machine, error) {
	if n == m.refuse {
		return nil, fmt.Errorf("%w: this test backend has no room for %d children", hypervisor.ErrInvalidSpec, n)
	}
	return m.Machine.Fork(ctx, s, n)
}

// TestBudgetFork: a child starts with what its parent has left (limits
// minus usage), max_children refuses a fork past it, and a fork that
// fails gives its children back.
func TestBudgetFork(t *testing.T) {
	d := newTestDaemon(t, daemontest.WrapBackend(func(b hypervisor.Backend) hypervisor.Backend { return &forkRefusing{Backend: b, refuse: 7} }))
	ctx := context.Background()
	s := budgetSession(t, d, `{"max_execs":5,"max_children":8,"max_output_bytes":1000,"max_exec_seconds":600}`)
	for range 2 {
		if _, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	// A failed fork gives its children back.
	if code := call(t, d.url, "POST", sp(s.ID)+"/fork", map[string]any{"count": 7}, nil); code != 400 {
		t.Fatalf("the fork the backend refuses: %d, want 400", code)
	}
	if got, _ := d.c.GetSession(ctx, s.ID); got.Usage.Children != 0 || len(got.Children) != 0 {
		t.Errorf("after a failed fork: usage %+v children %v, want none counted", got.Usage, got.Children)
	}
	kids, err := d.c.Fork(ctx, s.ID, -1, 6)
	if err != nil || len(kids) != 6 {
		t.Fatalf("fork 6: %v %v", len(kids), err)
	}
	for _, k := range kids {
		defer d.c.DeleteSession(ctx, k.ID)
	}
	k := kids[0]
	b := k.Budget
	if b == nil || *b.MaxExecs != 3 || *b.MaxChildren != 2 || *b.MaxOutputBytes != 1000 || *b.MaxExecSeconds > 600 || *b.MaxExecSeconds < 598 || b.MaxJobs != nil {
		t.Errorf("child budget %+v, want what the parent had left", b)
	}
	if got, _ := d.c.GetSession(ctx, s.ID); got.Usage.Children != 6 {
		t.Errorf("parent usage %+v, want 6 children", got.Usage)
	}
	var bb budgetBody
	code := call(t, d.url, "POST", sp(s.ID)+"/fork", map[string]any{"count": 3}, &bb)
	refused(t, "3 more children past 8", code, bb, "max_children", 8, 6)
	// The child spends its own budget: 3 execs, then 403.
	for i := range 3 {
		if _, err := d.c.Exec(ctx, k.ID, session.ExecRequest{Command: "true"}); err != nil {
			t.Fatalf("child exec %d: %v", i, err)
		}
	}
	code = call(t, d.url, "POST", sp(k.ID)+"/exec", map[string]any{"command": "true"}, &bb)
	refused(t, "the child's fourth exec", code, bb, "max_execs", 3, 3)
	// The child's own fork: what the parent had left of max_children.
	code = call(t, d.url, "POST", sp(k.ID)+"/fork", map[string]any{"count": 3}, &bb)
	refused(t, "the child forking 3", code, bb, "max_children", 2, 0)
}
