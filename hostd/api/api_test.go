package api_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/grants"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/previews"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/fake"
	"paddock.dev/paddock/internal/testutil"
)

const token = "pdk_test_token_0123456789"

// daemon runs the real thing behind httptest: SQLite store, ledger,
// procbox sandboxes.
func daemon(t *testing.T) (*client.Client, string) {
	t.Helper()
	c, url, _ := daemonStore(t)
	return c, url
}

// daemonStore is daemon, with its store for tests that look into it.
func daemonStore(t *testing.T) (*client.Client, string, *store.Store) {
	t.Helper()
	d := newTestDaemon(t)
	return d.c, d.url, d.st
}

// testDaemon is a daemon with its parts, for tests that look into them.
type testDaemon struct {
	c     *client.Client
	url   string
	mgr   *session.Manager
	ws    *workspace.Service
	gr    *grants.Service   // the credential grants (hostd/grants)
	pv    *previews.Service // the preview URLs (hostd/previews)
	st    *store.Store
	led   *ledger.Ledger
	state string
	api   *api.Server // its Verifier takes tenants (identity_test.go)
	close func() error
}

// newTestDaemon starts the daemon (hostd/daemon, through daemontest)
// with the admin token; opts change it (daemontest.WrapBackend for a
// backend that fails on purpose, daemontest.WithLogger to read its log).
func newTestDaemon(t *testing.T, opts ...daemontest.Option) *testDaemon {
	t.Helper()
	dd := daemontest.New(t, append([]daemontest.Option{daemontest.WithToken(token)}, opts...)...)
	return &testDaemon{c: dd.Client, url: dd.URL, mgr: dd.Manager(), ws: dd.Workspace(), gr: dd.Grants(), pv: dd.Previews(), st: dd.Store(), led: dd.Ledger(), state: dd.StateDir, api: dd.API(), close: dd.Close}
}

// fakeDaemon is newTestDaemon on the fake backend (hypervisor/fake):
// for tests of access rules, identity, idempotency and response shapes,
// which need a sandbox's API but not its walls. It needs no root, and
// `make test-nonroot` runs these tests as an ordinary user. Commands run
// on the host as the test's user, in the machine's directory, so the
// tests give them relative paths only (a session's /workspace is the
// command's working directory).
func fakeDaemon(t *testing.T, opts ...daemontest.Option) *testDaemon {
	t.Helper()
	onFake := daemontest.WithBackends(func(state string) ([]hypervisor.Backend, error) {
		return []hypervisor.Backend{fake.New(filepath.Join(state, fake.Name))}, nil
	})
	return newTestDaemon(t, append([]daemontest.Option{onFake}, opts...)...)
}

