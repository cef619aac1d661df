package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

// recordingBackend remembers the machines it made, and can pretend the
// host has no confinement.
type recordingBackend struct {
	hypervisor.Backend
	noConfinement bool
	mu            sync.Mutex
	made          []hypervisor.Machine
}

func (b *recordingBackend) Capabilities() hypervisor.Capabilities {
	c := b.Backend.Capabilities()
	if b.noConfinement {
		c.Confinement = false
	}
	return c
}

func (b *recordingBackend) Create(ctx context.Context, spec hypervisor.MachineSpec) (hypervisor.Machine, error) {
	m, err := b.Backend.Create(ctx, spec)
	if err == nil {
		b.mu.Lock()
		b.made = append(b.made, m)
		b.mu.Unlock()
	}
	return m, err
}

func (b *recordingBackend) machines() []hypervisor.Machine {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]hypervisor.Machine(nil), b.made...)
}

// syncBuffer is a log sink tests read while the daemon writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// wsDaemon is daemon with what the workspace tests look at: the state
// directory, the backend's machines, the store and the daemon's log (at
// debug level).
type wsDaemon struct {
	c       *client.Client
	url     string
	state   string
	backend *recordingBackend
	st      *store.Store
	log     *syncBuffer
}

func newWSDaemon(t *testing.T, images string, noConfinement bool) *wsDaemon {
	t.Helper()
	var b *recordingBackend
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := daemontest.New(t, daemontest.WithToken(token), daemontest.WithImage(testutil.MiniImageName, images), daemontest.WithLogger(log),
		daemontest.WrapBackend(func(pb hypervisor.Backend) hypervisor.Backend {
			b = &recordingBackend{Backend: pb, noConfinement: noConfinement}
			return b
		}))
	return &wsDaemon{c: d.Client, url: d.URL, state: d.StateDir, backend: b, st: d.Store(), log: logs}
}

func TestWorkspaceValidation(t *testing.T) {
	d := newWSDaemon(t, testutil.MiniImages(t), false)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ws   session.WorkspaceRequest
		want string
	}{
		{"unknown mode", session.WorkspaceRequest{Mode: "rw"}, `use "writable" (the default), "readonly" or "overlay"`},
		{"overlay without lower", session.WorkspaceRequest{Mode: "overlay"}, "needs workspace.lower"},
		{"overlay with git", session.WorkspaceRequest{Mode: "overlay", Lower: "/etc", Git: "https://example.com/r.git"}, "cannot be combined"},
		{"overlay of a missing directory", session.WorkspaceRequest{Mode: "overlay", Lower: "/nope"}, "does not exist in the image"},
		{"http git", session.WorkspaceRequest{Git: "http://user:s3cret@example.com/r.git"}, "https://"},
		{"ssh git", session.WorkspaceRequest{Git: "git@example.com:o/r.git"}, "https://"},
		{"git with a space", session.WorkspaceRequest{Git: "https://example.com/a b"}, "whitespace"},
		{"git with a control character", session.WorkspaceRequest{Git: "https://example.com/a\x1b"}, "control"},
		{"git too long", session.WorkspaceRequest{Git: "https://example.com/" + strings.Repeat("x", 2048)}, "2048"},
		{"git with a query", session.WorkspaceRequest{Git: "https://example.com/r.git?t=s3cret"}, "query"},
		{"readonly under /proc", session.WorkspaceRequest{Mode: "readonly", Path: "/proc/w"}, "/proc"},
	} {
		_, err := d.c.CreateSession(ctx, session.CreateRequest{Workspace: tc.ws})
		var e *client.Error
		if status(err) != 400 || !asClientErr(err, &e) || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s: %v, want 400 saying %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error quotes the secret: %v", tc.name, err)
		}
	}
	if n := len(d.backend.machines()); n != 0 {
		t.Errorf("refused creates made %d sandboxes", n)
	}
	if ss, err := d.c.ListSessions(ctx); err != nil || len(ss) != 0 {
		t.Errorf("refused creates left sessions: %v %v", ss, err)
	}
	// The default mode is recorded as writable.
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if s.Workspace.Mode != session.ModeWritable || s.Workspace.Git != "" || s.Workspace.Note != "" {
		t.Errorf("default workspace: %+v", s.Workspace)
	}
}

