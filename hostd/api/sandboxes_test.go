package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/internal/testutil"
)

// sandboxDaemon is daemon() that also hands out the state dir and the
// ledger, to look behind the API.
func sandboxDaemon(t *testing.T) (c *client.Client, url, state string, led *ledger.Ledger) {
	t.Helper()
	d := newTestDaemon(t)
	return d.c, d.url, d.state, d.led
}

// rawCall sends body as it is and returns the status and the error text.
func rawCall(t *testing.T, url, method, path string, body io.Reader) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

func kinds(t *testing.T, led *ledger.Ledger, id string) []string {
	t.Helper()
	es, err := led.List(context.Background(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Kind)
	}
	return out
}

// TestSandboxes walks the lower API on real sandboxes: create, a command's
// exit code and output, files with awkward names both ways (small, and
// past the guest's one-call limit), the refusals, and delete.
func TestSandboxes(t *testing.T) {
	c, url, _, led := sandboxDaemon(t)
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, sandboxes.SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sb.ID, "sbx-") || sb.Status != "running" || sb.Backend != "procbox" || sb.Image != testutil.MiniImageName ||
		!sb.Offline || sb.TTLSeconds != 600 || sb.ExpiresAt.Sub(sb.CreatedAt) != 600*time.Second {
		t.Errorf("created: %+v", sb)
	}
	p := "/v1/sandboxes/" + sb.ID

	var res sandboxes.ProcessResult
	if code := call(t, url, "POST", p+"/process", map[string]any{"command": "uname -s; echo out; echo err >&2; exit 3"}, &res); code != 200 ||
		res.Result != "exec" || res.ExitCode != 3 || res.Stdout != "Linux\nout\n" || res.Stderr != "err\n" || res.TimedOut {
		t.Errorf("process: %d %+v", code, res)
	}
	r, err := c.SandboxProcess(ctx, sb.ID, sandboxes.ProcessRequest{Command: `pwd; echo "$GREETING"`, Env: map[string]string{"GREETING": "hello there"}})
	if err != nil || r.ExitCode != 0 || r.Stdout != "/workspace\nhello there\n" {
		t.Errorf("default cwd and env: %+v %v", r, err)
	}
	if r, err := c.SandboxProcess(ctx, sb.ID, sandboxes.ProcessRequest{Command: "pwd", Cwd: "/tmp"}); err != nil || r.Stdout != "/tmp\n" {
		t.Errorf("cwd: %+v %v", r, err)
	}
	if r, err := c.SandboxProcess(ctx, sb.ID, sandboxes.ProcessRequest{Command: "sleep 5", TimeoutSeconds: 1}); err != nil || !r.TimedOut {
		t.Errorf("timeout: %+v %v", r, err)
	}

	// Files: spaces, unicode, binary content and a mode, both ways.
	awkward := "/workspace/dir with spaces/naïve ünïcødé 文件 (1).bin"
	content := []byte("bytes \x00\xff\xfe and a newline\n")
	w, err := c.SandboxWriteFile(ctx, sb.ID, awkward, content, "0640")
	if err != nil || w.Path != awkward || w.Size != int64(len(content)) || w.Mode != "0640" {
		t.Fatalf("write: %+v %v", w, err)
	}
	got, f, err := c.SandboxReadFile(ctx, sb.ID, awkward)
	if err != nil || !bytes.Equal(got, content) || f.Mode != "0640" || f.Size != int64(len(content)) || f.Path != awkward {
		t.Errorf("read: %q %+v %v", got, f, err)
	}
	if r, _ := c.SandboxProcess(ctx, sb.ID, sandboxes.ProcessRequest{Command: "ls 'dir with spaces'"}); r.Stdout != "naïve ünïcødé 文件 (1).bin\n" {
		t.Errorf("the file as the sandbox sees it: %q", r.Stdout)
	}
	var wr sandboxes.SandboxWritten
	if code := call(t, url, "POST", p+"/fs/write", map[string]any{"path": "/tmp/t.txt", "content": "plain text ✓\n"}, &wr); code != 200 || wr.Size != int64(len("plain text ✓\n")) || wr.Mode != "0644" {
		t.Errorf("write of text content: %d %+v", code, wr)
	}
	if got, _, err := c.SandboxReadFile(ctx, sb.ID, "/tmp/t.txt"); err != nil || string(got) != "plain text ✓\n" {
		t.Errorf("read of text content: %q %v", got, err)
	}
	// Past the guest's 8 MiB single read and write: uploads and ranges.
	big := bytes.Repeat([]byte("0123456789abcdef"), (12<<20)/16+5)
	if w, err := c.SandboxWriteFile(ctx, sb.ID, "/workspace/big file.bin", big, "600"); err != nil || w.Size != int64(len(big)) || w.Mode != "0600" {
		t.Fatalf("write of %d bytes: %+v %v", len(big), w, err)
	}
	if got, f, err := c.SandboxReadFile(ctx, sb.ID, "/workspace/big file.bin"); err != nil || !bytes.Equal(got, big) || f.Mode != "0600" {
		t.Errorf("read of %d bytes: %d bytes, %+v %v", len(big), len(got), f, err)
	}

	// Refusals.
	var e struct{ Error string }
	if code := call(t, url, "POST", p+"/fs/read", map[string]any{"path": "/workspace/none.txt"}, &e); code != 404 || !strings.Contains(e.Error, "/workspace/none.txt does not exist") {
		t.Errorf("missing file: %d %q", code, e.Error)
	}
	for _, bad := range []string{"", "workspace/x", "/workspace/../etc/passwd", "/a\nb", "/a\x00b"} {
		if code := call(t, url, "POST", p+"/fs/read", map[string]any{"path": bad}, nil); code != 400 {
			t.Errorf("read of %q: %d, want 400", bad, code)
		}
		if code := call(t, url, "POST", p+"/fs/write", map[string]any{"path": bad, "content": "x"}, nil); code != 400 {
			t.Errorf("write of %q: %d, want 400", bad, code)
		}
	}
	for _, tc := range []struct {
		name, path string
		body       any
		want       int
	}{
		{"both contents", "/fs/write", map[string]any{"path": "/tmp/x", "content": "a", "content_base64": "YQ=="}, 400},
		{"bad base64", "/fs/write", map[string]any{"path": "/tmp/x", "content_base64": "***"}, 400},
		{"bad mode", "/fs/write", map[string]any{"path": "/tmp/x", "content": "a", "mode": "rwx"}, 400},
		{"read a directory", "/fs/read", map[string]any{"path": "/workspace"}, 400},
		{"unknown field", "/process", map[string]any{"command": "true", "shell": "bash"}, 400},
		{"empty command", "/process", map[string]any{"command": " "}, 400},
		{"timeout too long", "/process", map[string]any{"command": "true", "timeout_seconds": 99999}, 400},
		{"relative cwd", "/process", map[string]any{"command": "true", "cwd": "tmp"}, 400},
		{"missing cwd", "/process", map[string]any{"command": "true", "cwd": "/nowhere"}, 400},
		{"bad env name", "/process", map[string]any{"command": "true", "env": map[string]string{"A-B": "1"}}, 400},
	} {
		if code := call(t, url, "POST", p+tc.path, tc.body, nil); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
		}
	}
	// 413: a body past the limit, content past 32 MiB inside the limit,
	// and a file too large to read.
	huge := `{"path":"/tmp/h","content_base64":"` + strings.Repeat("A", 46<<20) + `"}`
	if code, msg := rawCall(t, url, "POST", p+"/fs/write", strings.NewReader(huge)); code != 413 {
		t.Errorf("a 46 MiB body: %d %q, want 413", code, msg)
	}
	over := base64.StdEncoding.EncodeToString(make([]byte, 32<<20+300))
	if code, msg := rawCall(t, url, "POST", p+"/fs/write", strings.NewReader(`{"path":"/tmp/h","content_base64":"`+over+`"}`)); code != 413 || !strings.Contains(msg, "fs/write") {
		t.Errorf("content of 32 MiB + 300 bytes: %d %q, want 413", code, msg)
	}
	if r, err := c.SandboxProcess(ctx, sb.ID, sandboxes.ProcessRequest{Command: "head -c 34000000 /dev/zero > /tmp/large"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("making a large file: %+v %v", r, err)
	}
	if code := call(t, url, "POST", p+"/fs/read", map[string]any{"path": "/tmp/large"}, &e); code != 413 || !strings.Contains(e.Error, "34000000 bytes") {
		t.Errorf("read of 34 MB: %d %q, want 413", code, e.Error)
	}

	// The ledger has what was done: commands and paths, never content or
	// environment values.
	ks := kinds(t, led, sb.ID)
	if strings.Join(ks[:2], ",") != "session.create,exec" || !strings.Contains(strings.Join(ks, ","), "file.write") {
		t.Errorf("ledger: %v", ks)
	}
	es, _ := led.List(ctx, sb.ID, 0, 1000)
	for _, e := range es {
		if strings.Contains(string(e.Data), "hello there") || strings.Contains(string(e.Data), "plain text") {
			t.Errorf("a value reached the ledger: %s", e.Data)
		}
	}

	// Delete: 204 twice, then every route is 404.
	for i := range 2 {
		if code := call(t, url, "DELETE", p, nil, nil); code != 204 {
			t.Errorf("delete %d: %d, want 204", i+1, code)
		}
	}
	for _, rt := range []struct{ method, path string }{{"GET", ""}, {"POST", "/process"}, {"POST", "/fs/read"}, {"POST", "/fs/write"}} {
		body := map[string]any{"command": "true"}
		if rt.path != "/process" {
			body = map[string]any{"path": "/tmp/x"}
		}
		if rt.method == "GET" {
			body = nil
		}
		if code := call(t, url, rt.method, p+rt.path, body, nil); code != 404 {
			t.Errorf("%s %s after delete: %d, want 404", rt.method, rt.path, code)
		}
	}
	if _, err := c.SandboxProcess(ctx, sb.ID, sandboxes.ProcessRequest{Command: "true"}); status(err) != 404 {
		t.Errorf("process after delete: %v, want 404", err)
	}
}