func status(err error) int {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// TestWalkthrough is the 60-second walkthrough, through the API, on a
// real sandbox.
func TestWalkthrough(t *testing.T) {
	c, url, st := daemonStore(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, session.CreateRequest{Agent: "claude-code", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if s.State != session.StateRunning || s.Workspace.Path != "/workspace" || s.Revision < 1 {
		t.Errorf("created: %+v", s)
	}
	r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "uname -s && mkdir -p /workspace/demo && echo hi > /workspace/demo/a.txt"})
	if err != nil || r.ExitCode != 0 || r.Stdout != "Linux\n" {
		t.Fatalf("exec: %+v %v", r, err)
	}
	cp, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "before-change"})
	if err != nil || cp.Tag != "before-change" {
		t.Fatalf("checkpoint: %+v %v", cp, err)
	}
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "before-change"}); status(err) != 409 {
		t.Errorf("duplicate tag: %v, want 409", err)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo changed > /workspace/demo/a.txt; echo new > /workspace/b.txt"}); err != nil {
		t.Fatal(err)
	}
	a, err := c.Artifacts(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.Added, ",") != "b.txt,demo,demo/a.txt" || len(a.Modified) != 0 {
		t.Errorf("artifacts: added %v modified %v deleted %v", a.Added, a.Modified, a.Deleted)
	}
	if _, err := c.Restore(ctx, s.ID, -1, "before-change"); err != nil {
		t.Fatal(err)
	}
	r, err = c.Exec(ctx, s.ID, session.ExecRequest{Command: "cat demo/a.txt; test -e b.txt && echo b-exists; true"})
	if err != nil || r.Stdout != "hi\n" {
		t.Errorf("after restore: %+v %v", r, err)
	}
	if _, err := c.Restore(ctx, s.ID, -1, "nope"); status(err) != 404 {
		t.Errorf("restore of an unknown tag: %v, want 404", err)
	}
	got, err := c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx, s.ID, got.Revision-1, session.CheckpointRequest{Tag: "stale"}); status(err) != 412 {
		t.Errorf("stale If-Match: %v, want 412", err)
	}
	kids, err := c.Fork(ctx, s.ID, -1, 2)
	if err != nil || len(kids) != 2 {
		t.Fatalf("fork: %v %v", kids, err)
	}
	for i, k := range kids {
		r, err := c.Exec(ctx, k.ID, session.ExecRequest{Command: "cat demo/a.txt"})
		if err != nil || r.Stdout != "hi\n" || k.Parent != s.ID {
			t.Errorf("child %d: %+v %v", i, r, err)
		}
		if err := c.DeleteSession(ctx, k.ID); err != nil {
			t.Error(err)
		}
	}
	es, err := c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind)
	}
	want := "session.create,exec,checkpoint,exec,restore,exec,fork"
	if strings.Join(kinds, ",") != want {
		t.Errorf("timeline %v, want %s", kinds, want)
	}
	var traj session.Trajectory
	if code := call(t, url, "GET", "/v1/agents/sessions/"+s.ID+"/trajectory", nil, &traj); code != 200 || len(traj.Steps) < len(es) || traj.Steps[0].Step != 1 || traj.Steps[0].Kind != "session.create" || traj.Session.ID != s.ID {
		t.Errorf("trajectory: %d %+v", code, traj.Steps)
	}
	// Every ledger entry is a step; the machine's events join them.
	var fromLedger, fromVM []string
	for _, st := range traj.Steps {
		if st.Source == "ledger" {
			fromLedger = append(fromLedger, st.Kind)
		} else {
			fromVM = append(fromVM, st.Source+":"+st.Kind)
		}
	}
	if strings.Join(fromLedger, ",") != want || strings.Join(fromVM, ",") != "vm:boot,vm:checkpoint,vm:restore,vm:boot,vm:fork" {
		t.Errorf("trajectory: ledger steps %v, vm steps %v", fromLedger, fromVM)
	}
	list, err := c.ListSessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != s.ID {
		t.Errorf("list after deleting the children: %v %v", list, err)
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Errorf("second delete: %v, want 204", err)
	}
	// The record and ledger stay: GET says deleted, the ledger verifies
	// and ends with session.delete, every other route refuses with 409,
	// and the list shows it only when asked.
	gone, err := c.GetSession(ctx, s.ID)
	if err != nil || gone.State != session.StateDeleted || gone.DeletedAt == nil || len(gone.Checkpoints) != 0 {
		t.Errorf("get after delete: %+v %v", gone, err)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "true"}); status(err) != 409 || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("exec after delete: %v, want 409", err)
	}
	if _, err := c.Restore(ctx, s.ID, -1, "t1"); status(err) != 409 {
		t.Errorf("restore after delete: %v, want 409", err)
	}
	evs, err := c.Events(ctx, s.ID)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].Kind != "session.delete" {
		t.Errorf("ledger after delete: %v %v", evs, err)
	}
	if list, _ := c.ListSessions(ctx); len(list) != 0 {
		t.Errorf("the default list shows deleted sessions: %v", list)
	}
	if all, _ := c.ListAllSessions(ctx); len(all) != 3 {
		t.Errorf("include_deleted=true: %d sessions, want the parent and its 2 children", len(all))
	}
	if code := call(t, url, "GET", "/v1/agents/sessions?include_deleted=maybe", nil, nil); code != 400 {
		t.Errorf("include_deleted=maybe: %d", code)
	}
	var n int
	if err := st.DB().QueryRow(`SELECT (SELECT count(*) FROM checkpoints WHERE session_id = ?) + (SELECT count(*) FROM usage WHERE session_id = ?)`, s.ID, s.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows left after delete: %d %v", n, err)
	}
}