func asClientErr(err error, e **client.Error) bool {
	ce, ok := err.(*client.Error)
	if ok {
		*e = ce
	}
	return ok
}

func TestReadOnlyWorkspaceWithoutConfinement(t *testing.T) {
	d := newWSDaemon(t, testutil.MiniImages(t), true)
	_, err := d.c.CreateSession(context.Background(), session.CreateRequest{Workspace: session.WorkspaceRequest{Mode: "readonly"}})
	if status(err) != 409 || !strings.Contains(err.Error(), "cannot enforce a read-only workspace") {
		t.Errorf("readonly on a backend without confinement: %v, want 409", err)
	}
	if n := len(d.backend.machines()); n != 0 {
		t.Errorf("the refused create made %d sandboxes", n)
	}
}

// TestReadOnlyWorkspace runs real commands, jobs, streams, file writes and
// uploads against a read-only workspace in a procbox sandbox.
func TestReadOnlyWorkspace(t *testing.T) {
	d := newWSDaemon(t, testutil.MiniImages(t), false)
	if !d.backend.Capabilities().Confinement {
		t.Skip("this kernel has no Landlock, so procbox reports no confinement")
	}
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Workspace: session.WorkspaceRequest{Mode: "readonly"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if s.Workspace.Mode != session.ModeReadOnly {
		t.Errorf("record: %+v", s.Workspace)
	}
	if got, err := d.c.GetSession(ctx, s.ID); err != nil || got.Workspace.Mode != session.ModeReadOnly {
		t.Errorf("stored record: %+v %v", got, err)
	}
	p := "/v1/agents/sessions/" + s.ID

	r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/x"})
	if err != nil || r.ExitCode == 0 || !strings.Contains(r.Stderr, "Permission denied") {
		t.Errorf("touch in the workspace: %+v %v, want permission denied", r, err)
	}
	r, err = d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "mkdir /workspace/d"})
	if err != nil || r.ExitCode == 0 {
		t.Errorf("mkdir in the workspace: %+v %v", r, err)
	}
	// Reading works, and so do the usual writable places.
	r, err = d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "pwd && ls -la . >/dev/null && touch /tmp/x /var/tmp/y \"$HOME/z\" && echo ok > /dev/null && echo ok"})
	if err != nil || r.ExitCode != 0 || r.Stdout != "/workspace\nok\n" {
		t.Errorf("reads and writes outside the workspace: %+v %v", r, err)
	}
	// The guest user owns /workspace: only Landlock stops this.
	r, _ = d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "stat -c %u /workspace"})
	if strings.TrimSpace(r.Stdout) != "1000" {
		t.Errorf("the workspace is not the guest user's (%q): the test proves less", r.Stdout)
	}

	// A job is held the same way.
	var job session.Job
	if code := call(t, d.url, "POST", p+"/jobs", map[string]any{"command": "touch /workspace/j"}, &job); code != 201 {
		t.Fatalf("start job: %d", code)
	}
	if job.Confinement == nil || !job.Confinement.Landlock {
		t.Errorf("job confinement report: %+v", job.Confinement)
	}
	var jr session.JobRead
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !jr.EOF; {
		if code := call(t, d.url, "GET", p+"/jobs/"+job.ID+"?wait_ms=2000", nil, &jr); code != 200 {
			t.Fatalf("read job: %d", code)
		}
	}
	if !jr.EOF || jr.ExitCode == nil || *jr.ExitCode == 0 || !strings.Contains(jr.Stderr, "Permission denied") {
		t.Errorf("job writing the workspace: eof %v exit %v stderr %q", jr.EOF, jr.ExitCode, jr.Stderr)
	}
	// And a streamed exec.
	var so, se bytes.Buffer
	code, err := d.c.ExecStream(ctx, s.ID, session.ExecRequest{Command: "echo hi > /workspace/s"}, &so, &se)
	if err != nil || code == 0 || !strings.Contains(se.String(), "Permission denied") {
		t.Errorf("streamed write: exit %d %v stderr %q", code, err, se.String())
	}
	if code, err := d.c.ExecStream(ctx, s.ID, session.ExecRequest{Command: "echo hi > /tmp/s && cat /tmp/s"}, &so, &se); err != nil || code != 0 {
		t.Errorf("streamed write to /tmp: exit %d %v", code, err)
	}

	// The files routes refuse writes under the workspace.
	put := func(path string) int {
		return call(t, d.url, "PUT", p+"/files/content", map[string]any{"path": path, "content_base64": base64.StdEncoding.EncodeToString([]byte("x"))}, nil)
	}
	for _, path := range []string{"/workspace/f", "/workspace/new/dir/f", "/workspace//f", "/workspace/./f"} {
		if code := put(path); code != 403 {
			t.Errorf("PUT %s: %d, want 403", path, code)
		}
	}
	if code := put("/tmp/f"); code != 200 {
		t.Errorf("PUT /tmp/f: %d, want 200", code)
	}
	if code := put("/home/agent/notes/f"); code != 200 {
		t.Errorf("PUT under the home: %d, want 200", code)
	}
	if code := call(t, d.url, "DELETE", p+"/files?path=/workspace/f", nil, nil); code != 403 {
		t.Errorf("DELETE under the workspace: %d, want 403", code)
	}
	if code := call(t, d.url, "DELETE", p+"/files?path=/tmp/f", nil, nil); code != 204 {
		t.Errorf("DELETE /tmp/f: %d, want 204", code)
	}
	// A link planted outside the workspace does not lead a write into it.
	if r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "ln -s /workspace /tmp/ws && mkdir /tmp/d && ln -s ../../workspace /tmp/d/rel"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("links: %+v %v", r, err)
	}
	for _, path := range []string{"/tmp/ws/f", "/tmp/d/rel/f", "/tmp/ws/sub/f"} {
		if code := put(path); code != 403 {
			t.Errorf("PUT %s (through a link into the workspace): %d, want 403", path, code)
		}
	}
	// Replacing the link itself is a write to /tmp, which is allowed.
	if code := put("/tmp/ws"); code != 200 {
		t.Errorf("PUT over the link: %d, want 200", code)
	}

	// Uploads: opening one under the workspace is refused; one opened
	// elsewhere is checked again at complete.
	if code := call(t, d.url, "POST", p+"/uploads", map[string]any{"path": "/workspace/u.bin", "size": 3}, nil); code != 403 {
		t.Errorf("upload open under the workspace: %d, want 403", code)
	}
	var up workspace.Upload
	if code := call(t, d.url, "POST", p+"/uploads", map[string]any{"path": "/tmp/up/u.bin", "size": 3}, &up); code != 201 {
		t.Fatalf("upload open under /tmp: %d", code)
	}
	if _, err := d.c.UploadChunk(ctx, s.ID, up.ID, 0, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "ln -s /workspace /tmp/up"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("swap in a link: %+v %v", r, err)
	}
	if code := call(t, d.url, "POST", p+"/uploads/"+up.ID+"/complete", nil, nil); code != 403 {
		t.Errorf("upload complete through a link into the workspace: %d, want 403", code)
	}
	var up2 workspace.Upload
	if code := call(t, d.url, "POST", p+"/uploads", map[string]any{"path": "/tmp/up2.bin", "size": 3}, &up2); code != 201 {
		t.Fatalf("upload open: %d", code)
	}
	if _, err := d.c.UploadChunk(ctx, s.ID, up2.ID, 0, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if code := call(t, d.url, "POST", p+"/uploads/"+up2.ID+"/complete", nil, nil); code != 200 {
		t.Errorf("upload complete under /tmp: %d, want 200", code)
	}

	// git cannot change the workspace.
	var e struct{ Error string }
	if code := call(t, d.url, "POST", p+"/git/commit", map[string]any{"message": "m"}, &e); code != 403 || !strings.Contains(e.Error, "read-only") {
		t.Errorf("git commit: %d %q, want 403", code, e.Error)
	}
	if code := call(t, d.url, "POST", p+"/git/branch", map[string]any{"name": "b"}, nil); code != 403 {
		t.Errorf("git branch: %d, want 403", code)
	}

	// Nothing got in.
	if r, _ := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "ls -A /workspace | wc -l"}); strings.TrimSpace(r.Stdout) != "0" {
		t.Errorf("the read-only workspace has %s entries", r.Stdout)
	}

	// A fork child keeps the mode, and its policy.
	kids, err := d.c.Fork(ctx, s.ID, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, kids[0].ID)
	if kids[0].Workspace.Mode != session.ModeReadOnly {
		t.Errorf("fork child workspace: %+v", kids[0].Workspace)
	}
	if r, err := d.c.Exec(ctx, kids[0].ID, session.ExecRequest{Command: "touch /workspace/x"}); err != nil || r.ExitCode == 0 {
		t.Errorf("fork child wrote the workspace: %+v %v", r, err)
	}
	if code := call(t, d.url, "PUT", "/v1/agents/sessions/"+kids[0].ID+"/files/content", map[string]any{"path": "/workspace/f", "content_base64": ""}, nil); code != 403 {
		t.Errorf("fork child PUT: %d, want 403", code)
	}

	// A writable session next to it is unaffected.
	w, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, w.ID)
	if r, err := d.c.Exec(ctx, w.ID, session.ExecRequest{Command: "touch /workspace/x && echo ok"}); err != nil || r.Stdout != "ok\n" {
		t.Errorf("writable workspace: %+v %v", r, err)
	}
}

