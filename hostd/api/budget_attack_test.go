package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/workspace"
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

// streamExec runs command through exec/stream and reads the stream to
// its end (a 200); other answers are returned with no events.
func streamExec(t *testing.T, url, id, command string) (int, []sseEvent) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"command": command})
	req, _ := http.NewRequest("POST", url+sp(id)+"/exec/stream", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil
	}
	return 200, readSSE(t, resp)
}

// TestAttackBudgetExecStreamCounts: exec/stream runs its command as a
// job, and used to count only as one, so a session limited by max_execs
// alone ran as many streamed commands as it liked. Now a streamed
// command counts in execs too: past max_execs it is refused with the
// budget's code and nothing runs, and it counts as an exec when only
// jobs are limited.
func TestAttackBudgetExecStreamCounts(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s := budgetSession(t, d, `{"max_execs":2}`)
	for i := range 2 {
		code, evs := streamExec(t, d.url, s.ID, "echo streamed")
		if code != 200 || len(evs) == 0 || evs[len(evs)-1].name != "exit" {
			t.Fatalf("streamed command %d: %d %+v", i, code, evs)
		}
	}
	var b budgetBody
	code := call(t, d.url, "POST", sp(s.ID)+"/exec/stream", map[string]any{"command": "touch /workspace/third"}, &b)
	refused(t, "a third streamed command", code, b, "max_execs", 2, 2)
	code = call(t, d.url, "POST", sp(s.ID)+"/exec", map[string]any{"command": "touch /workspace/third"}, &b)
	refused(t, "an exec after two streamed commands", code, b, "max_execs", 2, 2)
	if code := call(t, d.url, "GET", sp(s.ID)+"/files?path=/workspace/third", nil, nil); code != 404 {
		t.Errorf("a refused command ran: /workspace/third answers %d", code)
	}
	got, err := d.c.GetSession(ctx, s.ID)
	if err != nil || got.Usage.Execs != 2 || got.Usage.Jobs != 2 {
		t.Errorf("usage %+v %v, want 2 execs and 2 jobs", got.Usage, err)
	}
	// With jobs limited and execs not, a streamed command still counts
	// as an exec.
	s2 := budgetSession(t, d, `{"max_jobs":5}`)
	if code, _ := streamExec(t, d.url, s2.ID, "true"); code != 200 {
		t.Fatalf("streamed command: %d", code)
	}
	if code := call(t, d.url, "POST", sp(s2.ID)+"/exec", map[string]any{"command": "true"}, nil); code != 200 {
		t.Fatalf("exec: %d", code)
	}
	if got, _ := d.c.GetSession(ctx, s2.ID); got.Usage.Execs != 2 || got.Usage.Jobs != 1 {
		t.Errorf("usage %+v, want 2 execs (one streamed) and 1 job", got.Usage)
	}
}

// TestAttackBudgetWorkspaceBytesFiles: the files API and uploads used to
// write whatever they were given, so a session under
// max_workspace_bytes filled its workspace through them (only commands
// and jobs measured it). Now a file write or an upload is refused with
// the budget's code when the workspace plus what it writes would pass
// the limit, also through a link that leads into the workspace, and an
// upload is measured again when it completes.
func TestAttackBudgetWorkspaceBytesFiles(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	const limit = 64 << 10
	s := budgetSession(t, d, `{"max_workspace_bytes":65536}`)
	put := func(path string, n int) (int, budgetBody) {
		var b budgetBody
		code := call(t, d.url, "PUT", sp(s.ID)+"/files/content", map[string]any{"path": path,
			"content_base64": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), n))}, &b)
		return code, b
	}
	exists := func(path string) bool {
		return call(t, d.url, "GET", sp(s.ID)+"/files?path="+path, nil, nil) == 200
	}
	code, b := put("/workspace/big.bin", 100<<10)
	refused(t, "a 100 KiB write", code, b, "max_workspace_bytes", limit, 0)
	if exists("/workspace/big.bin") {
		t.Error("the refused write left its file")
	}
	if _, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "ln -s /workspace /tmp/ws"}); err != nil {
		t.Fatal(err)
	}
	code, b = put("/tmp/ws/big.bin", 100<<10)
	refused(t, "a 100 KiB write through a link into the workspace", code, b, "max_workspace_bytes", limit, 0)
	if code, _ := put("/workspace/small.bin", 16<<10); code != 200 {
		t.Fatalf("a 16 KiB write: %d", code)
	}

	// Uploads: refused at open when they cannot fit, and measured again
	// at complete.
	p := sp(s.ID) + "/uploads"
	code = call(t, d.url, "POST", p, map[string]any{"path": "/workspace/huge.bin", "size": 100 << 10}, &b)
	refused(t, "opening a 100 KiB upload", code, b, "max_workspace_bytes", limit, 0)
	var up workspace.Upload
	if code := call(t, d.url, "POST", p, map[string]any{"path": "/workspace/up.bin", "size": 30 << 10}, &up); code != 201 {
		t.Fatalf("open a 30 KiB upload: %d", code)
	}
	req, _ := http.NewRequest("PUT", d.url+p+"/"+up.ID+"?offset=0", bytes.NewReader(bytes.Repeat([]byte("u"), 30<<10)))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chunk: %d", resp.StatusCode)
	}
	// Meanwhile the workspace grows: the upload no longer fits.
	if code, _ := put("/workspace/mid.bin", 30<<10); code != 200 {
		t.Fatalf("a 30 KiB write: %d", code)
	}
	code = call(t, d.url, "POST", p+"/"+up.ID+"/complete", nil, &b)
	refused(t, "completing an upload the workspace no longer holds", code, b, "max_workspace_bytes", limit, 46<<10)
	if exists("/workspace/up.bin") {
		t.Error("the refused upload left its file")
	}
	if code := call(t, d.url, "DELETE", sp(s.ID)+"/files?path=/workspace/mid.bin", nil, nil); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	if code := call(t, d.url, "POST", p+"/"+up.ID+"/complete", nil, &up); code != 200 || !exists("/workspace/up.bin") {
		t.Errorf("completing once there is room: %d", code)
	}
	if got, _ := d.c.GetSession(ctx, s.ID); got.Usage.WorkspaceBytes < 16<<10 || got.Usage.WorkspaceBytes > limit {
		t.Errorf("usage.workspace_bytes %d", got.Usage.WorkspaceBytes)
	}
}
