package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hostd/workspace"
)

// rawDo is one API request with headers, answering the status and the
// decoded error message (if any).
func rawDo(t *testing.T, url, method, path string, header map[string]string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

// TestLifecycleWritesRefusedWhileCheckpointing: while a checkpoint holds
// the session (slowed by the test hook), every write route and every
// other lifecycle operation answers 409 naming it; reads still answer;
// the checkpoint then completes.
func TestLifecycleWritesRefusedWhileCheckpointing(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	p := sp(s.ID)
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "base"}); err != nil {
		t.Fatal(err)
	}
	var up workspace.Upload
	if code := call(t, d.url, "POST", p+"/uploads", workspace.UploadRequest{Path: "/workspace/up.bin", Size: 4}, &up); code != 201 {
		t.Fatalf("open upload: %d", code)
	}
	d.mgr.SetTestHooks(session.TestHooks{Pause: map[string]time.Duration{"checkpoint": 3 * time.Second}})
	done := make(chan int, 1)
	go func() {
		code, _ := rawDo(t, d.url, "POST", p+"/checkpoint", nil, map[string]any{"tag": "slow"})
		done <- code
	}()
	// Wait until the checkpoint holds the slot.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, msg := rawDo(t, d.url, "POST", p+"/exec", nil, map[string]any{"command": "true"}); code == 409 && strings.Contains(msg, "checkpoint") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the checkpoint never took the session")
		}
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"exec", "POST", "/exec", map[string]any{"command": "true"}},
		{"exec/stream", "POST", "/exec/stream", map[string]any{"command": "true"}},
		{"job start", "POST", "/jobs", map[string]any{"command": "true"}},
		{"file write", "PUT", "/files/content", map[string]any{"path": "/workspace/f", "content_base64": "aGk="}},
		{"file delete", "DELETE", "/files?path=/workspace/f", nil},
		{"upload open", "POST", "/uploads", workspace.UploadRequest{Path: "/workspace/u2", Size: 1}},
		{"upload complete", "POST", "/uploads/" + up.ID + "/complete", nil},
		{"upload abort", "DELETE", "/uploads/" + up.ID, nil},
		{"git commit", "POST", "/git/commit", map[string]any{"message": "x"}},
		{"git branch", "POST", "/git/branch", map[string]any{"name": "b"}},
		{"second checkpoint", "POST", "/checkpoint", map[string]any{"tag": "other"}},
		{"restore", "POST", "/restore", map[string]any{"tag": "base"}},
		{"fork", "POST", "/fork", map[string]any{"count": 1}},
		{"delete", "DELETE", "", nil},
	} {
		if code, msg := rawDo(t, d.url, tc.method, p+tc.path, nil, tc.body); code != 409 || !strings.Contains(msg, "checkpoint is in progress") {
			t.Errorf("%s during a checkpoint: %d %q, want 409 naming the checkpoint", tc.name, code, msg)
		}
	}
	if _, err := d.c.UploadChunk(ctx, s.ID, up.ID, 0, []byte("data")); status(err) != 409 || !strings.Contains(err.Error(), "checkpoint") {
		t.Errorf("upload chunk during a checkpoint: %v, want 409", err)
	}
	if got, err := d.c.GetSession(ctx, s.ID); err != nil || got.InterruptedOp != nil {
		t.Errorf("GET during a checkpoint: %+v %v (its own operation is not an interrupted one)", got, err)
	}
	if code := call(t, d.url, "GET", p+"/files?path=/workspace", nil, nil); code != 200 {
		t.Errorf("a read during a checkpoint: %d", code)
	}
	if code := <-done; code != 200 {
		t.Fatalf("the slow checkpoint: %d", code)
	}
	d.mgr.SetTestHooks(session.TestHooks{})
	if _, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "true"}); err != nil {
		t.Errorf("exec after the checkpoint: %v", err)
	}
	if _, err := d.st.GetLifecycleOp(ctx, s.ID); err == nil {
		t.Errorf("the checkpoint's marker outlived it")
	}
}

// TestLifecycleRefusedWhileCommandsRun: restore refuses while a job runs
// or an exec is in flight (409 saying commands are running); checkpoint,
// fork (the parent is not replaced) and delete do not.
func TestLifecycleRefusedWhileCommandsRun(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	p := sp(s.ID)
	var j session.Job
	if code := call(t, d.url, "POST", p+"/jobs", map[string]any{"command": "sleep 60"}, &j); code != 201 {
		t.Fatalf("job: %d", code)
	}
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "t1"}); err != nil {
		t.Errorf("checkpoint while a job runs: %v, want it to go ahead", err)
	}
	if code, msg := rawDo(t, d.url, "POST", p+"/restore", nil, json.RawMessage(`{"tag":"t1"}`)); code != 409 || !strings.Contains(msg, "commands are running") || !strings.Contains(msg, j.ID) {
		t.Errorf("restore while job %s runs: %d %q, want 409", j.ID, code, msg)
	}
	fr, err := d.c.ForkWith(ctx, s.ID, -1, session.ForkRequest{Count: 1})
	if err != nil || len(fr.Children) != 1 || len(fr.NotCarried) != 1 || fr.NotCarried[0].Job != j.ID || fr.NotCarried[0].Command != "sleep 60" {
		t.Errorf("fork while job %s runs: %+v %v, want one child and the job not carried", j.ID, fr, err)
	} else {
		d.c.DeleteSession(ctx, fr.Children[0].ID)
	}
	if code := call(t, d.url, "DELETE", p+"/jobs/"+j.ID+"?signal=KILL", nil, nil); code != 200 {
		t.Fatalf("kill: %d", code)
	}
	waitJobEnd(t, d.url, s.ID, j.ID)
	if _, err := d.c.Restore(ctx, s.ID, -1, "t1"); err != nil {
		t.Errorf("restore after the job ended: %v", err)
	}

	// An exec in flight.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/started; sleep 3"})
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code := call(t, d.url, "GET", p+"/files?path=/workspace/started", nil, nil); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec never started")
		}
	}
	if code, msg := rawDo(t, d.url, "POST", p+"/restore", nil, json.RawMessage(`{"tag":"t1"}`)); code != 409 || !strings.Contains(msg, "commands are running") || !strings.Contains(msg, "exec") {
		t.Errorf("restore while an exec is in flight: %d %q, want 409", code, msg)
	}
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "t2"}); err != nil {
		t.Errorf("checkpoint while an exec is in flight: %v, want it to go ahead", err)
	}
	wg.Wait()
	kids, err := d.c.Fork(ctx, s.ID, -1, 1)
	if err != nil {
		t.Fatalf("fork once nothing runs: %v", err)
	}
	d.c.DeleteSession(ctx, kids[0].ID)
	// Delete goes ahead while a job runs: it is how a stuck session ends.
	if code := call(t, d.url, "POST", p+"/jobs", map[string]any{"command": "sleep 60"}, &j); code != 201 {
		t.Fatalf("job: %d", code)
	}
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Errorf("delete while a job runs: %v", err)
	}
}