// TestReadOnlyWorkspaceRace writes through a link that a confined job in
// the sandbox flips between /tmp/A and the read-only workspace as fast as
// it can: the daemon's check and the agent's write each resolve the link,
// so only the agent's check of the directory it writes in (by identity,
// through the handle it writes with) keeps every write out.
func TestReadOnlyWorkspaceRace(t *testing.T) {
	d := newWSDaemon(t, testutil.MiniImages(t), false)
	if !d.backend.Capabilities().Confinement {
		t.Skip("this kernel has no Landlock, so procbox reports no confinement")
	}
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Workspace: session.WorkspaceRequest{Mode: "readonly"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	p := "/v1/agents/sessions/" + s.ID
	if r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "mkdir /tmp/A && ln -s /tmp/A /tmp/d"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("setup: %+v %v", r, err)
	}
	var job session.Job
	if code := call(t, d.url, "POST", p+"/jobs", map[string]any{"command": "while :; do ln -sfn /workspace /tmp/d; ln -sfn /tmp/A /tmp/d; done"}, &job); code != 201 {
		t.Fatalf("start the flipping job: %d", code)
	}
	if job.Confinement == nil || !job.Confinement.Landlock {
		t.Errorf("the flipping job is not confined: %+v", job.Confinement)
	}
	codes := map[int]int{}
	for i := range 200 {
		code := call(t, d.url, "PUT", p+"/files/content", map[string]any{"path": fmt.Sprintf("/tmp/d/f%d", i), "content_base64": base64.StdEncoding.EncodeToString([]byte("x"))}, nil)
		codes[code]++
		if code != 200 && code != 403 {
			t.Errorf("PUT /tmp/d/f%d: %d, want 200 or 403", i, code)
		}
	}
	if code := call(t, d.url, "DELETE", p+"/jobs/"+job.ID, nil, nil); code != 200 {
		t.Errorf("kill the flipping job: %d", code)
	}
	t.Logf("PUT answers: %v", codes)
	r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "ls -A /workspace"})
	if err != nil || r.ExitCode != 0 || r.Stdout != "" {
		t.Errorf("the read-only workspace holds %q (%+v, %v)", r.Stdout, r, err)
	}
}

