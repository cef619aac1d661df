package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// Issue 16, broken 1: the exec allow-list walked around through the files
// API. The files routes ran as root, so PUT files/content over a program
// the list names (or over /bin/sh) replaced it, and the next command ran
// the upload. These attacks run it against a real daemon and sandbox.

// refusedWith fails unless err is a 403 whose message holds want and
// whose body's code is the code that goes with it.
func refusedWith(t *testing.T, what string, err error, want string) {
	t.Helper()
	code := map[string]string{system: session.CodeSystemPath, list: session.CodeExecProgram, guestUser: session.CodePermissionDenied, agentProc: session.CodeAgentProcess}[want]
	var e *client.Error
	var body struct{ Code string }
	if !errors.As(err, &e) || e.Status != http.StatusForbidden || !strings.Contains(e.Message, want) ||
		json.Unmarshal(e.Body, &body) != nil || body.Code != code {
		t.Errorf("%s: %v, want 403 saying %q with code %q", what, err, want, code)
	}
}

// What the refusals say.
const (
	system    = "one of the image's system directories"
	list      = "execute allow-list"
	guestUser = "the guest user (uid 1000) may not write"
	agentProc = "the guest agent's own process"
)

// attackFiles are the files-API calls of the attack on one session: a
// write, an upload (open, one chunk, complete) and a delete of p.
type attackFiles struct {
	t   *testing.T
	c   *client.Client
	id  string
	ctx context.Context
}

var attackPayload = []byte("#!/bin/sh\necho PWNED\n")

func (a attackFiles) write(p string) error {
	return a.c.Call(a.ctx, "PUT", a.id, "/files/content", nil,
		workspace.FileWrite{Path: p, ContentBase64: base64.StdEncoding.EncodeToString(attackPayload), Mode: "0755"}, nil)
}

func (a attackFiles) upload(p string) error {
	a.t.Helper()
	var up workspace.Upload
	if err := a.c.Call(a.ctx, "POST", a.id, "/uploads", nil, workspace.UploadRequest{Path: p, Size: int64(len(attackPayload)), Mode: "0755"}, &up); err != nil {
		return err
	}
	if _, err := a.c.UploadChunk(a.ctx, a.id, up.ID, 0, attackPayload); err != nil {
		a.t.Fatalf("upload chunk: %v", err)
	}
	return a.c.Call(a.ctx, "POST", a.id, "/uploads/"+up.ID+"/complete", nil, nil, nil)
}

func (a attackFiles) remove(p string, recursive bool) error {
	q := url.Values{"path": {p}}
	if recursive {
		q.Set("recursive", "true")
	}
	return a.c.Call(a.ctx, "DELETE", a.id, "/files", q, nil, nil)
}

func (a attackFiles) exec(line string) *session.ExecResult {
	a.t.Helper()
	r, err := a.c.Exec(a.ctx, a.id, session.ExecRequest{Command: line})
	if err != nil || r.ExitCode != 0 {
		a.t.Fatalf("%q: %+v %v", line, r, err)
	}
	return r
}

// checksum is the sha256 of p in the sandbox, through files/range.
func (a attackFiles) checksum(p string) string {
	a.t.Helper()
	var r workspace.FileRange
	if err := a.c.Call(a.ctx, "GET", a.id, "/files/range", url.Values{"path": {p}, "length": {"1"}, "checksum": {"true"}}, nil, &r); err != nil || r.SHA256 == "" {
		a.t.Fatalf("checksum of %s: %v", p, err)
	}
	return r.SHA256
}