func TestRefusals(t *testing.T) {
	c, url := daemon(t)
	ctx := context.Background()
	if _, err := client.New(url, "wrong-token-0000000").ListSessions(ctx); status(err) != 401 {
		t.Errorf("wrong token: %v, want 401", err)
	}
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{"unknown field", `{"agent":"a","color":"red"}`, 400},
		{"bad json", `{`, 400},
		{"bad agent", `{"agent":"a b"}`, 400},
		{"ttl too long", `{"ttl_seconds":99999999}`, 400},
		{"workspace climbs", `{"workspace":{"path":"/a/../etc"}}`, 400},
		{"unknown image", `{"runtime":{"image":"nope"}}`, 400},
		{"backend not enabled", `{"runtime":{"backend":"firecracker"}}`, 400},
		{"backend name too long", `{"runtime":{"backend":"` + strings.Repeat("q", 65) + `"}}`, 400},
		{"body too large", `{"agent":"` + strings.Repeat("a", 2<<20) + `"}`, 413},
	} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/agents/sessions", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	if bl, err := c.Backends(ctx); err != nil || len(bl.Backends) != 1 || bl.Backends[0].Name != "procbox" || !bl.Backends[0].Default || !bl.Backends[0].Capabilities.Available {
		t.Errorf("GET /v1/backends: %v %+v", err, bl)
	}
	if _, err := c.Exec(ctx, "ses-missing", session.ExecRequest{Command: "true"}); status(err) != 404 {
		t.Errorf("exec on a missing session: %v, want 404", err)
	}
	s, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "  "}); status(err) != 400 {
		t.Errorf("empty command: %v, want 400", err)
	}
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "../x"}); status(err) != 400 {
		t.Errorf("bad tag: %v, want 400", err)
	}
	mem := true
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "m", Memory: &mem}); status(err) != 409 {
		t.Errorf("memory checkpoint without support: %v, want 409", err)
	}
	if _, err := c.Fork(ctx, s.ID, -1, 33); status(err) != 400 {
		t.Errorf("fork 33: %v, want 400", err)
	}
	if _, err := c.Restore(ctx, s.ID, -1, "../x"); status(err) != 400 {
		t.Errorf("restore with a malformed tag: %v, want 400", err)
	}
	if code := call(t, url, "POST", "/v1/agents/sessions/"+s.ID+"/exec/stream", map[string]any{"command": "true", "timeout_seconds": 99999}, nil); code != 400 {
		t.Errorf("exec/stream with a timeout past the limit: %d, want 400", code)
	}
	if code := call(t, url, "GET", "/v1/agents/sessions?include_deleted=1", nil, nil); code != 200 {
		t.Errorf("include_deleted=1: %d", code)
	}
}

// call does one raw API request and decodes the JSON answer into out.
func call(t *testing.T, url, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func TestFilesAndJobs(t *testing.T) {
	c, url := daemon(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)
	p := "/v1/agents/sessions/" + s.ID
	content := []byte("hello, files\n")
	if code := call(t, url, "PUT", p+"/files/content", map[string]any{"path": "/workspace/d/f.txt", "content_base64": base64.StdEncoding.EncodeToString(content), "mode": "0600"}, nil); code != 200 {
		t.Fatalf("write: %d", code)
	}
	var rd workspace.FileRead
	if code := call(t, url, "GET", p+"/files/content?path=/workspace/d/f.txt", nil, &rd); code != 200 || rd.ContentBase64 != base64.StdEncoding.EncodeToString(content) || rd.Mode != "0600" {
		t.Errorf("read: %d %+v", code, rd)
	}
	var ls struct {
		Kind    string
		Entries []struct{ Name string }
	}
	if code := call(t, url, "GET", p+"/files?path=/workspace/d", nil, &ls); code != 200 || ls.Kind != "dir" || len(ls.Entries) != 1 || ls.Entries[0].Name != "f.txt" {
		t.Errorf("list: %d %+v", code, ls)
	}
	var rg workspace.FileRange
	if code := call(t, url, "GET", p+"/files/range?path=/workspace/d/f.txt&offset=7&length=5&checksum=true", nil, &rg); code != 200 || rg.DataBase64 != base64.StdEncoding.EncodeToString(content[7:12]) || rg.SHA256 == "" {
		t.Errorf("range: %d %+v", code, rg)
	}
	for _, tc := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", p + "/files/content?path=../etc/passwd", nil, 400},
		{"GET", p + "/files/content?path=/workspace/none", nil, 404},
		{"DELETE", p + "/files?path=/etc&recursive=true", nil, 400},
		{"PUT", p + "/files/content", map[string]any{"path": "/workspace/x", "content_base64": "***"}, 400},
		{"GET", p + "/files/range?path=/workspace/d/f.txt&length=99999999", nil, 400},
		{"GET", p + "/jobs/j-none", nil, 404},
	} {
		if code := call(t, url, tc.method, tc.path, tc.body, nil); code != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, code, tc.want)
		}
	}
	if code := call(t, url, "DELETE", p+"/files?path=/workspace/d&recursive=true", nil, nil); code != 204 {
		t.Errorf("delete: %d", code)
	}
	var job session.Job
	if code := call(t, url, "POST", p+"/jobs", map[string]any{"command": "cat; echo done", "stdin": true}, &job); code != 201 || job.ID == "" || job.Engine != "supervisor" {
		t.Fatalf("start job: %d %+v", code, job)
	}
	if code := call(t, url, "POST", p+"/jobs/"+job.ID+"/stdin", map[string]any{"text": "hi\n", "close": true}, nil); code != 200 {
		t.Errorf("stdin: %d", code)
	}
	var out strings.Builder
	var off int64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		var r session.JobRead
		if code := call(t, url, "GET", p+"/jobs/"+job.ID+"?wait_ms=2000&offset="+strconv.FormatInt(off, 10), nil, &r); code != 200 {
			t.Fatalf("read job: %d", code)
		}
		out.WriteString(r.Output)
		off = r.NextOffset
		if r.EOF {
			if r.State != "exited" || r.ExitCode == nil || *r.ExitCode != 0 {
				t.Errorf("job ended %s %v", r.State, r.ExitCode)
			}
			break
		}
	}
	if out.String() != "hi\ndone\n" {
		t.Errorf("job output %q", out.String())
	}
	es, err := c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind)
		if strings.Contains(string(e.Data), "hello") || strings.Contains(string(e.Data), "hi\\n") {
			t.Errorf("content reached the ledger: %s", e.Data)
		}
	}
	if want := "session.create,file.write,file.delete,job.start,job.stdin"; strings.Join(kinds, ",") != want {
		t.Errorf("ledger %v, want %s", kinds, want)
	}
}