// TestLifecycleIfMatch: checkpoint, restore, fork and delete answer 412
// for a stale revision and go ahead for the current one or *.
func TestLifecycleIfMatch(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p := sp(s.ID)
	rev := func() int64 {
		got, err := d.c.GetSession(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Revision
	}
	stale := map[string]string{}
	ops := []struct {
		name, method, path string
		body               any
	}{
		{"checkpoint", "POST", "/checkpoint", map[string]any{"tag": "c1"}},
		{"restore", "POST", "/restore", map[string]any{"tag": "c1"}},
		{"fork", "POST", "/fork", map[string]any{"count": 1}},
		{"delete", "DELETE", "", nil},
	}
	// A checkpoint to restore, taken with the current revision.
	if code, msg := rawDo(t, d.url, "POST", p+"/checkpoint", map[string]string{"If-Match": strconv.FormatInt(rev(), 10)}, map[string]any{"tag": "c0"}); code != 200 {
		t.Fatalf("checkpoint with the current revision: %d %s", code, msg)
	}
	stale["If-Match"] = strconv.FormatInt(rev()-1, 10)
	for _, op := range ops {
		if code, msg := rawDo(t, d.url, op.method, p+op.path, stale, op.body); code != 412 {
			t.Errorf("%s with a stale If-Match: %d %q, want 412", op.name, code, msg)
		}
	}
	if code, _ := rawDo(t, d.url, "DELETE", p, map[string]string{"If-Match": "soon"}, nil); code != 400 {
		t.Errorf("delete with a malformed If-Match: %d, want 400", code)
	}
	ops[1].body = map[string]any{"tag": "c0"}
	for _, op := range ops {
		cur := map[string]string{"If-Match": `"` + strconv.FormatInt(rev(), 10) + `"`}
		if op.name == "fork" {
			cur["If-Match"] = "*"
		}
		if code, msg := rawDo(t, d.url, op.method, p+op.path, cur, op.body); code/100 != 2 {
			t.Errorf("%s with If-Match %s: %d %q", op.name, cur["If-Match"], code, msg)
		}
	}
	got, _ := d.c.GetSession(ctx, s.ID)
	if got.State != session.StateDeleted {
		t.Errorf("after delete with the current revision: %s", got.State)
	}
	for _, id := range got.Children {
		d.c.DeleteSession(ctx, id)
	}
}

// TestLifecycleInterruptedMarker: a marker another daemon left shows as
// interrupted_op, is ledgered once however often the session is read,
// and goes when a lifecycle operation completes. (The end-to-end version
// with a real SIGKILL is cmd/paddock TestCLIServeInterruptedFork.)
func TestLifecycleInterruptedMarker(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	started := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	if err := d.st.PutLifecycleOp(ctx, store.LifecycleOp{SessionID: s.ID, Op: "restore", StartedAt: started, Daemon: "d-dead"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := d.c.GetSession(ctx, s.ID)
		if err != nil || got.InterruptedOp == nil || got.InterruptedOp.Op != "restore" || !got.InterruptedOp.StartedAt.Equal(started) {
			t.Fatalf("GET with a dead daemon's marker: %+v %v", got.InterruptedOp, err)
		}
	}
	if list, _ := d.c.ListSessions(ctx); len(list) != 1 || list[0].InterruptedOp == nil {
		t.Errorf("the list does not show the interruption")
	}
	count := func() int {
		es, _ := d.c.Events(ctx, s.ID)
		n := 0
		for _, e := range es {
			if e.Kind == "lifecycle.interrupted" {
				n++
			}
		}
		return n
	}
	if n := count(); n != 1 {
		t.Errorf("lifecycle.interrupted ledgered %d times, want once", n)
	}
	// A refused operation does not clear it; a completed one does.
	if code, _ := rawDo(t, d.url, "POST", sp(s.ID)+"/checkpoint", map[string]string{"If-Match": "0"}, map[string]any{"tag": "x"}); code != 412 {
		t.Errorf("stale checkpoint: %d", code)
	}
	if got, _ := d.c.GetSession(ctx, s.ID); got.InterruptedOp == nil {
		t.Errorf("a refused operation cleared the interruption")
	}
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "after"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.c.GetSession(ctx, s.ID); got.InterruptedOp != nil {
		t.Errorf("after a checkpoint completed: %+v", got.InterruptedOp)
	}
	if n := count(); n != 1 {
		t.Errorf("lifecycle.interrupted ledgered %d times after the clear, want once", n)
	}
}
