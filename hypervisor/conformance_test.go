package hypervisor_test

// The conformance suite: every registered backend runs every test here,
// narrowed by PADDOCK_BACKENDS=name,name. Tests are named TestConformance*
// so `go test -run Conformance` runs exactly this.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	_ "paddock.dev/paddock/hypervisor/all"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
)

type backendEnv struct {
	name     string
	b        hypervisor.Backend
	stateDir string
}

// forEachBackend runs fn as a subtest per registered backend that
// PADDOCK_BACKENDS selects; a backend that cannot run here is skipped with
// its reason.
func forEachBackend(t *testing.T, fn func(t *testing.T, e backendEnv)) {
	t.Helper()
	want := map[string]bool{}
	if v := os.Getenv("PADDOCK_BACKENDS"); v != "" {
		for _, n := range strings.Split(v, ",") {
			want[strings.TrimSpace(n)] = true
		}
	}
	for _, name := range hypervisor.List() {
		if len(want) > 0 && !want[name] {
			continue
		}
		t.Run(name, func(t *testing.T) {
			testutil.RequiresRoot(t)
			ctor, err := hypervisor.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			stateDir := t.TempDir()
			b, err := ctor(hypervisor.Config{
				StateDir:    stateDir,
				GuestBinary: testutil.GuestBinary(t),
				ImagesDir:   testutil.MiniImages(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			if cl, ok := b.(io.Closer); ok {
				t.Cleanup(func() {
					if err := cl.Close(); err != nil {
						t.Errorf("close backend: %v", err)
					}
				})
			}
			if c := b.Capabilities(); !c.Available {
				t.Skipf("backend %s cannot run here: %s", name, c.Reason)
			}
			fn(t, backendEnv{name: name, b: b, stateDir: stateDir})
		})
	}
}

func (e backendEnv) create(t *testing.T, spec hypervisor.MachineSpec) (hypervisor.Machine, *client.Client) {
	t.Helper()
	if spec.Image == "" && spec.From == nil {
		spec.Image = testutil.MiniImageName
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := e.b.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Stop(context.Background()); err != nil {
			t.Errorf("stop %s: %v", m.ID(), err)
		}
	})
	return m, clientFor(m)
}

func clientFor(m hypervisor.Machine) *client.Client {
	return client.New(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) })
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func sh(t *testing.T, c *client.Client, line string) *api.ExecResult {
	t.Helper()
	res, err := c.Exec(ctxT(t), api.ExecRequest{Command: api.Command{Shell: line, TimeoutSeconds: 60}})
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	return res
}

func mustOK(t *testing.T, c *client.Client, line string) string {
	t.Helper()
	res := sh(t, c, line)
	if res.ExitCode != 0 {
		t.Fatalf("%q: exit %d, stdout %q, stderr %q", line, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

func TestConformanceCreateExec(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		m, c := e.create(t, hypervisor.MachineSpec{Hostname: "conf-host"})
		h, err := c.Health(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if h.Hostname != "conf-host" {
			t.Errorf("health hostname = %q, want conf-host", h.Hostname)
		}
		if got := strings.TrimSpace(mustOK(t, c, "hostname")); got != "conf-host" {
			t.Errorf("hostname = %q", got)
		}
		// Commands run as the unprivileged guest user.
		if got := strings.TrimSpace(mustOK(t, c, "id -u")); got != "1000" {
			t.Errorf("id -u = %q, want 1000", got)
		}
		// argv form: no shell interpretation.
		res, err := c.Exec(ctxT(t), api.ExecRequest{Command: api.Command{Argv: []string{"echo", "a;b", "$HOME"}}})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Stdout) != "a;b $HOME\n" {
			t.Errorf("argv stdout = %q", res.Stdout)
		}
		// stdin, env and cwd.
		res, err = c.Exec(ctxT(t), api.ExecRequest{
			Command: api.Command{Shell: `pwd; echo "$GREETING"; cat`, Cwd: "/tmp", Env: []string{"GREETING=hi"}},
			Stdin:   []byte("from stdin"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := "/tmp\nhi\nfrom stdin"; string(res.Stdout) != want {
			t.Errorf("stdout = %q, want %q", res.Stdout, want)
		}
		// The sandbox has its own PID namespace: the agent is PID 1.
		// (a VM's PID 1 is the kernel's first process, paddock-guest run
		// as the initramfs's /init, which stays PID 1 after the root
		// moves to the disk).
		pid1 := mustOK(t, c, "tr '\\0' ' ' < /proc/1/cmdline")
		if !strings.HasPrefix(pid1, "paddock-guest sandbox-init") && !(e.name == "qemu" && pid1 == "/init ") {
			t.Errorf("PID 1 in the sandbox is %q, want the guest agent", pid1)
		}
		if m.ID() == "" {
			t.Error("machine has no id")
		}
		// Hardening every command gets, confined or not: no way to gain
		// privileges, a bounding set without sys_admin and friends,
		// nosuid/nodev root, read-only /dev, masked /proc files.
		status := mustOK(t, c, "grep -E '^(NoNewPrivs|CapBnd|CapEff|Seccomp)' /proc/self/status")
		if !strings.Contains(status, "NoNewPrivs:\t1") || !strings.Contains(status, "CapEff:\t0000000000000000") || !strings.Contains(status, "Seccomp:\t2") {
			t.Errorf("command status: %q", status)
		}
		if bnd := status[strings.Index(status, "CapBnd:")+8:]; strings.HasPrefix(bnd, "000001ff") || strings.HasPrefix(bnd, "0000003f") {
			t.Errorf("bounding set is full: %q", bnd)
		}
		rootMount := mustOK(t, c, "grep ' / ' /proc/self/mounts")
		if !strings.Contains(rootMount, "nosuid") || !strings.Contains(rootMount, "nodev") {
			t.Errorf("root mount lacks nosuid,nodev: %q", rootMount)
		}
		if out := mustOK(t, c, "wc -c < /proc/kcore 2>/dev/null || echo 0; grep ' /dev ' /proc/self/mounts; grep ' /proc/sys ' /proc/self/mounts"); !strings.HasPrefix(out, "0\n") || !strings.Contains(out, "/dev tmpfs ro,") || !strings.Contains(out, "/proc/sys proc ro,") {
			t.Errorf("/proc and /dev hardening: %q", out)
		}
		// Commands inherit no descriptor of the agent's: not the guest
		// binary's memfd, the agent socket or the console log.
		fds := mustOK(t, c, "ls -l /proc/$$/fd/")
		for _, leak := range []string{"memfd", "socket:", "console.log"} {
			if strings.Contains(fds, leak) {
				t.Errorf("a command inherited a %s descriptor:\n%s", leak, fds)
			}
		}
	})
}

func TestConformanceExitCodes(t *testing.T) { forEachBackend(t, conformanceExitCodes) }

func conformanceExitCodes(t *testing.T, e backendEnv) {
	_, c := e.create(t, hypervisor.MachineSpec{})
	for _, tc := range []struct {
		line   string
		code   int
		signal string
	}{
		{"true", 0, ""},
		{"exit 3", 3, ""},
		{"exit 255", 255, ""},
		{"kill -KILL $$", -1, "KILL"},
		{"kill -TERM $$", -1, "TERM"},
		{"no-such-command-here", 127, ""},
	} {
		res := sh(t, c, tc.line)
		if res.ExitCode != tc.code || res.Signal != tc.signal {
			t.Errorf("%q: exit %d signal %q, want %d %q", tc.line, res.ExitCode, res.Signal, tc.code, tc.signal)
		}
	}
}

func TestConformanceTimeoutKillsTree(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		_, c := e.create(t, hypervisor.MachineSpec{})
		start := time.Now()
		res, err := c.Exec(ctxT(t), api.ExecRequest{Command: api.Command{
			Shell: "sleep 300 & sleep 301 & echo started; wait", TimeoutSeconds: 1,
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut {
			t.Errorf("timed_out = false: %+v", res)
		}
		if d := time.Since(start); d > 6*time.Second {
			t.Errorf("timeout took %s", d)
		}
		// Nothing of the tree survives.
		out := mustOK(t, c, "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; done")
		if strings.Contains(out, "sleep 30") {
			t.Errorf("a sleep survived the timeout:\n%s", out)
		}
		// Returns soon after the command exits even when a background
		// child holds the pipes.
		start = time.Now()
		res = sh(t, c, "sleep 60 & echo quick")
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("exec with a background child took %s", d)
		}
		if !strings.Contains(string(res.Stdout), "quick") || res.ExitCode != 0 {
			t.Errorf("got %+v", res)
		}
	})
}

func TestConformanceOutputCap(t *testing.T) { forEachBackend(t, conformanceOutputCap) }

func conformanceOutputCap(t *testing.T, e backendEnv) {
	_, c := e.create(t, hypervisor.MachineSpec{})
	res, err := c.Exec(ctxT(t), api.ExecRequest{Command: api.Command{
		Shell: "head -c 3000000 /dev/zero; head -c 100 /dev/zero >&2; exit 4", MaxOutputBytes: 1 << 20,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.StdoutTruncated || res.StdoutDropped != 3000000-(1<<20) {
		t.Errorf("truncated %v dropped %d, want true %d", res.StdoutTruncated, res.StdoutDropped, 3000000-(1<<20))
	}
	if !bytes.HasSuffix(res.Stdout, []byte(api.TruncationMarker)) {
		t.Errorf("no truncation marker at the end of stdout")
	}
	if res.StderrTruncated || len(res.Stderr) != 100 {
		t.Errorf("stderr: truncated %v len %d", res.StderrTruncated, len(res.Stderr))
	}
	if res.ExitCode != 4 {
		t.Errorf("exit %d, want 4 (draining must keep the real status)", res.ExitCode)
	}
}

func TestConformanceJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		_, c := e.create(t, hypervisor.MachineSpec{})
		ctx := ctxT(t)
		// stdin with EOF: cat echoes and exits 0 only once stdin closes.
		j, err := c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "cat; echo done >&2"}, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteStdin(ctx, j.ID, api.JobStdin{Data: []byte("line one\n")}); err != nil {
			t.Fatal(err)
		}
		r, err := c.ReadJob(ctx, j.ID, client.ReadOptions{Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if r.State != api.JobRunning || string(r.Output) != "line one\n" {
			t.Fatalf("before EOF: state %s output %q", r.State, r.Output)
		}
		if _, err := c.WriteStdin(ctx, j.ID, api.JobStdin{Close: true}); err != nil {
			t.Fatal(err)
		}
		r = waitJob(t, c, j.ID)
		if r.State != api.JobExited || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Errorf("after EOF: %+v", r.Job)
		}
		if _, err := c.WriteStdin(ctx, j.ID, api.JobStdin{Data: []byte("late")}); !client.IsStatus(err, 409) {
			t.Errorf("stdin after exit: %v, want 409", err)
		}
		// kill signals the whole tree.
		j, err = c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "sleep 200 & sleep 201"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SignalJob(ctx, j.ID, "KILL"); err != nil {
			t.Fatal(err)
		}
		r = waitJob(t, c, j.ID)
		if r.State != api.JobKilled {
			t.Errorf("after kill: state %s", r.State)
		}
		// Killed processes may take a moment to be reaped by init.
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			out := mustOK(t, c, "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; done")
			if !strings.Contains(out, "sleep 20") {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("a sleep survived the kill:\n%s", out)
				break
			}
		}
		// timeout.
		j, err = c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "sleep 100", TimeoutSeconds: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if r = waitJob(t, c, j.ID); r.State != api.JobTimedOut {
			t.Errorf("timeout: state %s", r.State)
		}
		// separate streams and the real exit code past the cap.
		j, err = c.StartJob(ctx, api.JobRequest{Command: api.Command{
			Shell: "head -c 500000 /dev/zero; echo err >&2; exit 7", MaxOutputBytes: 1000,
		}})
		if err != nil {
			t.Fatal(err)
		}
		r = waitJob(t, c, j.ID)
		if r.ExitCode == nil || *r.ExitCode != 7 || r.DroppedBytes != 499000 {
			t.Errorf("drain past cap: exit %v dropped %d", ptrStr(r.ExitCode), r.DroppedBytes)
		}
		r, err = c.ReadJob(ctx, j.ID, client.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Output) != 1000 || string(r.Stderr) != "err\n" {
			t.Errorf("streams: stdout %d bytes, stderr %q", len(r.Output), r.Stderr)
		}
	})
}

func waitJob(t *testing.T, c *client.Client, id string) *api.JobRead {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var off, eoff int64
	for time.Now().Before(deadline) {
		r, err := c.ReadJob(ctxT(t), id, client.ReadOptions{Offset: off, StderrOffset: eoff, Wait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		off, eoff = r.NextOffset, r.StderrNextOffset
		// Ended, and both streams drained to their end: counts are final.
		if r.State != api.JobRunning && r.EOF {
			return r
		}
	}
	t.Fatalf("job %s still running after 30s", id)
	return nil
}

func TestConformanceFiles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		_, c := e.create(t, hypervisor.MachineSpec{})
		ctx := ctxT(t)
		data := make([]byte, 1<<20)
		rand.Read(data)
		if _, err := c.WriteFile(ctx, api.FileContent{Path: "/workspace/new dir/sub/blob.bin", Content: data, Mode: "0640"}); err != nil {
			t.Fatal(err)
		}
		got, err := c.ReadFile(ctx, "/workspace/new dir/sub/blob.bin")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Content, data) {
			t.Fatalf("1 MiB round trip differs")
		}
		// The guest sees the same bytes, and the created parents belong to
		// the guest user.
		sum := sha256.Sum256(data)
		out := mustOK(t, c, "sha256sum '/workspace/new dir/sub/blob.bin'; stat -c '%u %a' '/workspace/new dir' '/workspace/new dir/sub/blob.bin'")
		if !strings.HasPrefix(out, hex.EncodeToString(sum[:])) || !strings.Contains(out, "1000 755\n1000 640") {
			t.Errorf("in the guest: %q", out)
		}
		// Ranged read with the whole file's checksum.
		r, err := c.ReadRange(ctx, "/workspace/new dir/sub/blob.bin", 1000, 5000, true)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Data, data[1000:6000]) || r.Size != 1<<20 || r.EOF || r.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("range: %d bytes, size %d, eof %v, sha %s", len(r.Data), r.Size, r.EOF, r.SHA256)
		}
		r, err = c.ReadRange(ctx, "/workspace/new dir/sub/blob.bin", 1<<20-10, 100, false)
		if err != nil || len(r.Data) != 10 || !r.EOF {
			t.Errorf("tail range: %v %+v", err, r)
		}
		ls, err := c.List(ctx, "/workspace/new dir/sub")
		if err != nil {
			t.Fatal(err)
		}
		if ls.Kind != "dir" || len(ls.Entries) != 1 || ls.Entries[0].Name != "blob.bin" || ls.Entries[0].Size != 1<<20 {
			t.Errorf("listing: %+v", ls)
		}
		for _, bad := range []string{"relative", "/workspace/../etc/passwd", "/a\x00b", "/a\nb"} {
			if _, err := c.ReadFile(ctx, bad); !client.IsStatus(err, 400) {
				t.Errorf("read %q: %v, want 400", bad, err)
			}
		}
		for _, refused := range []string{"/", "/etc"} {
			if err := c.DeleteFile(ctx, refused, true); !client.IsStatus(err, 400) {
				t.Errorf("delete %q: %v, want 400", refused, err)
			}
		}
		// An absolute symlink inside the sandbox resolves inside it.
		mustOK(t, c, "ln -s '/workspace/new dir/sub' /home/agent/abs-link")
		if got, err := c.ReadFile(ctx, "/home/agent/abs-link/blob.bin"); err != nil || !bytes.Equal(got.Content, data) {
			t.Errorf("read through an absolute symlink: %v", err)
		}
		if err := c.DeleteFile(ctx, "/workspace/new dir", true); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadFile(ctx, "/workspace/new dir/sub/blob.bin"); !client.IsStatus(err, 404) {
			t.Errorf("after delete: %v, want 404", err)
		}
	})
}