func TestExpiryAndProbe(t *testing.T) {
	d := newTestDaemon(t)
	c, url := d.c, d.url
	ctx := context.Background()
	s, err := c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Tools    map[string]string
		ReadyFor map[string]bool `json:"ready_for"`
	}
	if code := call(t, url, "GET", "/v1/agents/sessions/"+s.ID+"/probe", nil, &p); code != 200 || p.Tools["sha256sum"] == "" || !p.ReadyFor["promote"] {
		t.Errorf("probe: %d %+v", code, p)
	}
	cp, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "before-expiry"})
	if err != nil {
		t.Fatal(err)
	}
	// The machine and the checkpoint are on the host before the TTL.
	machineDir := filepath.Join(d.state, "procbox", "machines", s.SandboxID)
	snapDir := filepath.Join(d.state, "procbox", "snapshots", cp.Snapshot)
	for _, dir := range []string{machineDir, snapDir} {
		if _, err := os.Stat(dir); err != nil || cp.Snapshot == "" || s.SandboxID == "" {
			t.Fatalf("before the TTL: %v (sandbox %q, snapshot %q)", err, s.SandboxID, cp.Snapshot)
		}
	}
	time.Sleep(1200 * time.Millisecond)
	got, err := c.GetSession(ctx, s.ID)
	if err != nil || got.State != session.StateExpired {
		t.Fatalf("after the TTL: %+v %v", got, err)
	}
	// Its checkpoints cannot be used any more, so they are gone, from the
	// record and from the host.
	if len(got.Checkpoints) != 0 {
		t.Errorf("an expired session kept its checkpoints: %+v", got.Checkpoints)
	}
	if _, err := os.Stat(snapDir); !os.IsNotExist(err) {
		t.Errorf("the expired session's checkpoint is still on the host: %v", err)
	}
	// Its sandbox stopped: the machine's directory, socket, cgroups and
	// processes are gone.
	machineGone(t, d.state, s.SandboxID)
	if _, err := c.Restore(ctx, s.ID, -1, "before-expiry"); status(err) != 409 {
		t.Errorf("restore of an expired session: %v, want 409", err)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "true"}); status(err) != 409 {
		t.Errorf("exec on an expired session: %v, want 409", err)
	}
	es, _ := c.Events(ctx, s.ID)
	if len(es) == 0 || es[len(es)-1].Kind != "session.expire" {
		t.Errorf("no session.expire in the ledger: %+v", es)
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Errorf("delete of an expired session: %v", err)
	}
	if got, _ := c.GetSession(ctx, s.ID); got == nil || got.State != session.StateDeleted {
		t.Errorf("an expired session after delete: %+v", got)
	}
}

