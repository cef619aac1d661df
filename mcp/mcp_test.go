package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/mcp"
)

// connect runs a Paddock MCP server for c over in-memory transports and
// returns the official SDK's client session talking to it.
func connect(t *testing.T, c *client.Client, opts mcp.Options) *sdk.ClientSession {
	t.Helper()
	return connectWith(t, c, opts, nil)
}

// connectWith is connect with the SDK client's options.
func connectWith(t *testing.T, c *client.Client, opts mcp.Options, copts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	ctx := t.Context()
	srv, err := mcp.New(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "paddock-test", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listTools(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		if tl.InputSchema == nil || tl.Description == "" {
			t.Errorf("tool %s has no input schema or description", tl.Name)
		}
		names = append(names, tl.Name)
	}
	return names
}

// call calls a tool; out (when not nil) gets its structured result. It
// returns the error text of a tool that failed ("" when it did not).
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		return text
	}
	if out != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: structured result %s: %v", name, raw, err)
		}
	}
	return ""
}

func mustCall(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	if e := call(t, cs, name, args, out); e != "" {
		t.Fatalf("%s: %s", name, e)
	}
}

// ExecResult is session_exec's result as a test reads it.
type ExecResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
}

var writeTools = []string{"session_create", "session_exec", "session_approve", "session_job_start", "session_job_stdin", "session_job_kill",
	"session_file_write", "session_checkpoint", "session_restore", "session_fork", "session_promote", "session_delete"}