// TestSandboxCreateRefusals: what a sandbox cannot be asked for yet.
func TestSandboxCreateRefusals(t *testing.T) {
	_, url, _, _ := sandboxDaemon(t)
	for _, tc := range []struct {
		name, body string
		want       int
		says       string
	}{
		{"network", `{"offline": false}`, 400, "offline"},
		{"allow-list without egress", `{"allow_hosts": ["example.com"]}`, 409, "no egress"},
		{"bad allow-list", `{"allow_hosts": ["*.com"]}`, 400, "*.com"},
		{"volumes", `{"volumes": [{"name": "cache", "guest_path": "/mnt/cache"}]}`, 400, "volumes"},
		{"ttl too long", fmt.Sprintf(`{"ttl_seconds": %d}`, session.MaxTTLSeconds+1), 400, "ttl_seconds"},
		{"negative ttl", `{"ttl_seconds": -1}`, 400, "ttl_seconds"},
		{"unknown image", `{"image": "nope"}`, 400, "nope"},
		{"bad cpus", `{"cpus": 1000}`, 400, "cpus"},
		{"unknown field", `{"template": "x"}`, 400, "template"},
		{"body too large", `{"image": "` + strings.Repeat("a", 2<<20) + `"}`, 413, ""},
	} {
		code, msg := rawCall(t, url, "POST", "/v1/sandboxes", strings.NewReader(tc.body))
		if code != tc.want || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.name, code, msg, tc.want, tc.says)
		}
	}
	// offline: true (and an empty allow-list) are what we do anyway.
	var sb sandboxes.Sandbox
	if code := call(t, url, "POST", "/v1/sandboxes", map[string]any{"offline": true, "allow_hosts": []string{}}, &sb); code != 201 || !sb.Offline {
		t.Errorf("offline: true: %d %+v", code, sb)
	}
	var r sandboxes.ProcessResult
	if call(t, url, "POST", "/v1/sandboxes/"+sb.ID+"/process", map[string]any{"command": "ls /sys/class/net"}, &r); r.Stdout != "lo\n" {
		t.Errorf("interfaces in an offline sandbox: %q", r.Stdout)
	}
	call(t, url, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
}