func TestUploads(t *testing.T) {
	c, url := daemon(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)
	p := "/v1/agents/sessions/" + s.ID + "/uploads"
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/16+7)
	sum := sha256.Sum256(data)
	chunk := func(up string, off int64, b []byte) int {
		req, _ := http.NewRequest("PUT", url+p+"/"+up+"?offset="+strconv.FormatInt(off, 10), bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// A wrong checksum is refused at complete, and nothing is written.
	var bad workspace.Upload
	if code := call(t, url, "POST", p, map[string]any{"path": "/workspace/big.bin", "size": len(data), "sha256": strings.Repeat("0", 64)}, &bad); code != 201 {
		t.Fatalf("open: %d", code)
	}
	for off := 0; off < len(data); off += 4 << 20 {
		if code := chunk(bad.ID, int64(off), data[off:min(off+4<<20, len(data))]); code != 200 {
			t.Fatalf("chunk at %d: %d", off, code)
		}
	}
	if code := call(t, url, "POST", p+"/"+bad.ID+"/complete", nil, nil); code != 409 {
		t.Errorf("complete with a wrong sha256: %d, want 409", code)
	}
	if code := call(t, url, "GET", "/v1/agents/sessions/"+s.ID+"/files/content?path=/workspace/big.bin", nil, nil); code != 404 {
		t.Errorf("a refused upload left the target: %d", code)
	}
	if code := call(t, url, "DELETE", p+"/"+bad.ID, nil, nil); code != 204 {
		t.Errorf("abort: %d", code)
	}
	var up workspace.Upload
	if code := call(t, url, "POST", p, map[string]any{"path": "/workspace/big.bin", "size": len(data), "sha256": hex.EncodeToString(sum[:])}, &up); code != 201 {
		t.Fatalf("open: %d", code)
	}
	if code := chunk(up.ID, 4096, data[:10]); code != 409 {
		t.Errorf("a chunk at the wrong offset: %d, want 409", code)
	}
	if code := call(t, url, "POST", p+"/"+up.ID+"/complete", nil, nil); code != 409 {
		t.Errorf("complete before all bytes: %d, want 409", code)
	}
	// The first chunk lands, then the client "goes away"; a new one asks
	// where to continue and finishes from there.
	if code := chunk(up.ID, 0, data[:4<<20]); code != 200 {
		t.Fatalf("first chunk: %d", code)
	}
	var status workspace.Upload
	if code := call(t, url, "GET", p+"/"+up.ID, nil, &status); code != 200 || status.Received != 4<<20 {
		t.Fatalf("status after the interruption: %d received %d", code, status.Received)
	}
	if code := chunk(up.ID, 0, data[:4<<20]); code != 409 {
		t.Errorf("resending a chunk that landed: %d, want 409", code)
	}
	for off := int(status.Received); off < len(data); off += 4 << 20 {
		if code := chunk(up.ID, int64(off), data[off:min(off+4<<20, len(data))]); code != 200 {
			t.Fatalf("chunk at %d: %d", off, code)
		}
	}
	var done workspace.Upload
	if code := call(t, url, "POST", p+"/"+up.ID+"/complete", nil, &done); code != 200 || !done.Verified || done.State != "complete" {
		t.Fatalf("complete: %d %+v", code, done)
	}
	if code := call(t, url, "POST", p+"/"+up.ID+"/complete", nil, &done); code != 200 || done.State != "complete" {
		t.Errorf("a second complete: %d", code)
	}
	r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "sha256sum big.bin"})
	if err != nil || !strings.HasPrefix(r.Stdout, hex.EncodeToString(sum[:])) {
		t.Errorf("assembled file: %+v %v", r, err)
	}
	for _, tc := range []struct {
		body map[string]any
		want int
	}{
		{map[string]any{"path": "/workspace/x", "size": 0}, 400},
		{map[string]any{"path": "/workspace/x", "size": 3 << 30}, 400},
		{map[string]any{"path": "relative", "size": 10}, 400},
		{map[string]any{"path": "/workspace/x", "size": 10, "sha256": "xyz"}, 400},
	} {
		if code := call(t, url, "POST", p, tc.body, nil); code != tc.want {
			t.Errorf("open %v: %d, want %d", tc.body, code, tc.want)
		}
	}
}

type sseEvent struct{ name, id, data string }

