package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/session"
)

// TestAttackBudgetBackgroundCompute runs the escape of issue 16: a
// command that leaves a busy loop running in its own session (setsid,
// output and input detached) ends at once, so its wall time charged next
// to nothing to max_compute_seconds while the loop burnt CPU for ever.
// Now the sandbox's CPU time (its cgroup's) is charged: the loop fills the
// budget, the watcher ends it (budget.exhausted in the ledger, the CPU
// time stops growing), and the next command is refused with the budget's
// code.
func TestAttackBudgetBackgroundCompute(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s := budgetSession(t, d, `{"max_compute_seconds":3}`)
	var r session.ExecResult
	if code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{
		"command": "setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &"}, &r); code != 200 || r.ExitCode != 0 {
		t.Fatalf("start the loop: %d %+v", code, r)
	}
	if r.DurationMS > 2500 {
		t.Fatalf("the exec took %d ms: it should end at once and leave the loop behind", r.DurationMS)
	}
	var exhausted json.RawMessage
	deadline := time.Now().Add(40 * time.Second)
	for exhausted == nil && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		es, err := d.c.Events(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Kind == "budget.exhausted" {
				exhausted = e.Data
			}
		}
	}
	got, err := d.c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if exhausted == nil {
		t.Fatalf("no budget.exhausted after 40 s; usage %+v", got.Usage)
	}
	var e struct {
		Budget string `json:"budget"`
		CPUMS  int64  `json:"cpu_ms"`
		Killed int    `json:"processes_killed"`
	}
	json.Unmarshal(exhausted, &e)
	if e.Budget != "max_compute_seconds" || e.CPUMS < 3000 || e.Killed < 1 {
		t.Errorf("budget.exhausted: %s", exhausted)
	}
	if got.Usage.CPUMS < 3000 || got.Usage.ComputeMS < 3000 || got.Usage.ExecMS > 2500 {
		t.Errorf("usage %+v: the loop's CPU time is not what compute counts", got.Usage)
	}
	// The loop is gone: the sandbox's CPU time stands still.
	time.Sleep(2 * time.Second)
	later, _ := d.c.GetSession(ctx, s.ID)
	if grew := later.Usage.CPUMS - got.Usage.CPUMS; grew > 300 {
		t.Errorf("the sandbox burnt %d ms of CPU in 2 s after the budget ran out", grew)
	}
	var b budgetBody
	code := call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": "true"}, &b)
	refused(t, "exec after the loop used the compute", code, b, "max_compute_seconds", 3, 3)
	code = call(t, d.url, "POST", sp(s.ID)+"/jobs", map[string]any{"command": "true"}, &b)
	refused(t, "job after the loop used the compute", code, b, "max_compute_seconds", 3, 3)
}