// TestReadOnlyWorkspaceGit runs git under the read-only policy in the
// debian image: reading verbs work, writing ones are refused.
func TestReadOnlyWorkspaceGit(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the debian image (built from the network once per machine)")
	}
	images, _ := testutil.DebianImages(t)
	d := newWSDaemon(t, images, false)
	if !d.backend.Capabilities().Confinement {
		t.Skip("this kernel has no Landlock, so procbox reports no confinement")
	}
	ctx := context.Background()
	// The workspace cannot get a repository (sandboxes are offline, so no
	// clone), so git reads are shown on one in /tmp, which the policy
	// leaves writable.
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{Image: testutil.DebianImageName}, Workspace: session.WorkspaceRequest{Mode: "readonly"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "git init -q /workspace"})
	if err != nil || r.ExitCode == 0 {
		t.Errorf("git init in the read-only workspace: %+v %v", r, err)
	}
	r, err = d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "cd /tmp && git init -q -b main repo && cd repo && echo one > a && git add a && git -c user.name=t -c user.email=t@x commit -qm one && git log --format=%s"})
	if err != nil || r.ExitCode != 0 || r.Stdout != "one\n" {
		t.Errorf("git outside the workspace: %+v %v", r, err)
	}
	p := "/v1/agents/sessions/" + s.ID + "/git"
	var lg workspace.GitResult
	if code := call(t, d.url, "GET", p+"/log?repo=/tmp/repo&n=1", nil, &lg); code != 200 || len(lg.Entries) != 1 {
		t.Errorf("git log under the policy: %d %+v", code, lg)
	}
	if code := call(t, d.url, "POST", p+"/commit", map[string]any{"message": "m"}, nil); code != 403 {
		t.Errorf("git commit in the workspace: %d, want 403", code)
	}
	// A repository outside the workspace can still be committed to.
	d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo two >> /tmp/repo/a"})
	if code := call(t, d.url, "POST", p+"/commit", map[string]any{"message": "two", "repo": "/tmp/repo"}, nil); code != 200 {
		t.Errorf("git commit outside the workspace: %d, want 200", code)
	}
}