// TestMCPSessionFlow drives the server with the official Go SDK's client
// against a real daemon on procbox: the tool list with and without
// --allow-write, create, exec, a command held for approval (its id in the
// error), approval by the admin, the approved run, files, fork and
// promote, a budget reached, the ledger naming the tools, and delete.
func TestMCPSessionFlow(t *testing.T) {
	d := daemontest.New(t)

	ro := listTools(t, connect(t, d.Client, mcp.Options{}))
	for _, w := range writeTools {
		if slices.Contains(ro, w) {
			t.Errorf("read-only server lists the write tool %s", w)
		}
	}
	if !slices.Contains(ro, "session_file_read") || !slices.Contains(ro, "session_events") {
		t.Errorf("read-only server: %v", ro)
	}

	cs := connect(t, d.Client, mcp.Options{AllowWrite: true})
	rw := listTools(t, cs)
	for _, w := range writeTools {
		if !slices.Contains(rw, w) {
			t.Errorf("admin write server lacks %s: %v", w, rw)
		}
	}

	var ses struct{ ID string }
	mustCall(t, cs, "session_create", map[string]any{"ask": []string{"touch *"}, "deny": []string{"rm *"}, "max_execs": 8}, &ses)
	if !strings.HasPrefix(ses.ID, "ses-") {
		t.Fatalf("session_create: %+v", ses)
	}
	var ex struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	mustCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "echo hi"}, &ex)
	if ex.ExitCode != 0 || ex.Stdout != "hi\n" {
		t.Fatalf("exec: %+v", ex)
	}

	// Output is cut to its last MaxStreamBytes, and the result says so.
	var big struct {
		Stdout        string `json:"stdout"`
		Truncated     bool   `json:"truncated"`
		StdoutDropped int64  `json:"stdout_dropped_bytes"`
	}
	mustCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "head -c 40000 /dev/zero | tr '\\0' a; echo END"}, &big)
	if len(big.Stdout) != mcp.MaxStreamBytes || !strings.HasSuffix(big.Stdout, "aEND\n") || !big.Truncated || big.StdoutDropped != 40004-mcp.MaxStreamBytes {
		t.Fatalf("long output: %d bytes, truncated %v, dropped %d", len(big.Stdout), big.Truncated, big.StdoutDropped)
	}

	// A command the policy refuses names the rule.
	refused := call(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "rm -rf /workspace"}, nil)
	if !strings.HasPrefix(refused, "policy_refused") || !strings.Contains(refused, "process.deny") {
		t.Fatalf("refused: %q", refused)
	}

	// A job with a stdin: start it, write to it, read its output to the end.
	var job struct{ ID string }
	mustCall(t, cs, "session_job_start", map[string]any{"session": ses.ID, "command": "cat", "stdin": true}, &job)
	mustCall(t, cs, "session_job_stdin", map[string]any{"session": ses.ID, "job": job.ID, "text": "ping\n", "close": true}, nil)
	var jr struct {
		Stdout     string `json:"stdout"`
		NextOffset int64  `json:"next_offset"`
		EOF        bool   `json:"eof"`
	}
	var jobOut string
	for i := 0; i < 20 && !jr.EOF; i++ {
		mustCall(t, cs, "session_job_read", map[string]any{"session": ses.ID, "job": job.ID, "offset": jr.NextOffset, "wait_ms": 2000}, &jr)
		jobOut += jr.Stdout
	}
	if jobOut != "ping\n" || !jr.EOF {
		t.Fatalf("job output %q, eof %v", jobOut, jr.EOF)
	}
	var jobs struct{ Jobs []struct{ ID, State string } }
	mustCall(t, cs, "session_jobs", map[string]any{"session": ses.ID}, &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != job.ID {
		t.Errorf("jobs: %+v", jobs)
	}
	if e := call(t, cs, "session_job_read", map[string]any{"session": ses.ID, "job": job.ID, "wait_ms": 999999}, nil); !strings.HasPrefix(e, "invalid_argument") {
		t.Errorf("wait_ms over the bound: %q", e)
	}

	// A command held for approval: the error names the approval and how
	// to wait for it.
	held := call(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "touch /workspace/deployed"}, nil)
	apr := regexp.MustCompile(`apr-[0-9a-f]{16}`).FindString(held)
	if apr == "" || !strings.HasPrefix(held, "approval_required") || !strings.Contains(held, "approval_wait_seconds") || !strings.Contains(held, "touch *") {
		t.Fatalf("held: %q", held)
	}
	var a struct{ State string }
	mustCall(t, cs, "session_approve", map[string]any{"session": ses.ID, "approval_id": apr, "note": "fine"}, &a)
	if a.State != "approved" {
		t.Fatalf("approve: %+v", a)
	}
	mustCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "touch /workspace/deployed", "approval_id": apr}, &ex)
	if ex.ExitCode != 0 {
		t.Fatalf("approved run: %+v", ex)
	}

	// Waiting for the decision: a call with approval_wait_seconds holds
	// until the operator approves, then runs the command.
	type result struct {
		ex  ExecResult
		err string
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = call(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "touch /workspace/waited", "approval_wait_seconds": 60}, &r.ex)
		done <- r
	}()
	var pending string
	for deadline := time.Now().Add(30 * time.Second); pending == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var as struct {
			Approvals []struct{ ID, Command, State string }
		}
		mustCall(t, cs, "session_approvals", map[string]any{"session": ses.ID}, &as)
		for _, x := range as.Approvals {
			if x.State == "pending" && x.Command == "touch /workspace/waited" {
				pending = x.ID
			}
		}
	}
	if pending == "" {
		t.Fatal("the waiting command's approval request never showed as pending")
	}
	mustCall(t, cs, "session_approve", map[string]any{"session": ses.ID, "approval_id": pending}, nil)
	if r := <-done; r.err != "" || r.ex.ExitCode != 0 {
		t.Fatalf("the waited command: %+v", r)
	}

	// Files.
	var fw struct{ Bytes int }
	mustCall(t, cs, "session_file_write", map[string]any{"session": ses.ID, "path": "/workspace/notes.txt", "content": "hello mcp\n"}, &fw)
	var fr struct {
		Content string
		Size    int64
		EOF     bool
	}
	mustCall(t, cs, "session_file_read", map[string]any{"session": ses.ID, "path": "/workspace/notes.txt"}, &fr)
	if fr.Content != "hello mcp\n" || fr.Size != 10 || !fr.EOF || fw.Bytes != 10 {
		t.Fatalf("file read %+v after write %+v", fr, fw)
	}
	mustCall(t, cs, "session_file_read", map[string]any{"session": ses.ID, "path": "/workspace/notes.txt", "offset": 6, "length": 3}, &fr)
	if fr.Content != "mcp" || fr.EOF {
		t.Fatalf("ranged read: %+v", fr)
	}
	// A part that would end inside a character stops before it.
	mustCall(t, cs, "session_file_write", map[string]any{"session": ses.ID, "path": "/workspace/utf8.txt", "content": "héllo"}, nil)
	var part struct {
		Content       string
		ContentBase64 string `json:"content_base64"`
		NextOffset    int64  `json:"next_offset"`
		EOF           bool
	}
	mustCall(t, cs, "session_file_read", map[string]any{"session": ses.ID, "path": "/workspace/utf8.txt", "length": 2}, &part)
	if part.Content != "h" || part.ContentBase64 != "" || part.NextOffset != 1 || part.EOF {
		t.Fatalf("a part ending inside é: %+v", part)
	}
	mustCall(t, cs, "session_file_read", map[string]any{"session": ses.ID, "path": "/workspace/utf8.txt", "offset": 1}, &part)
	if part.Content != "éllo" || !part.EOF {
		t.Fatalf("the rest: %+v", part)
	}
	var ls struct{ Entries []struct{ Name string } }
	mustCall(t, cs, "session_files", map[string]any{"session": ses.ID}, &ls)
	if !slices.ContainsFunc(ls.Entries, func(e struct{ Name string }) bool { return e.Name == "notes.txt" }) {
		t.Errorf("files: %+v", ls)
	}

	// Checkpoint, change, restore: the change is gone.
	var cp struct{ Tag string }
	mustCall(t, cs, "session_checkpoint", map[string]any{"session": ses.ID, "tag": "before-scratch"}, &cp)
	if cp.Tag != "before-scratch" {
		t.Fatalf("checkpoint: %+v", cp)
	}
	mustCall(t, cs, "session_file_write", map[string]any{"session": ses.ID, "path": "/workspace/scratch.txt", "content": "x"}, nil)
	var restored struct{ Checkpoints []string }
	mustCall(t, cs, "session_restore", map[string]any{"session": ses.ID, "tag": "before-scratch"}, &restored)
	if !slices.Contains(restored.Checkpoints, "before-scratch") {
		t.Errorf("restore: %+v", restored)
	}
	if e := call(t, cs, "session_file_read", map[string]any{"session": ses.ID, "path": "/workspace/scratch.txt"}, nil); !strings.HasPrefix(e, "not_found") {
		t.Errorf("the file written after the checkpoint survived the restore: %q", e)
	}

	// Fork, change the child, promote it back.
	var fk struct{ Children []string }
	mustCall(t, cs, "session_fork", map[string]any{"session": ses.ID, "count": 1}, &fk)
	if len(fk.Children) != 1 {
		t.Fatalf("fork: %+v", fk)
	}
	child := fk.Children[0]
	mustCall(t, cs, "session_file_write", map[string]any{"session": child, "path": "/workspace/from-child.txt", "content": "child\n"}, nil)
	var pr struct {
		Applied int
		Apply   []string
	}
	mustCall(t, cs, "session_promote", map[string]any{"session": child}, &pr)
	if pr.Applied != 1 || len(pr.Apply) != 1 || !strings.Contains(pr.Apply[0], "from-child.txt") {
		t.Fatalf("promote: %+v", pr)
	}
	mustCall(t, cs, "session_file_read", map[string]any{"session": ses.ID, "path": "/workspace/from-child.txt"}, &fr)
	if fr.Content != "child\n" {
		t.Fatalf("promoted file on the parent: %+v", fr)
	}
	mustCall(t, cs, "session_delete", map[string]any{"session": child}, nil)

	// The budget: the session may run 8 commands. Spend them, and the
	// error says which budget and what is left.
	var msg string
	for range 8 {
		if msg = call(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "true"}, nil); msg != "" {
			break
		}
	}
	if !strings.HasPrefix(msg, "budget_exceeded") || !strings.Contains(msg, "max_execs") || !strings.Contains(msg, "left") {
		t.Fatalf("budget: %q", msg)
	}

	// The ledger names the tool behind each call.
	var ev struct {
		Events []struct{ Kind, Data string }
	}
	mustCall(t, cs, "session_events", map[string]any{"session": ses.ID, "limit": 200}, &ev)
	var sawExec, sawWrite, sawRead bool
	for _, e := range ev.Events {
		sawRead = sawRead || e.Kind == "mcp.read" && strings.Contains(e.Data, `"mcp_tool":"session_file_read"`) && strings.Contains(e.Data, `"path":"/workspace/notes.txt"`)
		sawExec = sawExec || strings.Contains(e.Data, `"mcp_tool":"session_exec"`)
		sawWrite = sawWrite || strings.Contains(e.Data, `"mcp_tool":"session_file_write"`)
		if strings.Contains(e.Data, "hello mcp") {
			t.Errorf("the ledger holds file contents: %s %s", e.Kind, e.Data)
		}
	}
	if !sawExec || !sawWrite || !sawRead {
		t.Errorf("the ledger does not name the tools (exec %v, file write %v, file read %v): %+v", sawExec, sawWrite, sawRead, ev.Events)
	}

	mustCall(t, cs, "session_delete", map[string]any{"session": ses.ID}, nil)
	var gone struct{ State string }
	mustCall(t, cs, "session_get", map[string]any{"session": ses.ID}, &gone)
	if gone.State != "deleted" {
		t.Errorf("get after delete: %+v", gone)
	}
}