func TestConformanceUpload(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		_, c := e.create(t, hypervisor.MachineSpec{})
		ctx := ctxT(t)
		data := make([]byte, 6<<20+123)
		rand.Read(data)
		sum := sha256.Sum256(data)
		send := func(id string) {
			for off := 0; off < len(data); off += 4 << 20 {
				end := min(off+4<<20, len(data))
				if _, err := c.UploadPart(ctx, id, int64(off), data[off:end]); err != nil {
					t.Fatal(err)
				}
			}
		}
		// A wrong checksum is refused and nothing lands at the path.
		send("up-bad")
		_, err := c.CompleteUpload(ctx, "up-bad", api.UploadComplete{Path: "/workspace/big.bin", Size: int64(len(data)), SHA256: strings.Repeat("0", 64)})
		if !client.IsStatus(err, 409) {
			t.Fatalf("wrong checksum: %v, want 409", err)
		}
		if _, err := c.ReadRange(ctx, "/workspace/big.bin", 0, 1, false); !client.IsStatus(err, 404) {
			t.Errorf("after refused upload the target exists: %v", err)
		}
		// A part out of order says where to continue.
		if _, err := c.UploadPart(ctx, "up-good", 4096, []byte("x")); !client.IsStatus(err, 409) {
			t.Errorf("out-of-order part: %v, want 409", err)
		}
		send("up-good")
		res, err := c.CompleteUpload(ctx, "up-good", api.UploadComplete{Path: "/workspace/big.bin", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Verified || res.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("complete: %+v", res)
		}
		out := mustOK(t, c, "sha256sum /workspace/big.bin")
		if !strings.HasPrefix(out, hex.EncodeToString(sum[:])) {
			t.Errorf("assembled file differs: %s", out)
		}
	})
}

