package agent_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
)

// wantCode fails unless err is an agent error with the given status and
// code.
func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Status != status || e.Code != code {
		t.Errorf("got %v, want %d %s", err, status, code)
	}
}

// mustFile fails unless rel (in the agent's root) holds content.
func mustFile(t *testing.T, a *testAgent, rel, content string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(a.root, rel))
	if err != nil || string(b) != content {
		t.Errorf("%s is %q (%v), want %q", rel, b, err, content)
	}
}

// systemTree lays out a merged-/usr image in a fresh agent's root:
// /usr/bin/git and /usr/bin/sh, /bin -> usr/bin, /etc/passwd,
// /.paddock/paddock-guest, and a workspace holding links the sandbox
// planted into /usr/bin (a directory link and a link to git).
func systemTree(t *testing.T, mod func(*agent.Config)) *testAgent {
	t.Helper()
	a := startAgent(t, mod)
	for _, d := range []string{"usr/bin", "etc", ".paddock", "workspace", "tmp"} {
		if err := os.MkdirAll(filepath.Join(a.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for rel, content := range map[string]string{"usr/bin/git": "REAL GIT", "usr/bin/sh": "REAL SH", "etc/passwd": "root:x:0:0", ".paddock/paddock-guest": "AGENT"} {
		if err := os.WriteFile(filepath.Join(a.root, rel), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"bin": "usr/bin", "workspace/sys": "/usr/bin", "workspace/rel": "../usr", "workspace/gitlink": "/usr/bin/git"} {
		if err := os.Symlink(target, filepath.Join(a.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// checkSystemUntouched fails if anything of systemTree's system files
// changed.
func checkSystemUntouched(t *testing.T, a *testAgent) {
	t.Helper()
	mustFile(t, a, "usr/bin/git", "REAL GIT")
	mustFile(t, a, "usr/bin/sh", "REAL SH")
	mustFile(t, a, "etc/passwd", "root:x:0:0")
	mustFile(t, a, ".paddock/paddock-guest", "AGENT")
	if got := entries(t, a, "usr/bin"); !slices.Equal(got, []string{"git", "sh"}) {
		t.Errorf("/usr/bin holds %q", got)
	}
	if target, err := os.Readlink(filepath.Join(a.root, "bin")); err != nil || target != "usr/bin" {
		t.Errorf("/bin is %q, %v", target, err)
	}
}

// upload sends content as upload id and completes it to p.
func upload(t *testing.T, a *testAgent, id, p, content string, exec []string) error {
	t.Helper()
	ctx := testCtx(t)
	if _, err := a.c.UploadPart(ctx, id, 0, []byte(content)); err != nil {
		t.Fatal(err)
	}
	_, err := a.c.CompleteUpload(ctx, id, api.UploadComplete{Path: p, Size: int64(len(content)), Mode: "0755", Exec: exec})
	return err
}

// TestSystemDirsAreNeverWritten: writes, deletes and uploads under the
// image's system directories are refused (403 system_path) whoever owns
// them, named directly, through /bin (a link into /usr), through links
// the sandbox planted in the workspace, and as new parents; the write over
// a final link replaces the link, never what it points at.
func TestSystemDirsAreNeverWritten(t *testing.T) {
	t.Parallel()
	a := systemTree(t, nil)
	ctx := testCtx(t)
	payload := []byte("#!/bin/sh\necho pwned\n")
	for _, p := range []string{
		"/usr/bin/git", "/bin/sh", "/bin/git", "/bin", "/usr/bin/new", "/usr/local/bin/new",
		"/workspace/sys/git", "/workspace/sys/new", "/workspace/rel/bin/git",
		"/etc/passwd", "/etc/ld.so.preload", "/.paddock/paddock-guest", "/lib64/ld-linux-x86-64.so.2",
		"/proc/sys/kernel/core_pattern",
	} {
		_, err := a.c.WriteFile(ctx, api.FileContent{Path: p, Content: payload, Mode: "0755"})
		wantCode(t, err, http.StatusForbidden, api.CodeSystemPath)
	}
	for _, d := range []struct {
		path      string
		recursive bool
	}{{"/usr/bin/git", false}, {"/bin/sh", false}, {"/usr/bin", true}, {"/workspace/sys/git", false}, {"/workspace/rel/bin", true}, {"/etc/passwd", false}} {
		err := a.c.DeleteFile(ctx, d.path, d.recursive)
		wantCode(t, err, http.StatusForbidden, api.CodeSystemPath)
	}
	for i, p := range []string{"/usr/bin/git", "/workspace/sys/git", "/bin/sh"} {
		wantCode(t, upload(t, a, fmt.Sprintf("sys%d", i), p, "pwned", nil), http.StatusForbidden, api.CodeSystemPath)
	}
	for _, p := range []string{"/usr/src/app", "/workspace/sys/app", "/etc"} {
		_, err := a.c.SetupWorkspace(ctx, p)
		wantCode(t, err, http.StatusForbidden, api.CodeSystemPath)
	}
	checkSystemUntouched(t, a)
	// The message names the directory as the caller would.
	for p, want := range map[string]string{
		"/usr/bin/git":       "/usr/bin/git is under /usr, one of the image's system directories",
		"/bin/sh":            "/bin/sh is under /bin, one of",
		"/workspace/sys/git": "/workspace/sys/git leads through links under /usr, one of",
	} {
		_, err := a.c.WriteFile(ctx, api.FileContent{Path: p, Content: payload})
		var e *client.Error
		if !errors.As(err, &e) || !strings.Contains(e.Message, want) || !strings.Contains(e.Message, "write in the workspace, /tmp, /var/tmp or the guest's home") {
			t.Errorf("write %s: %v, want a message saying %q and what is allowed", p, err, want)
		}
	}

	// The write over a planted link to git replaces the link in the
	// workspace: git stays as it was.
	if _, err := a.c.WriteFile(ctx, api.FileContent{Path: "/workspace/gitlink", Content: payload, Mode: "0755"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(a.root, "workspace/gitlink")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("workspace/gitlink after the write: %v %v", fi, err)
	}
	// Ordinary writes, uploads and deletes elsewhere go through.
	for _, p := range []string{"/workspace/a/b/file", "/tmp/f", "/srv/data/f"} {
		if _, err := a.c.WriteFile(ctx, api.FileContent{Path: p, Content: []byte("ok")}); err != nil {
			t.Errorf("write %s: %v", p, err)
		}
	}
	if err := upload(t, a, "ok", "/workspace/up", "uploaded", nil); err != nil {
		t.Errorf("upload into the workspace: %v", err)
	}
	if err := a.c.DeleteFile(ctx, "/workspace/a", true); err != nil {
		t.Errorf("delete in the workspace: %v", err)
	}
	if fi, err := a.c.SetupWorkspace(ctx, "/srv/app"); err != nil || fi.Type != api.TypeDir {
		t.Errorf("workspace setup under /srv: %+v %v", fi, err)
	}
	checkSystemUntouched(t, a)
}

// execTree is systemTree with a program outside the system directories,
// /workspace/bin/tool, reached as /home/agent/bin/tool through a
// directory link.
func execTree(t *testing.T) *testAgent {
	t.Helper()
	a := systemTree(t, nil)
	if err := os.MkdirAll(filepath.Join(a.root, "workspace/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.root, "workspace/bin/tool"), []byte("REAL TOOL"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(a.root, "home/agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/workspace/bin", filepath.Join(a.root, "home/agent/bin")); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestExecProgramsAreNeverWritten: with the session's execute allow-list
// sent as Exec, the program (named through a link), the file it resolves
// to, the link on the way and the directories holding it cannot be
// written, uploaded over or removed (403 exec_program), even once the
// program is gone; beside it the workspace stays writable.
func TestExecProgramsAreNeverWritten(t *testing.T) {
	t.Parallel()
	a := execTree(t)
	ctx := testCtx(t)
	exec := []string{"/home/agent/bin/tool", "/usr/bin/git"}
	try := func() {
		t.Helper()
		for _, p := range []string{"/workspace/bin/tool", "/home/agent/bin/tool", "/home/agent/bin", "/workspace/bin"} {
			_, err := a.c.WriteFile(ctx, api.FileContent{Path: p, Content: []byte("pwned"), Mode: "0755", Exec: exec})
			wantCode(t, err, http.StatusForbidden, api.CodeExecProgram)
		}
		for _, d := range []struct {
			path      string
			recursive bool
		}{{"/workspace/bin/tool", false}, {"/home/agent/bin/tool", false}, {"/home/agent/bin", false}, {"/workspace/bin", true}, {"/home/agent", true}} {
			err := a.c.DeleteFileGuarded(ctx, d.path, d.recursive, nil, exec)
			wantCode(t, err, http.StatusForbidden, api.CodeExecProgram)
		}
		wantCode(t, upload(t, a, "tool"+randomSuffix(), "/workspace/bin/tool", "pwned", exec), http.StatusForbidden, api.CodeExecProgram)
	}
	try()
	mustFile(t, a, "workspace/bin/tool", "REAL TOOL")
	// Gone (a command removed it): still not to be made again.
	if err := os.Remove(filepath.Join(a.root, "workspace/bin/tool")); err != nil {
		t.Fatal(err)
	}
	try()
	if _, err := os.Lstat(filepath.Join(a.root, "workspace/bin/tool")); !os.IsNotExist(err) {
		t.Errorf("the program was made again: %v", err)
	}
	if _, err := a.c.WriteFile(ctx, api.FileContent{Path: "/workspace/bin/other", Content: []byte("ok"), Exec: exec}); err != nil {
		t.Errorf("a file beside the program: %v", err)
	}
	if err := a.c.DeleteFileGuarded(ctx, "/workspace/bin/other", false, nil, exec); err != nil {
		t.Errorf("delete beside the program: %v", err)
	}
	for _, bad := range [][]string{{"relative"}, {"/a/../b"}, {""}, slices.Repeat([]string{"/x"}, api.MaxExecList+1)} {
		_, err := a.c.WriteFile(ctx, api.FileContent{Path: "/tmp/f", Exec: bad})
		wantStatus(t, err, http.StatusBadRequest)
	}
	checkSystemUntouched(t, a)
}

var suffix struct {
	sync.Mutex
	n int
}

func randomSuffix() string {
	suffix.Lock()
	defer suffix.Unlock()
	suffix.n++
	return fmt.Sprint(suffix.n)
}

// TestExecProgramRace swaps /workspace/d between a real directory and a
// link to the program's directory beside it (renameat2 RENAME_EXCHANGE,
// as fast as it goes) while writes of /workspace/d/tool go through it: the path is checked
// while d is a directory, and the agent's open of d may then follow the
// link. Each write lands in the real directory or is refused, and the
// program never changes: the directory the write goes through is
// compared by identity with the program's.
func TestExecProgramRace(t *testing.T) {
	t.Parallel()
	a := execTree(t)
	ctx := testCtx(t)
	d, link := filepath.Join(a.root, "workspace/d"), filepath.Join(a.root, "workspace/l")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	// Relative and downward: the agent's open of d follows it.
	if err := os.Symlink("bin", link); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("renameat2 RENAME_EXCHANGE: %v", err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
		}
	}()
	var ok, refused int
	for range 400 {
		_, err := a.c.WriteFile(ctx, api.FileContent{Path: "/workspace/d/tool", Content: []byte("pwned"), Exec: []string{"/workspace/bin/tool"}})
		if err == nil {
			ok++
		} else {
			// The swap also makes some opens fail on the way (ELOOP,
			// EINVAL from a link that is a directory again): refusals.
			refused++
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d writes landed in the real directory, %d refused", ok, refused)
	mustFile(t, a, "workspace/bin/tool", "REAL TOOL")
}

// openForGuest lets uid 65534 reach the agent's root: t.TempDir makes its
// directories 0700.
func openForGuest(t *testing.T, a *testAgent) {
	t.Helper()
	for _, d := range []string{filepath.Dir(a.dir), a.dir, a.root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFilesActAsTheGuestUser: with a guest user, every files route acts
// with its rights, so a root-owned program cannot be replaced or removed
// (403 permission_denied) even outside the system directories and even
// through a link the sandbox planted, a root-only file cannot be read,
// and what the files API makes belongs to the guest user. The threads
// that did it are gone afterwards: none of the agent's threads keeps the
// lowered identity, and none lost root's.
func TestFilesActAsTheGuestUser(t *testing.T) {
	requiresRoot(t)
	a := systemTree(t, func(c *agent.Config) { c.GuestUser = "65534:65533" })
	openForGuest(t, a)
	ctx := testCtx(t)
	for _, d := range []string{"opt/tool/bin", "ws"} {
		if err := os.MkdirAll(filepath.Join(a.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(a.root, "opt/tool/bin/prog"), []byte("REAL PROG"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.root, "opt/secret"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(a.root, "ws"), 65534, 65533); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(a.root, "tmp"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/opt/tool/bin", filepath.Join(a.root, "ws/planted")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/opt/tool/bin/prog", "/ws/planted/prog", "/opt/new", "/newdir/f"} {
		_, err := a.c.WriteFile(ctx, api.FileContent{Path: p, Content: []byte("pwned"), Mode: "0755"})
		wantCode(t, err, http.StatusForbidden, api.CodePermission)
	}
	wantCode(t, a.c.DeleteFile(ctx, "/opt/tool/bin/prog", false), http.StatusForbidden, api.CodePermission)
	wantCode(t, a.c.DeleteFile(ctx, "/ws/planted/prog", false), http.StatusForbidden, api.CodePermission)
	wantCode(t, upload(t, a, "prog", "/ws/planted/prog", "pwned", nil), http.StatusForbidden, api.CodePermission)
	_, err := a.c.ReadFile(ctx, "/opt/secret")
	wantCode(t, err, http.StatusForbidden, api.CodePermission)
	_, err = a.c.ReadRange(ctx, "/opt/secret", 0, 10, false)
	wantCode(t, err, http.StatusForbidden, api.CodePermission)
	mustFile(t, a, "opt/tool/bin/prog", "REAL PROG")
	if got, err := a.c.ReadFile(ctx, "/opt/tool/bin/prog"); err != nil || string(got.Content) != "REAL PROG" {
		t.Errorf("read a world-readable file: %v", err)
	}

	// What the guest may write, it writes, and owns.
	if _, err := a.c.WriteFile(ctx, api.FileContent{Path: "/ws/new/dir/f", Content: []byte("mine")}); err != nil {
		t.Fatal(err)
	}
	if err := upload(t, a, "mine", "/ws/up", "uploaded", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.WriteFile(ctx, api.FileContent{Path: "/tmp/t", Content: []byte("mine")}); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"ws/new", "ws/new/dir", "ws/new/dir/f", "ws/up", "tmp/t"} {
		fi, err := os.Stat(filepath.Join(a.root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65533 {
			t.Errorf("%s owned by %d:%d, want the guest user", rel, st.Uid, st.Gid)
		}
	}
	// The workspace setup (the host's call at create) runs as root: it
	// makes /srv/app in the root-owned root, handed to the guest user.
	if _, err := a.c.SetupWorkspace(ctx, "/srv/app"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(a.root, "srv/app")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Errorf("srv/app: %v", err)
	}
	if _, err := a.c.WriteFile(ctx, api.FileContent{Path: "/srv/app/f", Content: []byte("mine")}); err != nil {
		t.Errorf("write in the set-up workspace: %v", err)
	}
	checkSystemUntouched(t, a)
	checkThreadsRoot(t)
}

// checkThreadsRoot fails when a thread of this process (the test runs
// the agent in-process) has a file-system identity other than root's, or
// fewer capabilities than the process: the threads lowered for file
// requests must end with them. Thread exit follows the request's answer
// by a moment, so it looks for up to two seconds.
func checkThreadsRoot(t *testing.T) {
	t.Helper()
	var bad []string
	for range 40 {
		bad = bad[:0]
		tasks, err := filepath.Glob("/proc/self/task/*/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range tasks {
			f, err := os.Open(st)
			if err != nil {
				continue // ended meanwhile
			}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				line := sc.Text()
				if (strings.HasPrefix(line, "Uid:") || strings.HasPrefix(line, "Gid:")) && strings.Join(strings.Fields(line)[1:], " ") != "0 0 0 0" {
					bad = append(bad, st+": "+line)
				}
				if strings.HasPrefix(line, "CapEff:") && strings.Fields(line)[1] == "0000000000000000" {
					bad = append(bad, st+": "+line)
				}
			}
			f.Close()
		}
		if len(bad) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("threads with a lowered identity remain: %q", bad)
}

// TestAgentProcRefused: the files routes run in a thread of the agent's
// own process, so /proc/self/fd would list the agent's descriptors (host
// state paths). Every way to name the agent's /proc entry is refused with
// agent_process, a link to it too; another process's entry is not.
func TestAgentProcRefused(t *testing.T) {
	a := startAgent(t, nil)
	ctx := context.Background()
	if err := os.Symlink("/proc/self", filepath.Join(a.root, "me")); err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	tids, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var tid string
	for _, e := range tids {
		if e.Name() != strconv.Itoa(pid) {
			tid = e.Name()
		}
	}
	if tid == "" {
		t.Fatal("the test process has one thread only")
	}
	for _, p := range []string{"/proc/self", "/proc/self/fd", "/proc/self/fd/3", "/proc/thread-self/environ",
		fmt.Sprintf("/proc/%d/fd", pid), fmt.Sprintf("/proc/%d/task/%s/fd", pid, tid), "/proc/" + tid + "/maps", "/me/fd", "/me"} {
		if p != "/me" { // listing a link is its own stat: not followed
			_, err := a.c.List(ctx, p)
			wantCode(t, err, http.StatusForbidden, api.CodeAgentProcess)
		}
		_, err = a.c.ReadFile(ctx, p)
		wantCode(t, err, http.StatusForbidden, api.CodeAgentProcess)
	}
	// Not the agent: refused for its own reasons (here, not there), never
	// as the agent's.
	for _, p := range []string{"/proc/1/fd", "/proc", "/procself"} {
		_, err := a.c.List(ctx, p)
		var e *client.Error
		if errors.As(err, &e) && e.Code == api.CodeAgentProcess {
			t.Errorf("list %s: %v, refused as the agent's own", p, err)
		}
	}
}