// TestMCPSessionToken: a session token's server lists only the tools its
// ops allow, defaults to its session, and cannot reach another one.
func TestMCPSessionToken(t *testing.T) {
	d := daemontest.New(t)
	ctx := t.Context()
	a, err := d.Client.CreateSession(ctx, api.CreateRequest{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Client.CreateSession(ctx, api.CreateRequest{Agent: "b"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := d.Client.MintToken(ctx, a.ID, api.TokenRequest{Ops: []string{api.OpRead, api.OpExec, api.OpFilesRead}})
	if err != nil {
		t.Fatal(err)
	}
	sc := client.New(d.URL, tok.Token)
	if _, err := mcp.New(ctx, sc, mcp.Options{Session: b.ID}); err == nil {
		t.Error("a session token's server took another session as its default")
	}
	cs := connect(t, sc, mcp.Options{AllowWrite: true})
	got := listTools(t, cs)
	want := []string{"session_approvals", "session_artifacts", "session_changesets", "session_events", "session_exec", "session_file_read", "session_files", "session_get", "session_probe", "session_speculate"}
	if !slices.Equal(got, want) {
		t.Errorf("session token tools:\n got %v\nwant %v", got, want)
	}
	var ex struct{ Stdout string }
	mustCall(t, cs, "session_exec", map[string]any{"command": "echo scoped"}, &ex)
	if ex.Stdout != "scoped\n" {
		t.Errorf("exec on the default session: %+v", ex)
	}
	if e := call(t, cs, "session_exec", map[string]any{"session": b.ID, "command": "echo no"}, nil); !strings.HasPrefix(e, "forbidden") {
		t.Errorf("exec on another session: %q", e)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "session_file_write", Arguments: map[string]any{"path": "/workspace/x", "content": "x"}})
	if err == nil && !res.IsError {
		t.Errorf("a tool the token lacks was callable: %+v", res)
	}
}

// TestMCPMoreTools: probe, artifacts, git (read, and commit refused by a
// read-only server), rollout, evaluate and a minted session token, over
// the Go SDK's client against a real daemon.
func TestMCPMoreTools(t *testing.T) {
	d := daemontest.New(t)
	cs := connect(t, d.Client, mcp.Options{AllowWrite: true})
	var ses struct{ ID string }
	mustCall(t, cs, "session_create", map[string]any{}, &ses)
	rw := connect(t, d.Client, mcp.Options{AllowWrite: true, Session: ses.ID})
	ro := connect(t, d.Client, mcp.Options{Session: ses.ID})

	var pb struct {
		OS    string
		Tools map[string]string
	}
	mustCall(t, ro, "session_probe", map[string]any{}, &pb)
	if pb.OS != "linux" {
		t.Errorf("probe: %+v", pb)
	}
	mustCall(t, rw, "session_file_write", map[string]any{"path": "/workspace/new.txt", "content": "n"}, nil)
	var art struct{ Added []string }
	mustCall(t, ro, "session_artifacts", map[string]any{}, &art)
	if !slices.Contains(art.Added, "new.txt") && !slices.Contains(art.Added, "/workspace/new.txt") {
		t.Errorf("artifacts: %+v", art)
	}

	if e := call(t, ro, "session_git", map[string]any{"verb": "commit", "message": "m"}, nil); !strings.HasPrefix(e, "forbidden") || !strings.Contains(e, "--allow-write") {
		t.Errorf("git commit on a read-only server: %q", e)
	}
	if e := call(t, ro, "session_git", map[string]any{"verb": "push"}, nil); !strings.HasPrefix(e, "invalid_argument") {
		t.Errorf("git push: %q", e)
	}
	if _, ok := pb.Tools["git"]; ok {
		mustCall(t, rw, "session_exec", map[string]any{"command": "cd /workspace && git init -q && git -c user.email=a@b -c user.name=a add -A && git -c user.email=a@b -c user.name=a commit -qm first"}, nil)
		var lg struct{ Log []string }
		mustCall(t, ro, "session_git", map[string]any{"verb": "log"}, &lg)
		if len(lg.Log) != 1 || !strings.HasSuffix(lg.Log[0], " first") {
			t.Errorf("git log: %+v", lg)
		}
	}

	var ro2 struct {
		Runs []struct {
			ExitCode   *int   `json:"exit_code"`
			StdoutTail string `json:"stdout_tail"`
			Deleted    bool
		}
	}
	mustCall(t, rw, "session_rollout", map[string]any{"command": "echo rolled", "count": 2}, &ro2)
	if len(ro2.Runs) != 2 || ro2.Runs[0].ExitCode == nil || *ro2.Runs[0].ExitCode != 0 || ro2.Runs[1].StdoutTail != "rolled\n" || !ro2.Runs[1].Deleted {
		t.Errorf("rollout: %+v", ro2)
	}
	if e := call(t, rw, "session_rollout", map[string]any{"command": "true", "count": 99}, nil); !strings.HasPrefix(e, "invalid_argument") {
		t.Errorf("rollout of 99: %q", e)
	}
	var ev struct {
		Winner        int
		WinnerSession string `json:"winner_session"`
	}
	mustCall(t, rw, "session_evaluate", map[string]any{"candidates": []string{"false", "echo ok > /workspace/won"}, "test": "test -f /workspace/won"}, &ev)
	if ev.Winner != 1 || ev.WinnerSession == "" {
		t.Errorf("evaluate: %+v", ev)
	}
	if e := call(t, rw, "session_evaluate", map[string]any{"candidates": []string{}}, nil); !strings.HasPrefix(e, "invalid_argument") {
		t.Errorf("evaluate with no candidates: %q", e)
	}

	// Rewind: with rewind on, each exec takes a point first; going back
	// one step undoes the last command.
	on := true
	if _, err := d.Client.RewindConfig(t.Context(), ses.ID, api.RewindConfigRequest{Enabled: &on, Triggers: []string{api.RewindTriggerExec}}); err != nil {
		t.Fatal(err)
	}
	mustCall(t, rw, "session_exec", map[string]any{"command": "echo a > /workspace/r.txt"}, nil)
	mustCall(t, rw, "session_exec", map[string]any{"command": "echo b > /workspace/r.txt"}, nil)
	var pts struct {
		Points []struct{ Tag, Command string }
	}
	mustCall(t, rw, "session_rewind_points", map[string]any{}, &pts)
	if len(pts.Points) != 2 || pts.Points[1].Command != "echo b > /workspace/r.txt" {
		t.Fatalf("rewind points: %+v", pts)
	}
	var rb struct{ Restored string }
	mustCall(t, rw, "session_rewind", map[string]any{}, &rb)
	var rr struct{ Content string }
	mustCall(t, rw, "session_file_read", map[string]any{"path": "/workspace/r.txt"}, &rr)
	if rb.Restored != pts.Points[1].Tag || rr.Content != "a\n" {
		t.Errorf("rewind restored %q (want %q), file %q", rb.Restored, pts.Points[1].Tag, rr.Content)
	}
	off := false
	if _, err := d.Client.RewindConfig(t.Context(), ses.ID, api.RewindConfigRequest{Enabled: &off, Triggers: []string{api.RewindTriggerExec}}); err != nil {
		t.Fatal(err)
	}

	var pv struct{ ID, URL string }
	mustCall(t, rw, "session_preview", map[string]any{"port": 8080}, &pv)
	if pv.ID == "" || !strings.HasPrefix(pv.URL, d.URL) {
		t.Errorf("preview: %+v", pv)
	}
	if e := call(t, rw, "session_preview", map[string]any{"port": 70000}, nil); !strings.HasPrefix(e, "invalid_argument") {
		t.Errorf("preview of port 70000: %q", e)
	}

	// Speculation on the session: nothing changes until the apply.
	var sp struct {
		ID     string
		Status string
	}
	mustCall(t, rw, "session_speculate", map[string]any{"command": "echo spec > /workspace/spec.txt", "paths": []string{"/workspace"}}, &sp)
	if sp.Status != "pending" {
		t.Fatalf("session_speculate: %+v", sp)
	}
	if e := call(t, rw, "session_file_read", map[string]any{"path": "/workspace/spec.txt"}, nil); !strings.HasPrefix(e, "not_found") {
		t.Errorf("the speculated file is in the session before apply: %q", e)
	}
	var scs struct {
		Changesets []struct {
			Files []struct{ Path, Content string }
		}
	}
	mustCall(t, ro, "session_changesets", map[string]any{"changeset": sp.ID, "contents": true}, &scs)
	if len(scs.Changesets) != 1 || len(scs.Changesets[0].Files) != 1 || scs.Changesets[0].Files[0].Content != "spec\n" {
		t.Errorf("session_changesets: %+v", scs)
	}
	mustCall(t, rw, "session_changeset_decide", map[string]any{"changeset": sp.ID, "decision": "approve", "apply": true}, nil)
	var spr struct{ Content string }
	mustCall(t, rw, "session_file_read", map[string]any{"path": "/workspace/spec.txt"}, &spr)
	if spr.Content != "spec\n" {
		t.Errorf("after apply: %+v", spr)
	}

	// The lower sandbox API.
	var sb struct{ ID string }
	mustCall(t, rw, "sandbox_create", map[string]any{}, &sb)
	if sb.ID == "" {
		t.Fatal("sandbox_create gave no id")
	}
	var sx struct {
		ExitCode int `json:"exit_code"`
		Stdout   string
	}
	mustCall(t, rw, "sandbox_exec", map[string]any{"sandbox": sb.ID, "command": "echo in a sandbox; exit 3"}, &sx)
	if sx.ExitCode != 3 || sx.Stdout != "in a sandbox\n" {
		t.Errorf("sandbox_exec: %+v", sx)
	}
	mustCall(t, rw, "sandbox_write_file", map[string]any{"sandbox": sb.ID, "path": "/tmp/s.txt", "content": "0123456789"}, nil)
	var sr struct {
		Content    string
		NextOffset int64 `json:"next_offset"`
		EOF        bool
	}
	mustCall(t, ro, "sandbox_read_file", map[string]any{"sandbox": sb.ID, "path": "/tmp/s.txt", "offset": 4, "length": 3}, &sr)
	if sr.Content != "456" || sr.NextOffset != 7 || sr.EOF {
		t.Errorf("sandbox_read_file: %+v", sr)
	}
	// Speculation: a command on a copy becomes a pending changeset; the
	// sandbox is unchanged until it is approved and applied.
	mustCall(t, rw, "sandbox_exec", map[string]any{"sandbox": sb.ID, "command": "mkdir -p /tmp/spec && echo old > /tmp/spec/g"}, nil)
	var cs1 struct {
		ID     string
		Status string
		Files  []struct{ Path, Op, Content string }
	}
	mustCall(t, rw, "sandbox_speculate", map[string]any{"sandbox": sb.ID, "command": "echo hi > /tmp/spec/f && echo new > /tmp/spec/g", "paths": []string{"/tmp/spec"}}, &cs1)
	if cs1.Status != "pending" || len(cs1.Files) != 2 {
		t.Fatalf("speculate: %+v", cs1)
	}
	if e := call(t, ro, "sandbox_read_file", map[string]any{"sandbox": sb.ID, "path": "/tmp/spec/f"}, nil); e == "" {
		t.Error("the speculated file is in the sandbox before apply")
	}
	var list struct {
		Changesets []struct {
			ID    string
			Files []struct{ Path, Op, Content string }
		}
	}
	mustCall(t, ro, "sandbox_changesets", map[string]any{"sandbox": sb.ID, "changeset": cs1.ID, "contents": true}, &list)
	if len(list.Changesets) != 1 || len(list.Changesets[0].Files) != 2 {
		t.Fatalf("changesets: %+v", list)
	}
	for _, f := range list.Changesets[0].Files {
		if want := map[string]string{"/tmp/spec/f": "hi\n", "/tmp/spec/g": "new\n"}[f.Path]; f.Content != want {
			t.Errorf("changeset file %s: %q, want %q", f.Path, f.Content, want)
		}
	}
	if e := call(t, rw, "sandbox_changeset_decide", map[string]any{"sandbox": sb.ID, "changeset": cs1.ID, "decision": "maybe"}, nil); !strings.HasPrefix(e, "invalid_argument") {
		t.Errorf("decision maybe: %q", e)
	}
	var applied struct {
		Status  string
		Applied []string
	}
	mustCall(t, rw, "sandbox_changeset_decide", map[string]any{"sandbox": sb.ID, "changeset": cs1.ID, "decision": "approve", "apply": true}, &applied)
	if applied.Status != "applied" || len(applied.Applied) != 2 {
		t.Errorf("approve and apply: %+v", applied)
	}
	mustCall(t, ro, "sandbox_read_file", map[string]any{"sandbox": sb.ID, "path": "/tmp/spec/g"}, &sr)
	if sr.Content != "new\n" {
		t.Errorf("after apply: %+v", sr)
	}
	mustCall(t, rw, "sandbox_delete", map[string]any{"sandbox": sb.ID}, nil)

	// Grants: a grant needs a secret's name, never a value; revoking none
	// is fine.
	// (The SDK checks the input schema's required fields; the tool
	// checks the rest.)
	if e := call(t, rw, "session_grant", map[string]any{"hosts": []string{"example.com"}}, nil); !strings.HasPrefix(e, "invalid_argument") || !strings.Contains(e, "secret_ref") {
		t.Errorf("grant without secret_ref: %q", e)
	}
	if e := call(t, rw, "session_grant", map[string]any{"secret_ref": "x", "hosts": []string{}}, nil); !strings.HasPrefix(e, "invalid_argument") {
		t.Errorf("grant without hosts: %q", e)
	}
	mustCall(t, rw, "session_revoke_grants", map[string]any{}, nil)

	var tok struct{ Token string }
	mustCall(t, rw, "session_token", map[string]any{"ops": []string{"read"}}, &tok)
	who, err := client.New(d.URL, tok.Token).WhoAmI(t.Context())
	if err != nil || who.Session != ses.ID || !slices.Equal(who.Ops, []string{"read"}) {
		t.Errorf("minted token: %+v %v", who, err)
	}
}

// TestMCPProgress: a call that asks for progress hears, while its tool
// runs, that the tool still runs; none after the result, and none for a
// call that did not ask.
func TestMCPProgress(t *testing.T) {
	defer mcp.SetProgressEvery(200 * time.Millisecond)()
	d := daemontest.New(t)
	var mu sync.Mutex
	got := map[any][]string{}
	cs := connectWith(t, d.Client, mcp.Options{AllowWrite: true}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			got[r.Params.ProgressToken] = append(got[r.Params.ProgressToken], r.Params.Message)
		},
	})
	var ses struct{ ID string }
	mustCall(t, cs, "session_create", map[string]any{}, &ses)
	p := &sdk.CallToolParams{Name: "session_exec", Arguments: map[string]any{"session": ses.ID, "command": "sleep 1.5"}}
	p.SetProgressToken("long-exec")
	if res, err := cs.CallTool(t.Context(), p); err != nil || res.IsError {
		t.Fatalf("exec: %v %+v", err, res)
	}
	mu.Lock()
	n := len(got["long-exec"])
	mu.Unlock()
	if n < 3 {
		t.Fatalf("%d progress notifications during a 1.5 s exec at 200 ms: %v", n, got)
	}
	mu.Lock()
	if !strings.HasPrefix(got["long-exec"][0], "session_exec still running after") {
		t.Errorf("progress message: %q", got["long-exec"][0])
	}
	mu.Unlock()
	mustCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "sleep 1"}, nil)
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got["long-exec"]) != n || len(got) != 1 {
		t.Errorf("progress after the result, or without a token: %v", got)
	}
}