// TestSandboxesAndSessionsApart: a sandbox is a session record, but the
// session routes never show one, and the sandbox routes never show (or
// delete) a session.
func TestSandboxesAndSessionsApart(t *testing.T) {
	d := fakeDaemon(t)
	c, url := d.c, d.url
	ctx := context.Background()
	first, err := c.CreateSandbox(ctx, sandboxes.SandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSandbox(ctx, first.ID)
	s, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)
	second, err := c.CreateSandbox(ctx, sandboxes.SandboxRequest{TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSandbox(ctx, second.ID)
	if first.TTLSeconds != sandboxes.DefaultSandboxTTLSeconds {
		t.Errorf("default TTL %d, want %d", first.TTLSeconds, sandboxes.DefaultSandboxTTLSeconds)
	}

	list, err := c.ListSandboxes(ctx)
	if err != nil || len(list) != 2 || list[0].ID != first.ID || list[1].ID != second.ID {
		t.Errorf("sandboxes, oldest first: %+v %v", list, err)
	}
	if got, err := c.GetSandbox(ctx, second.ID); err != nil || got.ID != second.ID || got.Status != "running" {
		t.Errorf("get: %+v %v", got, err)
	}
	sessions, err := c.ListSessions(ctx)
	if err != nil || len(sessions) != 1 || sessions[0].ID != s.ID {
		t.Errorf("sessions: %+v %v", sessions, err)
	}
	var e struct{ Error string }
	sp := "/v1/agents/sessions/" + first.ID
	if code := call(t, url, "GET", sp, nil, &e); code != 404 || !strings.Contains(e.Error, "/v1/sandboxes/"+first.ID) {
		t.Errorf("a sandbox on the session route: %d %q", code, e.Error)
	}
	for _, rt := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/exec", map[string]any{"command": "true"}},
		{"POST", "/checkpoint", map[string]any{}},
		{"GET", "/events", nil},
		{"GET", "/files/content?path=/tmp", nil},
		{"DELETE", "", nil},
	} {
		if code := call(t, url, rt.method, sp+rt.path, rt.body, nil); code != 404 {
			t.Errorf("%s %s on a sandbox: %d, want 404", rt.method, rt.path, code)
		}
	}
	if _, err := c.SandboxProcess(ctx, first.ID, sandboxes.ProcessRequest{Command: "true"}); err != nil {
		t.Errorf("the sandbox after the session routes refused it: %v", err)
	}
	// The other way round.
	if _, err := c.GetSandbox(ctx, s.ID); status(err) != 404 || !strings.Contains(err.Error(), "agent session") {
		t.Errorf("a session on the sandbox route: %v", err)
	}
	if _, err := c.SandboxProcess(ctx, s.ID, sandboxes.ProcessRequest{Command: "true"}); status(err) != 404 {
		t.Errorf("process on a session: %v, want 404", err)
	}
	if err := c.DeleteSandbox(ctx, s.ID); status(err) != 404 {
		t.Errorf("sandbox delete of a session: %v, want 404", err)
	}
	if got, err := c.GetSession(ctx, s.ID); err != nil || got.State != session.StateRunning {
		t.Errorf("the session after a sandbox delete named it: %+v %v", got, err)
	}
}

// TestSandboxTTL: a sandbox past its TTL is removed on its own (its timer,
// no request touching it), not kept as expired; every route is 404 after.
func TestSandboxTTL(t *testing.T) {
	c, url, state, led := sandboxDaemon(t)
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, sandboxes.SandboxRequest{TTLSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, "procbox", "machines", sb.ID)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the sandbox's machine directory: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the machine is still there 10 s after a 1 s TTL: %v", err)
	}
	machineGone(t, state, sb.ID) // and its socket, cgroups and processes
	if _, err := c.GetSandbox(ctx, sb.ID); status(err) != 404 {
		t.Errorf("get after the TTL: %v, want 404", err)
	}
	if code := call(t, url, "POST", "/v1/sandboxes/"+sb.ID+"/process", map[string]any{"command": "true"}, nil); code != 404 {
		t.Errorf("process after the TTL: %d, want 404", code)
	}
	if list, _ := c.ListSandboxes(ctx); len(list) != 0 {
		t.Errorf("listed after the TTL: %+v", list)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Errorf("delete after the TTL: %v, want 204", err)
	}
	if ks := strings.Join(kinds(t, led, sb.ID), ","); ks != "session.create,sandbox.expire,session.delete" {
		t.Errorf("ledger %s", ks)
	}
}