func TestConformanceCheckpointRestore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		if !e.b.Capabilities().Snapshot {
			t.Skip("backend has no snapshots")
		}
		m, c := e.create(t, hypervisor.MachineSpec{})
		ctx := ctxT(t)
		mustOK(t, c, "echo v1 > /workspace/state; mkdir -p /workspace/d && echo keep > /workspace/d/f; echo y > /workspace/yes; echo s > /workspace/seq")
		// Files of a lower layer deleted (through the files API, which
		// acts as the guest user, so the layer is a first checkpoint's
		// with two files of the guest's) become whiteouts, which a
		// checkpoint layer must carry.
		base, err := m.Checkpoint(ctx, "base", false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.DeleteSnapshot(context.Background(), base) })
		if err := c.DeleteFile(ctx, "/workspace/yes", false); err != nil {
			t.Fatal(err)
		}
		s, err := m.Checkpoint(ctx, "v1", false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.DeleteSnapshot(context.Background(), s) })
		mustOK(t, c, "echo v2 > /workspace/state; echo new > /workspace/added; rm -r /workspace/d")
		if err := c.DeleteFile(ctx, "/workspace/seq", false); err != nil {
			t.Fatal(err)
		}
		if err := m.Restore(ctx, s); err != nil {
			t.Fatal(err)
		}
		c = clientFor(m)
		out := mustOK(t, c, "cat /workspace/state; cat /workspace/d/f; test -e /workspace/added && echo added-exists; test -e /workspace/yes && echo yes-exists; test -e /workspace/seq && echo seq-back")
		if out != "v1\nkeep\nseq-back\n" {
			t.Errorf("after restore: %q, want v1, keep, seq-back (yes stays deleted)", out)
		}
		// A second checkpoint on top of the restored state stacks a layer.
		mustOK(t, c, "echo v3 > /workspace/state")
		s2, err := m.Checkpoint(ctx, "v3", false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.DeleteSnapshot(context.Background(), s2) })
		mustOK(t, c, "rm /workspace/state")
		if err := m.Restore(ctx, s2); err != nil {
			t.Fatal(err)
		}
		if out := mustOK(t, clientFor(m), "cat /workspace/state /workspace/d/f"); out != "v3\nkeep\n" {
			t.Errorf("after second restore: %q", out)
		}
		// Memory checkpoints are refused with a reason when unsupported.
		if caps := e.b.Capabilities(); !caps.MemoryCheckpoint {
			_, err := m.Checkpoint(ctx, "mem", true)
			if !errors.Is(err, hypervisor.ErrNotSupported) || caps.MemoryCheckpointReason == "" {
				t.Errorf("memory checkpoint without support: %v (reason %q)", err, caps.MemoryCheckpointReason)
			}
		}
	})
}