// readSSE reads a whole event stream.
func readSSE(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = line[7:]
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

func TestStreams(t *testing.T) {
	c, url := daemon(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)
	p := "/v1/agents/sessions/" + s.ID
	req, _ := http.NewRequest("POST", url+p+"/exec/stream", strings.NewReader(`{"command":"echo a; sleep 0.3; echo b >&2; echo c; exit 3"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("exec/stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := readSSE(t, resp)
	resp.Body.Close()
	var names []string
	var stdout, stderr strings.Builder
	for _, e := range evs {
		names = append(names, e.name)
		var d struct{ Output, Stderr string }
		json.Unmarshal([]byte(e.data), &d)
		stdout.WriteString(d.Output)
		stderr.WriteString(d.Stderr)
	}
	if len(evs) < 3 || evs[0].name != "start" || evs[len(evs)-1].name != "exit" || !strings.Contains(evs[len(evs)-1].data, `"exit_code":3`) {
		t.Errorf("events %v, last %+v", names, evs[len(evs)-1])
	}
	if stdout.String() != "a\nc\n" || stderr.String() != "b\n" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	// A job stream resumes from Last-Event-ID with nothing repeated.
	var job session.Job
	if code := call(t, url, "POST", p+"/jobs", map[string]any{"command": "echo one; echo two"}, &job); code != 201 {
		t.Fatalf("start job: %d", code)
	}
	// Resume only from what exists: wait until "one\n" was written (a
	// client never holds an id past the output it was sent).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var rd session.JobRead
		if code := call(t, url, "GET", p+"/jobs/"+job.ID, nil, &rd); code == 200 && rd.NextOffset >= 4 {
			break
		}
	}
	req, _ = http.NewRequest("GET", url+p+"/jobs/"+job.ID+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Last-Event-ID", "4:0")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	evs = readSSE(t, resp)
	resp.Body.Close()
	var got strings.Builder
	for _, e := range evs {
		var d struct{ Output string }
		json.Unmarshal([]byte(e.data), &d)
		got.WriteString(d.Output)
	}
	if got.String() != "two\n" || evs[len(evs)-1].name != "exit" {
		t.Errorf("resumed stream: %q %+v", got.String(), evs)
	}
	if code := call(t, url, "GET", p+"/jobs/j-nope/stream", nil, nil); code != 404 {
		t.Errorf("stream of an unknown job: %d", code)
	}
	es, _ := c.Events(ctx, s.ID)
	found := false
	for _, e := range es {
		var d struct {
			ExitCode int  `json:"exit_code"`
			Streamed bool `json:"streamed"`
		}
		json.Unmarshal(e.Data, &d)
		found = found || (e.Kind == "exec" && d.ExitCode == 3 && d.Streamed)
	}
	if !found {
		t.Errorf("the streamed exec is not in the ledger")
	}
}

func TestEventsStream(t *testing.T) {
	c, url := daemon(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", url+"/v1/agents/sessions/"+s.ID+"/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Last-Event-ID", "1") // skip session.create
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []sseEvent)
	go func() { done <- readSSE(t, resp) }()
	// A live entry arrives while the stream is open, then delete ends it.
	time.Sleep(300 * time.Millisecond)
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo live"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(800 * time.Millisecond)
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	var evs []sseEvent
	select {
	case evs = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end after the session was deleted")
	}
	resp.Body.Close()
	var ids []string
	var ledgerEvs []sseEvent
	var vmKinds []string
	for _, e := range evs {
		ids = append(ids, e.name+":"+e.id)
		switch e.name {
		case "ledger":
			ledgerEvs = append(ledgerEvs, e)
		case "vm":
			var v session.VMEvent
			json.Unmarshal([]byte(e.data), &v)
			vmKinds = append(vmKinds, v.Kind)
		}
	}
	if len(ledgerEvs) < 2 || ledgerEvs[0].id != "2" || ledgerEvs[1].id != "3" || !strings.Contains(ledgerEvs[1].data, "echo live") || evs[len(evs)-1].name != "error" {
		t.Errorf("events: %v", ids)
	}
	// The machine's events come too (from the time of the entry resumed
	// after): its boot, and the stop of the delete.
	if strings.Join(vmKinds, ",") != "boot,stop" {
		t.Errorf("vm events in the stream: %v, want boot,stop", vmKinds)
	}
}

func TestGit(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the debian image (built from the network once per machine)")
	}
	testutil.DebianImages(t) // same cache directory as the mini image
	c, url := daemon(t)
	ctx := context.Background()
	// The mini image has no git: the verbs say so.
	mini, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, mini.ID)
	var e struct{ Error string }
	if code := call(t, url, "GET", "/v1/agents/sessions/"+mini.ID+"/git/status", nil, &e); code != 409 || !strings.Contains(e.Error, "git is not installed") {
		t.Errorf("git on mini: %d %q", code, e.Error)
	}
	s, err := c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{Image: testutil.DebianImageName}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)
	p := "/v1/agents/sessions/" + s.ID + "/git"
	if code := call(t, url, "GET", p+"/status", nil, nil); code != 404 {
		t.Errorf("status outside a repository: %d, want 404", code)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "git init -q -b main . && echo one > a.txt"}); err != nil {
		t.Fatal(err)
	}
	var st workspace.GitResult
	if code := call(t, url, "GET", p+"/status", nil, &st); code != 200 || !strings.Contains(st.Output, "?? a.txt") {
		t.Errorf("status: %d %q", code, st.Output)
	}
	var cm workspace.GitResult
	if code := call(t, url, "POST", p+"/commit", map[string]any{"message": "first"}, &cm); code != 200 || len(cm.Commit) != 40 {
		t.Fatalf("commit: %d %+v", code, cm)
	}
	if code := call(t, url, "POST", p+"/commit", map[string]any{"message": "again"}, nil); code != 409 {
		t.Errorf("nothing to commit: %d, want 409", code)
	}
	c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo two >> a.txt"})
	var d workspace.GitResult
	if code := call(t, url, "GET", p+"/diff?path=a.txt", nil, &d); code != 200 || !strings.Contains(d.Output, "+two") {
		t.Errorf("diff: %d %q", code, d.Output)
	}
	for _, bad := range []string{"-rf", "../x", "/etc/passwd"} {
		if code := call(t, url, "GET", p+"/diff?path="+bad, nil, nil); code != 400 {
			t.Errorf("diff path %q: %d, want 400", bad, code)
		}
	}
	if code := call(t, url, "POST", p+"/branch", map[string]any{"name": "agent/try-1"}, nil); code != 200 {
		t.Errorf("branch: %d", code)
	}
	if code := call(t, url, "POST", p+"/branch", map[string]any{"name": "agent/try-1"}, nil); code != 409 {
		t.Errorf("existing branch: %d, want 409", code)
	}
	if code := call(t, url, "POST", p+"/branch", map[string]any{"name": "--force"}, nil); code != 400 {
		t.Errorf("option-like branch: %d, want 400", code)
	}
	var lg workspace.GitResult
	if code := call(t, url, "GET", p+"/log?n=5", nil, &lg); code != 200 || len(lg.Entries) != 1 || lg.Entries[0].Subject != "first" || lg.Entries[0].ID != cm.Commit {
		t.Fatalf("log: %d %+v", code, lg.Entries)
	}
	// No user configured anywhere (the image has no git config): the
	// commit is the daemon's "Paddock Agent".
	if e := lg.Entries[0]; e.Author != "Paddock Agent" || e.Email != "agent@paddock.local" {
		t.Errorf("a commit in a repository without a user is by %q <%s>, want Paddock Agent <agent@paddock.local>", e.Author, e.Email)
	}
	// The repository's own user wins; a signing setting is overridden (with
	// no key in the sandbox, a signed commit would fail).
	if r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "git config user.name 'Repo User' && git config user.email repo@example.test && git config commit.gpgsign true && echo three >> a.txt"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("configuring the repository: %+v %v", r, err)
	}
	if code := call(t, url, "POST", p+"/commit", map[string]any{"message": "as the repo's user"}, &cm); code != 200 {
		t.Fatalf("commit with commit.gpgsign set: %d", code)
	}
	if code := call(t, url, "GET", p+"/log?n=1", nil, &lg); code != 200 || len(lg.Entries) != 1 || lg.Entries[0].Author != "Repo User" || lg.Entries[0].Email != "repo@example.test" {
		t.Errorf("a commit in a repository with a user: %d %+v, want Repo User <repo@example.test>", code, lg.Entries)
	}
	if r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "git cat-file commit HEAD"}); err != nil || r.ExitCode != 0 || strings.Contains(r.Stdout, "gpgsig") {
		t.Errorf("the commit object: %+v %v, want one without a signature", r, err)
	}
	// A diff over 256 KiB is cut there, said so, and is the real diff's
	// beginning; a small one is whole.
	if code := call(t, url, "GET", p+"/diff", nil, &d); code != 200 || d.Output != "" || d.Truncated {
		t.Errorf("diff of a clean tree: %d %+v", code, d)
	}
	if r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "seq 1 60000 >> a.txt"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("growing a.txt: %+v %v", r, err)
	}
	full, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "git diff -- a.txt"})
	if err != nil || full.ExitCode != 0 || len(full.Stdout) <= workspace.MaxGitDiffBytes || full.Truncated {
		t.Fatalf("the whole diff through exec: %d bytes %v, want more than %d", len(full.Stdout), err, workspace.MaxGitDiffBytes)
	}
	d = workspace.GitResult{}
	if code := call(t, url, "GET", p+"/diff?path=a.txt", nil, &d); code != 200 || !d.Truncated || len(d.Output) != workspace.MaxGitDiffBytes || d.Output != full.Stdout[:workspace.MaxGitDiffBytes] {
		t.Errorf("a %d-byte diff: %d, truncated %v, %d bytes (the real diff's first %d: %v)", len(full.Stdout), code, d.Truncated, len(d.Output),
			workspace.MaxGitDiffBytes, len(d.Output) <= len(full.Stdout) && d.Output == full.Stdout[:len(d.Output)])
	}
	if workspace.MaxGitDiffBytes != 256<<10 {
		t.Errorf("MaxGitDiffBytes is %d; the docs say 256 KiB", workspace.MaxGitDiffBytes)
	}
	es, _ := c.Events(ctx, s.ID)
	kinds := []string{}
	for _, e := range es {
		kinds = append(kinds, e.Kind)
	}
	if !strings.Contains(strings.Join(kinds, ","), "git.commit") || !strings.Contains(strings.Join(kinds, ","), "git.branch") {
		t.Errorf("ledger: %v", kinds)
	}
}

func TestIdempotency(t *testing.T) {
	d := fakeDaemon(t)
	c, url := d.c, d.url
	ctx := context.Background()
	post := func(path, key, body string) (int, string, http.Header) {
		req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	code, first, _ := post("/v1/agents/sessions", "create-1", `{"agent":"idem"}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, first)
	}
	code, again, h := post("/v1/agents/sessions", "create-1", `{"agent":"idem"}`)
	if code != 201 || strings.TrimSpace(again) != strings.TrimSpace(first) || h.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: %d replayed=%q same=%v", code, h.Get("Idempotent-Replayed"), strings.TrimSpace(again) == strings.TrimSpace(first))
	}
	if code, _, _ := post("/v1/agents/sessions", "create-1", `{"agent":"other"}`); code != 422 {
		t.Errorf("same key, other body: %d, want 422", code)
	}
	list, _ := c.ListSessions(ctx)
	if len(list) != 1 {
		t.Errorf("a replayed create made %d sessions", len(list))
	}
	var s session.Session
	json.Unmarshal([]byte(first), &s)
	defer c.DeleteSession(ctx, s.ID)
	// exec runs once for two requests with one key.
	for range 2 {
		if code, body, _ := post("/v1/agents/sessions/"+s.ID+"/exec", "exec-1", `{"command":"echo x >> count"}`); code != 200 {
			t.Fatalf("exec: %d %s", code, body)
		}
	}
	r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "wc -l < count"})
	if err != nil || strings.TrimSpace(r.Stdout) != "1" {
		t.Errorf("the command ran %q times, want once (%v)", strings.TrimSpace(r.Stdout), err)
	}
	// A failure is not remembered: the key can be reused.
	if code, _, _ := post("/v1/agents/sessions/"+s.ID+"/restore", "restore-1", `{"tag":"none"}`); code != 404 {
		t.Errorf("restore of an unknown tag: %d", code)
	}
	if code, _, _ := post("/v1/agents/sessions/"+s.ID+"/checkpoint", "restore-1", `{"tag":"later"}`); code != 200 {
		t.Errorf("the key of a failed request, reused: %d", code)
	}
}