// TestSandboxIdempotency: a retried create or process with the same key
// runs once.
func TestSandboxIdempotency(t *testing.T) {
	d := fakeDaemon(t)
	c, url := d.c, d.url
	ctx := context.Background()
	post := func(path, key, body string) (int, string) {
		req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, first := post("/v1/sandboxes", "sbx-create-1", `{"ttl_seconds": 300}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, first)
	}
	if code, again := post("/v1/sandboxes", "sbx-create-1", `{"ttl_seconds": 300}`); code != 201 || again != first {
		t.Errorf("retried create: %d, same answer %v", code, again == first)
	}
	if list, _ := c.ListSandboxes(ctx); len(list) != 1 {
		t.Errorf("a retried create made %d sandboxes", len(list))
	}
	var sb sandboxes.Sandbox
	json.Unmarshal([]byte(first), &sb)
	defer c.DeleteSandbox(ctx, sb.ID)
	for range 2 {
		if code, body := post("/v1/sandboxes/"+sb.ID+"/process", "p-1", `{"command": "echo x >> count"}`); code != 200 {
			t.Fatalf("process: %d %s", code, body)
		}
	}
	if r, err := c.SandboxProcess(ctx, sb.ID, sandboxes.ProcessRequest{Command: "wc -l < count"}); err != nil || strings.TrimSpace(r.Stdout) != "1" {
		t.Errorf("the command ran %q times, want once (%v)", strings.TrimSpace(r.Stdout), err)
	}
}