// stateHas reports the files under dir whose bytes contain needle.
func stateHas(t *testing.T, dir, needle string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if de.IsDir() && de.Name() == "procbox" {
			return filepath.SkipDir // sandboxes' own files, not the daemon's records
		}
		if de.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(needle)) {
				found = append(found, p)
			}
		}
		return nil
	})
	return found
}

const secretURL = "https://user:s3cret@example.invalid/r.git"

// checkCloneFailure creates a session that clones secretURL (which cannot
// work: sandboxes are offline) and checks the note, the record, the
// ledger, the daemon's log and its state files.
func checkCloneFailure(t *testing.T, d *wsDaemon, image, wantNote string) {
	t.Helper()
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{Image: image}, Workspace: session.WorkspaceRequest{Git: secretURL}})
	if err != nil {
		t.Fatalf("a failed clone failed the create: %v", err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if s.Workspace.Git != "https://***@example.invalid/r.git" || !strings.Contains(s.Workspace.Note, wantNote) || s.State != session.StateRunning {
		t.Errorf("workspace: %+v, want the redacted URL and a note saying %q", s.Workspace, wantNote)
	}
	got, err := d.c.GetSession(ctx, s.ID)
	if err != nil || got.Workspace.Git != s.Workspace.Git || got.Workspace.Note != s.Workspace.Note {
		t.Errorf("stored: %+v %v", got, err)
	}
	raw, _ := json.Marshal(got)
	es, err := d.c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var clone *ledger.Entry
	for i, e := range es {
		if e.Kind == "workspace.clone" {
			clone = &es[i]
		}
		raw = append(raw, e.Data...)
	}
	if len(es) < 2 || es[0].Kind != "session.create" || clone == nil {
		t.Fatalf("ledger: %+v", es)
	}
	var data struct {
		URL        string `json:"url"`
		OK         *bool  `json:"ok"`
		DurationMS *int64 `json:"duration_ms"`
		Note       string `json:"note"`
	}
	json.Unmarshal(clone.Data, &data)
	if data.URL != "https://***@example.invalid/r.git" || data.OK == nil || *data.OK || data.DurationMS == nil || data.Note != s.Workspace.Note {
		t.Errorf("workspace.clone entry: %s", clone.Data)
	}
	// The baseline is the workspace after the clone: nothing changed since.
	if a, err := d.c.Artifacts(ctx, s.ID); err != nil || len(a.Added)+len(a.Modified)+len(a.Deleted) != 0 {
		t.Errorf("artifacts right after create: %+v %v", a, err)
	}
	for where, text := range map[string]string{"record and ledger": string(raw), "daemon log": d.log.String()} {
		if strings.Contains(text, "s3cret") {
			t.Errorf("the %s holds the credential", where)
		}
	}
	if files := stateHas(t, d.state, "s3cret"); len(files) != 0 {
		t.Errorf("state files hold the credential: %v", files)
	}
}

// TestWorkspaceCloneFailure: the mini image has no git, so the clone is a
// note, and the create succeeds.
func TestWorkspaceCloneFailure(t *testing.T) {
	d := newWSDaemon(t, testutil.MiniImages(t), false)
	checkCloneFailure(t, d, "", "git is not installed")
}

// TestWorkspaceCloneFailureOffline runs a real git in the debian image;
// the sandbox has no network, so the clone fails and git's own error
// becomes the note.
func TestWorkspaceCloneFailureOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the debian image (built from the network once per machine)")
	}
	images, _ := testutil.DebianImages(t)
	d := newWSDaemon(t, images, false)
	checkCloneFailure(t, d, testutil.DebianImageName, "git clone failed")
}