func TestConformanceFork(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		if !e.b.Capabilities().Fork {
			t.Skip("backend cannot fork")
		}
		m, c := e.create(t, hypervisor.MachineSpec{})
		ctx := ctxT(t)
		mustOK(t, c, "echo parent > /workspace/who")
		s, err := m.Checkpoint(ctx, "pre-fork", false)
		if err != nil {
			t.Fatal(err)
		}
		kids, err := m.Fork(ctx, s, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) != 3 {
			t.Fatalf("%d children", len(kids))
		}
		hosts, machineIDs := map[string]bool{}, map[string]bool{}
		machineIDs[mustOK(t, c, "cat /etc/machine-id")] = true
		for i, k := range kids {
			t.Cleanup(func() { k.Stop(context.Background()) })
			kc := clientFor(k)
			if out := mustOK(t, kc, "cat /workspace/who"); out != "parent\n" {
				t.Errorf("child %d sees %q", i, out)
			}
			mustOK(t, kc, fmt.Sprintf("echo child-%d > /workspace/who; echo %d > /workspace/mine", i, i))
			hosts[strings.TrimSpace(mustOK(t, kc, "hostname"))] = true
			machineIDs[mustOK(t, kc, "cat /etc/machine-id")] = true
		}
		if len(hosts) != 3 {
			t.Errorf("children share hostnames: %v", hosts)
		}
		if len(machineIDs) != 4 {
			t.Errorf("parent and children share machine-ids: %v", machineIDs)
		}
		for i, k := range kids {
			if out := mustOK(t, clientFor(k), "cat /workspace/who /workspace/mine"); out != fmt.Sprintf("child-%d\n%d\n", i, i) {
				t.Errorf("child %d diverged wrongly: %q", i, out)
			}
		}
		if out := mustOK(t, c, "cat /workspace/who; ls /workspace"); out != "parent\nwho\n" {
			t.Errorf("parent changed by its children: %q", out)
		}
		if _, err := m.Fork(ctx, s, 0); !errors.Is(err, hypervisor.ErrInvalidSpec) {
			t.Errorf("fork 0: %v", err)
		}
		if _, err := m.Fork(ctx, s, 33); !errors.Is(err, hypervisor.ErrInvalidSpec) {
			t.Errorf("fork 33: %v", err)
		}
		for _, k := range kids {
			if err := k.Stop(ctx); err != nil {
				t.Error(err)
			}
		}
		if err := m.DeleteSnapshot(ctx, s); err != nil {
			t.Error(err)
		}
	})
}