// TestMCPCancel: a call the client cancels ends its request to the
// daemon, and the command it ran does not run on.
func TestMCPCancel(t *testing.T) {
	d := daemontest.New(t)
	cs := connect(t, d.Client, mcp.Options{AllowWrite: true})
	var ses struct{ ID string }
	mustCall(t, cs, "session_create", map[string]any{}, &ses)
	// sleeping lists the sandbox's processes running sleep 20 (from /proc:
	// the image may have no ps).
	const sleeping = `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep '^sleep 20' || true`
	var ex struct{ Stdout string }
	// A control: a running sleep 20 is seen.
	var job struct{ ID string }
	mustCall(t, cs, "session_job_start", map[string]any{"session": ses.ID, "command": "sleep 20"}, &job)
	mustCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": sleeping}, &ex)
	if ex.Stdout == "" {
		t.Fatal("the control sleep 20 is not seen")
	}
	mustCall(t, cs, "session_job_kill", map[string]any{"session": ses.ID, "job": job.ID, "signal": "KILL"}, nil)

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "session_exec", Arguments: map[string]any{"session": ses.ID, "command": "sleep 20; touch /workspace/late"}})
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("cancelled call: %v after %s", err, time.Since(start))
	}
	// The command is gone from the sandbox soon after.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		mustCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": sleeping}, &ex)
		if ex.Stdout == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled command still runs: %q", ex.Stdout)
		}
	}
}