// TestExecKeepsRevision: an exec counts in usage but does not change the
// revision, so If-Match still holds after it.
func TestExecKeepsRevision(t *testing.T) {
	c, _ := daemon(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)
	for range 3 {
		if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != s.Revision || got.Usage.Execs != 3 {
		t.Errorf("after 3 execs: revision %d (was %d), execs %d", got.Revision, s.Revision, got.Usage.Execs)
	}
	if _, err := c.Checkpoint(ctx, s.ID, s.Revision, session.CheckpointRequest{Tag: "ok"}); err != nil {
		t.Errorf("If-Match with the create revision after execs: %v", err)
	}
}

// TestExecRacesDelete runs execs while the session is deleted: each answers
// (done, or refused), and the daemon survives.
func TestExecRacesDelete(t *testing.T) {
	c, _ := daemon(t)
	ctx := context.Background()
	for round := 0; round < 8; round++ {
		s, err := c.CreateSession(ctx, session.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "true"}); err != nil {
					errs <- err
				}
			}()
		}
		if err := c.DeleteSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if st := status(err); st != 409 && st != 502 {
				t.Errorf("an exec racing a delete: %v", err)
			}
		}
	}
}

// TestPolicyWithoutEgress: a daemon with no egress refuses a policy that
// needs the network (409 naming the way out), unless it is best-effort,
// which makes an offline session saying so.
func TestPolicyWithoutEgress(t *testing.T) {
	c, _ := daemon(t)
	ctx := context.Background()
	allow := &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "pypi.org"}}}
	if _, err := c.CreateSession(ctx, session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{Network: allow}}}); status(err) != 409 || !strings.Contains(err.Error(), "best-effort") {
		t.Errorf("strict policy without egress: %v, want 409", err)
	}
	be := *allow
	be.Enforcement = rules.EnforcementBestEffort
	s, err := c.CreateSession(ctx, session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{Network: &be}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)
	if s.Capabilities.Egress || len(s.Policy.Unenforced) == 0 || !strings.Contains(s.Policy.Unenforced[0], "offline") {
		t.Errorf("best-effort without egress: caps %+v policy %+v", s.Capabilities, s.Policy)
	}
	if _, err := c.CreateSession(ctx, session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{Preset: "nope"}}}); status(err) != 400 {
		t.Errorf("unknown preset: %v, want 400", err)
	}
}