// TestConformanceStopLeavesNothing creates and deletes 100 sandboxes and
// then looks for anything they left: mounts under the state directory,
// their cgroups (a cgroup can only be removed once no process is left in
// it), files in the state directory, and a reachable agent.
func TestConformanceStopLeavesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		n := 100
		if testing.Short() {
			n = 10
		}
		if e.name == "qemu" {
			n = 4 // a boot under TCG takes seconds
		}
		ctx := ctxT(t)
		ids := map[string]bool{}
		for i := range n {
			m, err := e.b.Create(ctx, hypervisor.MachineSpec{Image: testutil.MiniImageName})
			if err != nil {
				t.Fatalf("cycle %d: %v", i, err)
			}
			ids[m.ID()] = true
			if i%10 == 0 {
				mustOK(t, clientFor(m), "sleep 100 >/dev/null 2>&1 & echo started")
			}
			if err := m.Stop(ctx); err != nil {
				t.Fatalf("cycle %d stop: %v", i, err)
			}
			if err := m.Stop(ctx); err != nil {
				t.Fatalf("cycle %d: second stop is not idempotent: %v", i, err)
			}
			if _, err := m.Dial(ctx); err == nil {
				t.Fatalf("cycle %d: dial after stop succeeded", i)
			}
		}
		raw, _ := os.ReadFile("/proc/self/mountinfo")
		for _, l := range strings.Split(string(raw), "\n") {
			// The backend's own layer store (a btrfs mount) stays until
			// the backend is closed; sandboxes must leave nothing else.
			if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], e.stateDir) && !strings.HasSuffix(f[4], "/store") {
				t.Errorf("mount left behind: %s", l)
			}
		}
		for _, cg := range procbox.LeftoverCgroups() {
			if ids[cg[strings.LastIndex(cg, "/")+1:]] {
				t.Errorf("cgroup left behind: %s", cg)
			}
		}
		for _, dir := range []string{"procbox/machines", "procbox/run", "qemu/run", "qemu/disks"} {
			ents, _ := os.ReadDir(filepath.Join(e.stateDir, dir))
			for _, ent := range ents {
				t.Errorf("left in the state dir: %s/%s", dir, ent.Name())
			}
		}
	})
}