// TestMCPTenant: a tenant token's server has every tool but
// session_approve, and one tenant's server cannot see another's session.
func TestMCPTenant(t *testing.T) {
	dir := t.TempDir()
	tokA, sumA := auth.NewTenantToken()
	tokB, sumB := auth.NewTenantToken()
	tf := filepath.Join(dir, "tenants.json")
	if err := os.WriteFile(tf, []byte(`{"tenants":[{"name":"a","token_sha256":"`+sumA+`"},{"name":"b","token_sha256":"`+sumB+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.New(t, daemontest.WithTenants(tf))
	a := connect(t, client.New(d.URL, tokA), mcp.Options{AllowWrite: true})
	b := connect(t, client.New(d.URL, tokB), mcp.Options{AllowWrite: true})
	tools := listTools(t, a)
	if slices.Contains(tools, "session_approve") || !slices.Contains(tools, "session_create") || !slices.Contains(tools, "session_fork") {
		t.Errorf("tenant tools: %v", tools)
	}
	var ses struct{ ID string }
	mustCall(t, a, "session_create", map[string]any{}, &ses)
	if e := call(t, b, "session_get", map[string]any{"session": ses.ID}, nil); !strings.HasPrefix(e, "not_found") {
		t.Errorf("another tenant's session: %q", e)
	}
	var l struct{ Sessions []struct{ ID string } }
	mustCall(t, b, "session_list", map[string]any{}, &l)
	if len(l.Sessions) != 0 {
		t.Errorf("tenant b lists %+v", l.Sessions)
	}
	mustCall(t, a, "session_list", map[string]any{}, &l)
	if len(l.Sessions) != 1 || l.Sessions[0].ID != ses.ID {
		t.Errorf("tenant a lists %+v", l.Sessions)
	}
}

// TestMCPMeasuredProgress: session_evaluate and session_rollout, asked
// for progress, report their steps (the fork, each child's run, the
// deletes) as progress rising by one up to a total given from the first
// notification, not a heartbeat.
func TestMCPMeasuredProgress(t *testing.T) {
	d := daemontest.New(t)
	type note struct{ progress, total float64 }
	var mu sync.Mutex
	got := map[any][]note{}
	cs := connectWith(t, d.Client, mcp.Options{AllowWrite: true}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			got[r.Params.ProgressToken] = append(got[r.Params.ProgressToken], note{r.Params.Progress, r.Params.Total})
		},
	})
	var ses struct{ ID string }
	mustCall(t, cs, "session_create", map[string]any{}, &ses)
	call := func(token, tool string, args map[string]any) {
		args["session"] = ses.ID
		p := &sdk.CallToolParams{Name: tool, Arguments: args}
		p.SetProgressToken(token)
		if res, err := cs.CallTool(t.Context(), p); err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
	}
	check := func(token string, total int) {
		t.Helper()
		// The client handles notifications apart from the result, so the
		// last may be handled just after the call returns.
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			n := len(got[token])
			mu.Unlock()
			if n >= total {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		ns := got[token]
		if len(ns) != total {
			t.Fatalf("%s: %d notifications, want %d: %v", token, len(ns), total, ns)
		}
		for i, n := range ns {
			if n.progress != float64(i+1) || n.total != float64(total) {
				t.Errorf("%s: notification %d is %v of %v, want %d of %d", token, i, n.progress, n.total, i+1, total)
			}
		}
	}
	// Three candidates and their deletes: fork, 3 runs, deletes.
	call("eval", "session_evaluate", map[string]any{"candidates": []string{"false", "true", "sleep 0.2"}})
	check("eval", 1+3+1)
	// Two runs kept: fork and 2 runs.
	call("roll", "session_rollout", map[string]any{"command": "true", "count": 2, "keep": true})
	check("roll", 1+2)
}

// TestMCPEventsNewest: session_events on a ledger longer than the
// daemon's page (10000 entries) shows the newest entries, not the tail
// of the first page; after pages on, oldest first, with next and more.
func TestMCPEventsNewest(t *testing.T) {
	d := daemontest.New(t)
	s, err := d.Client.CreateSession(t.Context(), api.CreateRequest{Agent: "events"})
	if err != nil {
		t.Fatal(err)
	}
	led := d.Ledger()
	for i := range 10005 {
		if _, err := led.Append(t.Context(), s.ID, "test.fill", "test", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	newest, err := led.Append(t.Context(), s.ID, "test.newest", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, d.Client, mcp.Options{})
	type events struct {
		Events []struct {
			Seq  int64
			Kind string
		}
		Next int64
		More bool
	}
	var ev events
	mustCall(t, cs, "session_events", map[string]any{"session": s.ID, "limit": 3}, &ev)
	if len(ev.Events) != 3 || ev.Events[2].Seq != newest.Seq || ev.Events[2].Kind != "test.newest" || ev.Next != newest.Seq {
		t.Errorf("the newest 3: %+v, want up to seq %d", ev, newest.Seq)
	}
	ev = events{}
	mustCall(t, cs, "session_events", map[string]any{"session": s.ID, "after": newest.Seq - 5, "limit": 2}, &ev)
	if len(ev.Events) != 2 || ev.Events[0].Seq != newest.Seq-4 || ev.Next != newest.Seq-3 || !ev.More {
		t.Errorf("after %d, limit 2: %+v", newest.Seq-5, ev)
	}
	next := ev.Next
	ev = events{}
	mustCall(t, cs, "session_events", map[string]any{"session": s.ID, "after": next}, &ev)
	// The last page: the rest, then the mcp.read entry of the first call
	// (the calls after it are its folded repeats).
	if len(ev.Events) != 4 || ev.Events[2].Seq != newest.Seq || ev.Events[3].Kind != "mcp.read" || ev.Next != ev.Events[3].Seq || ev.More {
		t.Errorf("after %d: %+v, want the last 3, the read's entry and no more", next, ev)
	}
	if e := call(t, cs, "session_events", map[string]any{"session": s.ID, "after": -1}, nil); !strings.HasPrefix(e, "invalid_argument") {
		t.Errorf("after -1: %q", e)
	}
}
