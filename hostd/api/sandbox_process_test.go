package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// guardModule is an operator's process module: it applies to every
// command the process policy judges, sessions' and sandboxes' alike.
const guardModule = `package paddock.ext.guard.process

deny contains "no rm -rf here" if contains(input.command, "rm -rf")
`

// guardedDaemon is a daemon on procbox whose policy engine has
// guardModule, for the sandbox process route's judgement.
func guardedDaemon(t *testing.T) (url string, led *ledger.Ledger) {
	t.Helper()
	testutil.RequiresRoot(t)
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	led = ledger.New(st)
	b, err := procbox.New(hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ext := t.TempDir()
	if err := os.WriteFile(filepath.Join(ext, "guard.rego"), []byte(guardModule), 0o644); err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(policy.Options{ExtDir: ext})
	if err != nil {
		t.Fatal(err)
	}
	mgr := session.New(session.Config{Store: st, Ledger: led, Backend: b, DefaultImage: testutil.MiniImageName, Policy: eng})
	t.Cleanup(func() { mgr.Shutdown(context.Background()) })
	srv := api.New(mgr, sha256.Sum256([]byte(token)), nil)
	srv.SetPolicy(eng)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL, led
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
	var sb session.Sandbox
	if code := call(t, url, "POST", "/v1/sandboxes", session.SandboxRequest{TTLSeconds: 600}, &sb); code != 201 {
		t.Fatalf("create sandbox: %d", code)
	}
	const bad = "touch /tmp/keep && rm -rf /tmp/keep"
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
	var out session.ProcessResult
	if code := call(t, url, "POST", "/v1/sandboxes/"+sb.ID+"/process", map[string]any{"command": "test -e /tmp/keep; echo $?"}, &out); code != 200 || out.Result != "exec" || out.Stdout != "1\n" {
		t.Errorf("after the refusal: %d %+v (the refused command ran?)", code, out)
	}
}