// TestConformanceParallel checks that sandboxes are independent when many
// run at once.
func TestConformanceParallel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := e.b.Create(ctxT(t), hypervisor.MachineSpec{Image: testutil.MiniImageName})
				if err != nil {
					errs <- err
					return
				}
				defer m.Stop(context.Background())
				c := clientFor(m)
				res, err := c.Exec(ctxT(t), api.ExecRequest{Command: api.Command{Shell: fmt.Sprintf("echo %d > /tmp/me; sleep 0.2; cat /tmp/me", i)}})
				if err != nil {
					errs <- err
					return
				}
				if string(res.Stdout) != fmt.Sprintf("%d\n", i) {
					errs <- fmt.Errorf("sandbox %d read %q", i, res.Stdout)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func ptrStr(p *int) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

// TestConformancePTY opens a terminal in a real sandbox: a tty from the
// sandbox's own devpts, the size, a resize, input, and the exit code.
func TestConformancePTY(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		if !e.b.Capabilities().PTY {
			t.Skip("backend has no PTY")
		}
		_, c := e.create(t, hypervisor.MachineSpec{})
		ctx := ctxT(t)
		conn, err := c.PTY(ctx, 120, 33, "tty; echo to-own-tty > $(tty) && echo wrote-tty; stty size; id -u; read x; stty size; echo got-$x; exit 7")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		var out strings.Builder
		readUntil := func(want string) {
			t.Helper()
			for !strings.Contains(out.String(), want) {
				_, data, err := conn.Read(ctx)
				if err != nil {
					t.Fatalf("waiting for %q: %v (output %q)", want, err, out.String())
				}
				out.Write(data)
			}
		}
		readUntil("1000")
		if err := client.Resize(ctx, conn, 90, 20); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the resize lands before the read returns
		if err := conn.Write(ctx, websocket.MessageBinary, []byte("abc\r")); err != nil {
			t.Fatal(err)
		}
		readUntil("got-abc")
		var code int
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				var ok bool
				if code, ok = client.ExitCode(err); !ok {
					t.Fatalf("pty ended with %v, not an exit code", err)
				}
				break
			}
			out.Write(data)
		}
		got := out.String()
		for _, want := range []string{"/dev/pts/0", "wrote-tty", "33 120", "20 90", "got-abc"} {
			if !strings.Contains(got, want) {
				t.Errorf("terminal output lacks %q:\n%s", want, got)
			}
		}
		if code != 7 {
			t.Errorf("exit code %d, want 7", code)
		}
	})
}
