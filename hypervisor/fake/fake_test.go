package fake_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/fake"
)

// These tests are meant to run as an ordinary user: `make test-nonroot`
// runs them so. As root they run too, with commands as root.

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newBackend(t *testing.T) *fake.Backend {
	t.Helper()
	b := fake.New(t.TempDir())
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

func create(t *testing.T, b hypervisor.Backend, spec hypervisor.MachineSpec) (*fake.Machine, *client.Client) {
	t.Helper()
	if spec.Image == "" && spec.From == nil {
		spec.Image = "any"
	}
	m, err := b.Create(ctxT(t), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	return m.(*fake.Machine), clientFor(m)
}

func clientFor(m hypervisor.Machine) *client.Client {
	return client.New(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) })
}

func mustOK(t *testing.T, c *client.Client, line string) string {
	t.Helper()
	res, err := c.Exec(ctxT(t), api.ExecRequest{Command: api.Command{Shell: line, TimeoutSeconds: 30}})
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%q: exit %d, stderr %q", line, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

// TestCapabilitiesAreHonest: the fake claims no isolation, no memory
// checkpoints, no confinement, no CPU meter and no egress, and refuses
// the network modes that need an egress link.
func TestCapabilitiesAreHonest(t *testing.T) {
	b := newBackend(t)
	c := b.Capabilities()
	if c.Isolation != "none" || c.MemoryCheckpoint || c.MemoryCheckpointReason == "" || c.Confinement ||
		c.CPUMeter || c.Egress || c.HTTPPolicy || c.ExecAllowlist || !c.Available || !c.Snapshot || !c.Fork {
		t.Errorf("capabilities claim what the fake does not do: %+v", c)
	}
	for _, network := range []string{hypervisor.NetworkProxy, hypervisor.NetworkTransparent} {
		_, err := b.Create(ctxT(t), hypervisor.MachineSpec{Image: "any", Network: network, EgressDir: filepath.Join(t.TempDir(), "eg")})
		if !errors.Is(err, hypervisor.ErrNotSupported) {
			t.Errorf("network %s: %v, want ErrNotSupported", network, err)
		}
	}
	if _, err := b.Create(ctxT(t), hypervisor.MachineSpec{Image: "any", Overlays: []hypervisor.Overlay{{Lower: "/a", Target: "/b"}}}); !errors.Is(err, hypervisor.ErrNotSupported) {
		t.Errorf("overlays: %v, want ErrNotSupported", err)
	}
	m, _ := create(t, b, hypervisor.MachineSpec{})
	if _, err := m.Checkpoint(ctxT(t), "mem", true); !errors.Is(err, hypervisor.ErrNotSupported) {
		t.Errorf("memory checkpoint: %v, want ErrNotSupported", err)
	}
	if _, err := b.Create(ctxT(t), hypervisor.MachineSpec{Image: "any", GuestUser: "0:0"}); !errors.Is(err, hypervisor.ErrInvalidSpec) {
		t.Errorf("root guest user: %v, want ErrInvalidSpec", err)
	}
}

// TestRealAgent: commands run as the test's own user (the agent never
// tries to become the spec's guest user), and the files, jobs, manifest
// and probe routes act on the machine's directory through the agent's
// own code.
func TestRealAgent(t *testing.T) {
	b := newBackend(t)
	m, c := create(t, b, hypervisor.MachineSpec{Env: []string{"FAKE_ENV=yes"}})
	ctx := ctxT(t)
	if h, err := c.Health(ctx); err != nil || h.Version != api.Version || h.PID != os.Getpid() {
		t.Fatalf("health: %+v, %v (the agent runs in this process)", h, err)
	}
	if got, want := mustOK(t, c, "id -u; echo $FAKE_ENV; pwd"), strconv.Itoa(os.Getuid())+"\nyes\n"+filepath.Join(m.Root(), "home", "agent")+"\n"; got != want {
		t.Errorf("exec: %q, want %q", got, want)
	}
	// The workspace set up as a session does it, then used as a cwd.
	if _, err := c.SetupWorkspace(ctx, "/workspace/proj"); err != nil {
		t.Fatalf("workspace: %v", err)
	}
	if got := mustOKIn(t, c, "/workspace/proj", "pwd"); got != filepath.Join(m.Root(), "workspace", "proj")+"\n" {
		t.Errorf("pwd in the workspace: %q", got)
	}
	// A command's working directory is the machine's copy of it.
	res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: "pwd; echo made > here.txt", Cwd: "/workspace"}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != filepath.Join(m.Root(), "workspace")+"\n" {
		t.Errorf("exec in /workspace: %+v, %v", res, err)
	}
	if got, err := c.ReadFile(ctx, "/workspace/here.txt"); err != nil || string(got.Content) != "made\n" {
		t.Errorf("a command's file through the files routes: %v", err)
	}
	if _, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: "true", Cwd: "/no-such-dir"}}); !client.IsStatus(err, 400) {
		t.Errorf("exec in a directory the machine lacks: %v, want 400", err)
	}
	// The files routes are confined to the machine's root.
	if _, err := c.WriteFile(ctx, api.FileContent{Path: "/workspace/a/b.txt", Content: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(m.Root(), "workspace", "a", "b.txt")); err != nil || string(data) != "hello" {
		t.Errorf("written file on disk: %q, %v", data, err)
	}
	if _, err := c.ReadFile(ctx, "/workspace/../../etc/passwd"); !client.IsStatus(err, 400) {
		t.Errorf("path out of the root: %v, want 400", err)
	}
	if err := os.Symlink("/etc", filepath.Join(m.Root(), "workspace", "out")); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ReadFile(ctx, "/workspace/out/hostname"); err == nil && bytes.Equal(got.Content, mustRead(t, "/etc/hostname")) {
		t.Errorf("a symlink led the files routes out of the machine's root")
	}
	if _, err := c.WriteFile(ctx, api.FileContent{Path: "/etc/x", Content: []byte("x")}); !client.IsStatus(err, 403) {
		t.Errorf("write under a system directory: %v, want 403", err)
	}
	man, err := c.Manifest(ctx, api.ManifestRequest{Path: "/workspace"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range man.Entries {
		names = append(names, e.Path)
	}
	if !strings.Contains(strings.Join(names, " "), "a/b.txt") {
		t.Errorf("manifest: %v", names)
	}
	if p, err := c.Probe(ctx); err != nil || p.OS == "" {
		t.Errorf("probe: %+v, %v", p, err)
	}
	j, err := c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "echo from-job"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for off := int64(0); ; {
		r, err := c.ReadJob(ctx, j.ID, client.ReadOptions{Offset: off, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out, off = append(out, r.Output...), r.NextOffset
		if r.EOF {
			if r.ExitCode == nil || *r.ExitCode != 0 || string(out) != "from-job\n" {
				t.Errorf("job: %+v, output %q", r.Job, out)
			}
			break
		}
	}
}

func mustOKIn(t *testing.T, c *client.Client, cwd, line string) string {
	t.Helper()
	res, err := c.Exec(ctxT(t), api.ExecRequest{Command: api.Command{Shell: line, Cwd: cwd, TimeoutSeconds: 30}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%q in %s: %+v, %v", line, cwd, res, err)
	}
	return string(res.Stdout)
}

func mustRead(t *testing.T, p string) []byte {
	data, _ := os.ReadFile(p)
	return data
}

// TestCheckpointRestoreFork: disk state comes back after a restore, and
// fork children start from the snapshot with their own directories.
func TestCheckpointRestoreFork(t *testing.T) {
	b := newBackend(t)
	m, c := create(t, b, hypervisor.MachineSpec{})
	ctx := ctxT(t)
	write := func(c *client.Client, p, v string) {
		t.Helper()
		if _, err := c.WriteFile(ctx, api.FileContent{Path: p, Content: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(c *client.Client, p string) string {
		t.Helper()
		got, err := c.ReadFile(ctx, p)
		if client.IsStatus(err, 404) {
			return "<absent>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(got.Content)
	}
	write(c, "/workspace/state", "v1")
	s, err := m.Checkpoint(ctx, "v1", false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend != fake.Name || s.Bytes != 2 {
		t.Errorf("snapshot: %+v", s)
	}
	write(c, "/workspace/state", "v2")
	write(c, "/workspace/added", "new")
	j, err := c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "sleep 300"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Restore(ctx, s); err != nil {
		t.Fatal(err)
	}
	c = clientFor(m)
	if got := read(c, "/workspace/state") + " " + read(c, "/workspace/added"); got != "v1 <absent>" {
		t.Errorf("after restore: %s", got)
	}
	if _, err := c.ReadJob(ctx, j.ID, client.ReadOptions{}); !client.IsStatus(err, 404) {
		t.Errorf("a job survived the restore: %v", err)
	}
	kids, err := m.Fork(ctx, s, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		t.Cleanup(func() { k.Stop(context.Background()) })
	}
	if kids[0].ID() == kids[1].ID() || kids[0].ID() == m.ID() {
		t.Errorf("fork ids: %s %s (parent %s)", kids[0].ID(), kids[1].ID(), m.ID())
	}
	k0, k1 := clientFor(kids[0]), clientFor(kids[1])
	write(k0, "/workspace/state", "child0")
	if got := read(k0, "/workspace/state") + " " + read(k1, "/workspace/state") + " " + read(c, "/workspace/state"); got != "child0 v1 v1" {
		t.Errorf("fork children share state: %s", got)
	}
	if err := m.DeleteSnapshot(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := m.Restore(ctx, s); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("restore from a deleted snapshot: %v, want ErrNotFound", err)
	}
	// A snapshot record cannot point the fake at another directory.
	bad := s
	bad.ID = "../../x"
	if err := m.Restore(ctx, bad); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("restore from %q: %v, want ErrNotFound", bad.ID, err)
	}
}

// TestStop: Stop is idempotent, removes the machine's directory, ends its
// commands and refuses new streams; Wait returns.
func TestStop(t *testing.T) {
	b := newBackend(t)
	m, c := create(t, b, hypervisor.MachineSpec{})
	ctx := ctxT(t)
	j, err := c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "sleep 300"}})
	if err != nil {
		t.Fatal(err)
	}
	pid := j.PID
	for range 2 {
		if err := m.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Root()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("machine directory left: %v", err)
	}
	if _, err := m.Dial(ctx); !errors.Is(err, hypervisor.ErrStopped) {
		t.Errorf("dial after stop: %v", err)
	}
	if pid > 0 {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && alive(pid) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("job process %d outlived Stop", pid)
		}
	}
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return !(i > 0 && i+2 < len(s) && s[i+2] == 'Z')
}

// TestConstructor: the fake can be registered by a test under a name of
// its choosing and built from a hypervisor.Config.
func TestConstructor(t *testing.T) {
	hypervisor.Register("fake-for-test", fake.Constructor)
	ctor, err := hypervisor.Lookup("fake-for-test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, err := ctor(hypervisor.Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.(*fake.Backend).Close()
	m, c := create(t, b, hypervisor.MachineSpec{})
	if !strings.HasPrefix(m.Root(), filepath.Join(dir, fake.Name)+"/") {
		t.Errorf("machine root %s is not under the state directory", m.Root())
	}
	mustOK(t, c, "true")
	if _, err := fake.Constructor(hypervisor.Config{}); err == nil {
		t.Error("a config without a state directory was accepted")
	}
}

// TestUploadAndTerminal: a resumable upload lands in the machine's
// directory with its checksum checked, and a terminal runs a command on
// a tty of its own and ends with its exit code.
func TestUploadAndTerminal(t *testing.T) {
	b := newBackend(t)
	m, c := create(t, b, hypervisor.MachineSpec{})
	ctx := ctxT(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	sum := sha256.Sum256(data)
	if _, err := c.UploadPart(ctx, "up1", 0, data[:600<<10]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(ctx, "up1", 600<<10, data[600<<10:]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompleteUpload(ctx, "up1", api.UploadComplete{Path: "/workspace/up.bin", Size: int64(len(data)), SHA256: strings.Repeat("0", 64)}); !client.IsStatus(err, 409) {
		t.Errorf("wrong checksum: %v, want 409", err)
	}
	if _, err := c.UploadPart(ctx, "up2", 0, data); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompleteUpload(ctx, "up2", api.UploadComplete{Path: "/workspace/up.bin", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(m.Root(), "workspace", "up.bin")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("uploaded file on disk: %d bytes, %v", len(got), err)
	}

	conn, err := c.PTY(ctx, 100, 30, "tty; stty size; exit 5")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	var out strings.Builder
	code := -1
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			var ok bool
			if code, ok = client.ExitCode(err); !ok {
				t.Fatalf("terminal ended with %v (output %q)", err, out.String())
			}
			break
		}
		out.Write(data)
	}
	if !strings.Contains(out.String(), "/dev/pts/") || !strings.Contains(out.String(), "30 100") || code != 5 {
		t.Errorf("terminal: output %q, exit %d", out.String(), code)
	}
}