// TestAttackFilesOverExecAllowList: a session whose process policy is
// {allow: ["git *"], enforce: "exec"}. PUT files/content, an upload and
// DELETE over /usr/bin/git and /bin/sh, named directly or through links
// the sandbox planted with git itself (a symlink checked out of its own
// index: one to /usr/bin, one to git), are refused with 403 saying the
// system directories are never written; the write over the link to git
// replaces the link. Afterwards git and sh are byte for byte what they
// were and `git --version` runs the real git.
func TestAttackFilesOverExecAllowList(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the debian image (built from the network once per machine)")
	}
	testutil.DebianImages(t) // same cache directory as the mini image
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{Image: testutil.DebianImageName},
		Policy: &session.PolicyRequest{Process: &policy.ProcessRules{Allow: []string{"git *"}, Enforce: "exec"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if !s.Capabilities.ExecAllowlist {
		t.Fatalf("the execute list is not enforced: %+v", s.Capabilities)
	}
	a := attackFiles{t: t, c: d.c, id: s.ID, ctx: ctx}
	version := a.exec("git --version").Stdout
	gitSum, shSum := a.checksum("/usr/bin/git"), a.checksum("/bin/sh")

	// Links planted by the sandbox, with the one program it may run.
	for name, target := range map[string]string{"sys": "/usr/bin", "gitlink": "/usr/bin/git"} {
		if err := d.c.Call(ctx, "PUT", s.ID, "/files/content", nil, workspace.FileWrite{Path: "/workspace/" + name + ".target", ContentBase64: base64.StdEncoding.EncodeToString([]byte(target))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	a.exec("git init -q")
	for _, name := range []string{"sys", "gitlink"} {
		blob := strings.TrimSpace(a.exec("git hash-object -w " + name + ".target").Stdout)
		a.exec("git update-index --add --cacheinfo 120000," + blob + "," + name)
		a.exec("git checkout-index -f " + name)
	}
	var l struct {
		Self struct{ Type, Target string }
	}
	if err := d.c.Call(ctx, "GET", s.ID, "/files", url.Values{"path": {"/workspace/sys"}}, nil, &l); err != nil || l.Self.Type != "symlink" || l.Self.Target != "/usr/bin" {
		t.Fatalf("the planted link: %+v %v", l, err)
	}

	for _, p := range []string{"/usr/bin/git", "/bin/sh", "/bin/git", "/workspace/sys/git", "/workspace/sys/sh", "/usr/bin/new"} {
		refusedWith(t, "PUT "+p, a.write(p), system)
	}
	for _, p := range []string{"/usr/bin/git", "/workspace/sys/git"} {
		refusedWith(t, "upload over "+p, a.upload(p), system)
	}
	for _, p := range []string{"/usr/bin/git", "/bin/sh", "/workspace/sys/git", "/etc/passwd"} {
		refusedWith(t, "DELETE "+p, a.remove(p, false), system)
	}
	refusedWith(t, "DELETE /usr/bin recursively", a.remove("/usr/bin", true), system)
	// The final link is replaced, not followed.
	if err := a.write("/workspace/gitlink"); err != nil {
		t.Errorf("PUT over the planted link to git: %v", err)
	}

	if got := a.checksum("/usr/bin/git"); got != gitSum {
		t.Errorf("/usr/bin/git changed: sha256 %s, was %s", got, gitSum)
	}
	if got := a.checksum("/bin/sh"); got != shSum {
		t.Errorf("/bin/sh changed: sha256 %s, was %s", got, shSum)
	}
	if got := a.exec("git --version").Stdout; got != version || !strings.HasPrefix(got, "git version") || strings.Contains(got, "PWNED") {
		t.Errorf("git --version after the attack: %q, was %q", got, version)
	}
	// Ordinary writes go on working.
	for _, p := range []string{"/workspace/notes.txt", "/tmp/notes.txt", "/home/agent/notes.txt"} {
		if err := a.write(p); err != nil {
			t.Errorf("PUT %s: %v", p, err)
		}
	}
}

// TestAttackFilesOverExecProgramInWorkspace: a program of the execute
// allow-list that lives where the guest user may write (an overlay
// workspace showing the image's /usr/bin, so /workspace/cat is root's file
// in a directory of the guest's: permissions alone would let a rename
// replace it). The files API refuses to write, upload over or delete it,
// or the workspace that holds it (403 naming the allow-list), and the
// program still runs as it was; a file beside it is written.
func TestAttackFilesOverExecProgramInWorkspace(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{
		Workspace: session.WorkspaceRequest{Mode: "overlay", Lower: "/usr/bin"},
		Policy:    &session.PolicyRequest{Process: &policy.ProcessRules{Allow: []string{"/workspace/cat *"}, Enforce: "exec"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if len(s.Policy.ExecPrograms) != 1 || s.Policy.ExecPrograms[0] != "/workspace/cat" {
		t.Fatalf("execute list: %v", s.Policy.ExecPrograms)
	}
	a := attackFiles{t: t, c: d.c, id: s.ID, ctx: ctx}
	// GET files of the agent's own /proc entry (its descriptors name the
	// host's state paths): refused (links to it: guest/agent's unit test).
	for _, p := range []string{"/proc/self/fd", "/proc/thread-self/fd", "/proc/self/fd/0"} {
		var l json.RawMessage
		refusedWith(t, "GET files "+p, d.c.Call(ctx, "GET", s.ID, "/files", url.Values{"path": {p}}, nil, &l), agentProc)
	}
	sum := a.checksum("/workspace/cat")
	refusedWith(t, "PUT /workspace/cat", a.write("/workspace/cat"), list)
	refusedWith(t, "upload over /workspace/cat", a.upload("/workspace/cat"), list)
	refusedWith(t, "DELETE /workspace/cat", a.remove("/workspace/cat", false), list)
	if got := a.checksum("/workspace/cat"); got != sum {
		t.Errorf("/workspace/cat changed: sha256 %s, was %s", got, sum)
	}
	if out := a.exec("/workspace/cat /etc/passwd").Stdout; !strings.HasPrefix(out, "root:") || strings.Contains(out, "PWNED") {
		t.Errorf("/workspace/cat after the attack: %q", out)
	}
	if err := a.write("/workspace/notes.txt"); err != nil {
		t.Errorf("a file beside the program: %v", err)
	}
}

// TestAttackFilesSandboxWrite: the lower sandbox API's fs/write (one guest
// write up to 8 MiB, a guest upload beyond) over /usr/bin/cat and /bin/sh
// is refused with 403, and so is a write in root's home; cat and sh still
// run as they were; ordinary writes
// to the workspace, /tmp and the guest's home land and belong to the
// guest user (uid 1000).
func TestAttackFilesSandboxWrite(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	sb, err := d.c.CreateSandbox(ctx, sandboxes.SandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSandbox(ctx, sb.ID)
	run := func(line string) string {
		t.Helper()
		r, err := d.c.SandboxProcess(ctx, sb.ID, sandboxes.ProcessRequest{Command: line})
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("%q: %+v %v", line, r, err)
		}
		return r.Stdout
	}
	sums := run("sha256sum /usr/bin/cat /usr/bin/sh")
	big := append(bytes.Repeat([]byte("#"), 9<<20), attackPayload...)
	for _, p := range []string{"/usr/bin/cat", "/bin/sh"} {
		for _, data := range [][]byte{attackPayload, big} {
			_, err := d.c.SandboxWriteFile(ctx, sb.ID, p, data, "0755")
			refusedWith(t, "fs/write "+p, err, system)
		}
	}
	// Outside the system directories the guest user's rights hold: root's
	// home is not the guest's.
	_, err = d.c.SandboxWriteFile(ctx, sb.ID, "/root/.profile", attackPayload, "")
	refusedWith(t, "fs/write /root/.profile", err, guestUser)
	// The files routes run in a thread of the agent: its own /proc entry
	// would list its descriptors (the host's state paths). Refused as
	// given and through /proc/self.
	for _, p := range []string{"/proc/self/environ", "/proc/thread-self/environ", "/proc/self/fd/0"} {
		_, _, err := d.c.SandboxReadFile(ctx, sb.ID, p)
		refusedWith(t, "fs/read "+p, err, agentProc)
	}
	if got := run("sha256sum /usr/bin/cat /usr/bin/sh"); got != sums {
		t.Errorf("cat or sh changed:\n%s\nwas\n%s", got, sums)
	}
	if out := run("echo real | cat"); out != "real\n" {
		t.Errorf("cat after the attack: %q", out)
	}
	for _, p := range []string{"/workspace/a/b.txt", "/tmp/b.txt", "/home/agent/b.txt"} {
		if _, err := d.c.SandboxWriteFile(ctx, sb.ID, p, []byte("ok"), ""); err != nil {
			t.Errorf("fs/write %s: %v", p, err)
		}
	}
	if _, err := d.c.SandboxWriteFile(ctx, sb.ID, "/workspace/big.bin", big, ""); err != nil {
		t.Errorf("fs/write of 9 MiB into the workspace: %v", err)
	}
	if got := run("stat -c %u:%g /workspace/a /workspace/a/b.txt /tmp/b.txt /home/agent/b.txt /workspace/big.bin"); got != strings.Repeat("1000:1000\n", 5) {
		t.Errorf("owners: %q, want the guest user's", got)
	}
}
