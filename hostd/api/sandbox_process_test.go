package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/policy"
)

// guardModule is an operator's process module: it applies to every
// command the process policy judges, sessions' and sandboxes' alike.
const guardModule = `package paddock.ext.guard.process

deny contains "no rm -rf here" if contains(input.command, "rm -rf")
`

// guardedDaemon is a daemon on the fake backend whose policy engine has
// guardModule (an operator's module, as --policy-ext gives it), for the
// sandbox process route's judgement: a policy decision, not a sandbox's
// walls, so it needs no root.
func guardedDaemon(t *testing.T) (url string, led *ledger.Ledger) {
	t.Helper()
	ext := t.TempDir()
	if err := os.WriteFile(filepath.Join(ext, "guard.rego"), []byte(guardModule), 0o644); err != nil {
		t.Fatal(err)
	}
	d := fakeDaemon(t, daemontest.WithPolicyOptions(policy.Options{ExtDir: ext}))
	return d.url, d.led
}

// callBody is a call's status and raw body.
func callBody(t *testing.T, url, method, path string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestSandboxProcessJudged: POST /v1/sandboxes/{id}/process is judged
// like a session's exec: a command the operator's module denies is
// refused with the same 403 and the same body (error, rule), ledgered as
// exec.refused, and never runs; an allowed one still answers as before.
func TestSandboxProcessJudged(t *testing.T) {
	url, led := guardedDaemon(t)
	var s session.Session
	if code := call(t, url, "POST", "/v1/agents/sessions", session.CreateRequest{TTLSeconds: 600}, &s); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var sb sandboxes.Sandbox
	if code := call(t, url, "POST", "/v1/sandboxes", sandboxes.SandboxRequest{TTLSeconds: 600}, &sb); code != 201 {
		t.Fatalf("create sandbox: %d", code)
	}
	const bad = "touch keep && rm -rf keep"
	execCode, execBody := callBody(t, url, "POST", "/v1/agents/sessions/"+s.ID+"/exec", map[string]any{"command": bad})
	procCode, procBody := callBody(t, url, "POST", "/v1/sandboxes/"+sb.ID+"/process", map[string]any{"command": bad})
	if execCode != 403 || procCode != 403 {
		t.Fatalf("exec %d %s; process %d %s; want 403 for both", execCode, execBody, procCode, procBody)
	}
	if !bytes.Equal(execBody, procBody) {
		t.Errorf("the bodies differ:\nexec:    %s\nprocess: %s", execBody, procBody)
	}
	var body map[string]any
	if err := json.Unmarshal(procBody, &body); err != nil || body["rule"] != "ext.guard.process" || body["error"] == "" {
		t.Errorf("process refusal body: %s (%v)", procBody, err)
	}
	if k := kinds(t, led, sb.ID); k[len(k)-1] != "exec.refused" {
		t.Errorf("sandbox ledger: %v, want it to end with exec.refused", k)
	}
	var out sandboxes.ProcessResult
	if code := call(t, url, "POST", "/v1/sandboxes/"+sb.ID+"/process", map[string]any{"command": "test -e keep; echo $?"}, &out); code != 200 || out.Result != "exec" || out.Stdout != "1\n" {
		t.Errorf("after the refusal: %d %+v (the refused command ran?)", code, out)
	}
}