// TestWorkspaceRequireReady: a clone that fails with require_ready is a
// 502, and the sandbox is gone with nothing left behind.
func TestWorkspaceRequireReady(t *testing.T) {
	d := newWSDaemon(t, testutil.MiniImages(t), false)
	ctx := context.Background()
	// require_ready on a workspace that initializes is an ordinary create.
	ok, err := d.c.CreateSession(ctx, session.CreateRequest{Workspace: session.WorkspaceRequest{RequireReady: true}})
	if err != nil || ok.Workspace.Note != "" {
		t.Fatalf("require_ready without git: %+v %v", ok, err)
	}
	if err := d.c.DeleteSession(ctx, ok.ID); err != nil {
		t.Fatal(err)
	}
	before := len(d.backend.machines())

	_, err = d.c.CreateSession(ctx, session.CreateRequest{Workspace: session.WorkspaceRequest{Git: secretURL, RequireReady: true}})
	if status(err) != 502 || !strings.Contains(err.Error(), "git is not installed") || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("require_ready with a failed clone: %v, want 502 with the note", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the 502 quotes the credential: %v", err)
	}
	made := d.backend.machines()
	if len(made) != before+1 {
		t.Fatalf("%d sandboxes made for the failed create, want 1", len(made)-before)
	}
	mc := made[len(made)-1]
	if _, err := mc.Dial(ctx); err == nil {
		t.Error("the sandbox still answers")
	}
	if _, err := os.Stat(filepath.Join(d.state, "procbox", "machines", mc.ID())); !os.IsNotExist(err) {
		t.Errorf("machine directory left: %v", err)
	}
	for _, g := range []string{"/sys/fs/cgroup/paddock/" + mc.ID(), "/sys/fs/cgroup/*/paddock/" + mc.ID()} {
		if m, _ := filepath.Glob(g); len(m) != 0 {
			t.Errorf("cgroup left: %v", m)
		}
	}
	if raw, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(raw), mc.ID()) {
		t.Error("a mount of the sandbox is left")
	}
	if _, err := d.c.GetSession(ctx, mc.ID()); status(err) != 404 {
		t.Errorf("record of the removed sandbox: %v, want 404", err)
	}
	var n int
	if err := d.st.DB().QueryRow(`SELECT count(*) FROM ledger WHERE session = ?`, mc.ID()).Scan(&n); err != nil || n != 0 {
		t.Errorf("ledger entries of the removed sandbox: %d %v", n, err)
	}
	if ss, err := d.c.ListSessions(ctx); err != nil || len(ss) != 0 {
		t.Errorf("sessions after the 502: %v %v", ss, err)
	}
	if strings.Contains(d.log.String(), "s3cret") {
		t.Error("the daemon log holds the credential")
	}
	if files := stateHas(t, d.state, "s3cret"); len(files) != 0 {
		t.Errorf("state files hold the credential: %v", files)
	}
}

// TestOverlayWorkspace shows the image's /etc at /workspace copy-on-write:
// the agent (uid 1000) adds and deletes there, /etc is untouched, the
// artifacts list only the agent's changes, and the view survives a
// checkpoint, a restore and a fork.
func TestOverlayWorkspace(t *testing.T) {
	d := newWSDaemon(t, testutil.MiniImages(t), false)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Workspace: session.WorkspaceRequest{Mode: "overlay", Lower: "/etc"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if s.Workspace.Mode != session.ModeOverlay || s.Workspace.Lower != "/etc" || s.Workspace.BaselineFiles == 0 {
		t.Fatalf("overlay workspace record: %+v", s.Workspace)
	}
	run := func(id, line string) string {
		t.Helper()
		res, err := d.c.Exec(ctx, id, session.ExecRequest{Command: line})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%q: %+v %v", line, res, err)
		}
		return res.Stdout
	}
	if out := run(s.ID, "cmp /workspace/passwd /etc/passwd && pwd"); out != "/workspace\n" {
		t.Errorf("the workspace does not show /etc: %q", out)
	}
	run(s.ID, "echo mine > notes.txt && rm hosts")
	if out := run(s.ID, "test -e /etc/hosts && test ! -e /etc/notes.txt && echo lower-intact"); out != "lower-intact\n" {
		t.Errorf("the lower changed: %q", out)
	}
	a, err := d.c.Artifacts(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.Added, ",") != "notes.txt" || strings.Join(a.Deleted, ",") != "hosts" || len(a.Modified) != 0 {
		t.Errorf("artifacts of an overlay workspace: added %v deleted %v modified %v", a.Added, a.Deleted, a.Modified)
	}
	// Files through the API land in the view too.
	if err := d.c.Call(ctx, "PUT", s.ID, "/files/content", nil, map[string]any{"path": "/workspace/api.txt", "content_base64": "aGk="}, nil); err != nil {
		t.Fatal(err)
	}
	cur, _ := d.c.GetSession(ctx, s.ID)
	if _, err := d.c.Checkpoint(ctx, s.ID, cur.Revision, session.CheckpointRequest{Tag: "ov"}); err != nil {
		t.Fatal(err)
	}
	run(s.ID, "rm notes.txt api.txt")
	cur, _ = d.c.GetSession(ctx, s.ID)
	if _, err := d.c.Restore(ctx, s.ID, cur.Revision, "ov"); err != nil {
		t.Fatal(err)
	}
	want := "mine\nhi gone\n"
	check := "cat notes.txt; cat api.txt; echo; test -e hosts || echo gone"
	if out := run(s.ID, check); strings.ReplaceAll(out, "\nhi\n", "\nhi ") != want {
		t.Errorf("after restore: %q", out)
	}
	cur, _ = d.c.GetSession(ctx, s.ID)
	kids, err := d.c.Fork(ctx, s.ID, cur.Revision, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, kids[0].ID)
	if kids[0].Workspace.Mode != session.ModeOverlay || kids[0].Workspace.Lower != "/etc" {
		t.Errorf("fork child workspace: %+v", kids[0].Workspace)
	}
	if out := run(kids[0].ID, check); strings.ReplaceAll(out, "\nhi\n", "\nhi ") != want {
		t.Errorf("in a fork child: %q", out)
	}
}
