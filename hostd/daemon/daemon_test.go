package daemon_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/daemon"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
)

const token = "pdk_daemon_test_0123456789"

func tcpListener() ([]net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return []net.Listener{l}, nil
}

// TestDaemonLifecycle: New, Run and Close on a fresh state dir. The
// daemon serves /healthz and a session's create, exec and delete on
// procbox; a second session is left running for Close to stop. After
// Close nothing of the daemon is left: no listener, no sandbox process,
// no mount under the state dir, no sandbox cgroup, and the state dir is
// free for the next daemon.
func TestDaemonLifecycle(t *testing.T) {
	testutil.RequiresRoot(t)
	state := t.TempDir()
	guest, images := testutil.GuestBinary(t), testutil.MiniImages(t)
	d, err := daemon.New(daemon.Config{
		StateDir: state, AdminToken: token, DefaultImage: testutil.MiniImageName, ImagesDir: images,
		Backends: func() ([]hypervisor.Backend, error) {
			b, err := procbox.New(hypervisor.Config{StateDir: state, GuestBinary: guest, ImagesDir: images, AdoptLeftovers: true})
			if err != nil {
				return nil, err
			}
			return []hypervisor.Backend{b}, nil
		},
		Listeners:     tcpListener,
		StopSandboxes: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			d.Close()
		}
	})
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(context.Background()) }()
	base := "http://" + d.Addrs()[0].String()

	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	ctx := context.Background()
	c := client.New(base, token)
	s, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo hello"})
	if err != nil || r.ExitCode != 0 || r.Stdout != "hello\n" {
		t.Fatalf("exec: %+v %v", r, err)
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	// The one Close must stop.
	left, err := c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cg := sandboxCgroup(t, left.SandboxID)
	pids := cgroupPIDs(t, cg)
	if len(pids) == 0 {
		t.Fatalf("the running sandbox's cgroup %s has no process", cg)
	}
	if m := mountsUnder(t, state); len(m) == 0 {
		t.Fatalf("nothing mounted under the state dir while a sandbox runs: the check below would prove nothing")
	}

	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	closed = true
	select {
	case err := <-runErr:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if err := d.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the API still answers after Close")
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("sandbox process %d is still running after Close", pid)
		}
	}
	if _, err := os.Stat(cg); err == nil {
		t.Errorf("sandbox cgroup %s is still there after Close", cg)
	}
	if m := mountsUnder(t, state); len(m) > 0 {
		t.Errorf("still mounted under the state dir after Close: %v", m)
	}
	// The lock went with Close: a second daemon starts on the state dir.
	d2, err := daemon.New(daemon.Config{StateDir: state, AdminToken: token})
	if err != nil {
		t.Fatalf("a daemon after Close: %v", err)
	}
	d2.Close()
}

// TestDaemonConfig: one daemon per state dir, a bad value is ErrConfig,
// Close is idempotent without Run, Reload without a tenants file says so.
// No backend, so no root.
func TestDaemonConfig(t *testing.T) {
	state := t.TempDir()
	d, err := daemon.New(daemon.Config{StateDir: state, AdminToken: token})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.New(daemon.Config{StateDir: state, AdminToken: token}); err == nil || !strings.Contains(err.Error(), "another paddock serve") {
		t.Errorf("a second daemon on the state dir: %v", err)
	}
	if err := d.Reload(); !errors.Is(err, daemon.ErrNoTenantsFile) {
		t.Errorf("reload without a tenants file: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := d.Run(context.Background()); err == nil {
		t.Error("Run after Close worked")
	}
	for name, cfg := range map[string]daemon.Config{
		"overcommit":  {StateDir: t.TempDir(), AdminToken: token, DiskOvercommit: 1000},
		"short token": {StateDir: t.TempDir(), AdminToken: "short"},
		"retention":   {StateDir: t.TempDir(), AdminToken: token, EgressLogRetention: time.Second},
		"tenants":     {StateDir: t.TempDir(), AdminToken: token, TenantsFile: filepath.Join(t.TempDir(), "missing.json")},
	} {
		if _, err := daemon.New(cfg); !errors.Is(err, daemon.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	// The admin token made on a first start is handed out once and
	// kept as its hash.
	fresh := t.TempDir()
	var made string
	d, err = daemon.New(daemon.Config{StateDir: fresh, AdminTokenMade: func(tok string) { made = tok }})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if !strings.HasPrefix(made, "pdk_") {
		t.Fatalf("no token made: %q", made)
	}
	made2 := ""
	d, err = daemon.New(daemon.Config{StateDir: fresh, AdminTokenMade: func(tok string) { made2 = tok }})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if made2 != "" {
		t.Errorf("a second token was made: %q", made2)
	}
}

func sandboxCgroup(t *testing.T, id string) string {
	t.Helper()
	for _, p := range append([]string{"/sys/fs/cgroup/paddock/" + id}, globs("/sys/fs/cgroup/*/paddock/"+id)...) {
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
			return p
		}
	}
	t.Fatalf("no cgroup for sandbox %s", id)
	return ""
}

func globs(p string) []string { m, _ := filepath.Glob(p); return m }

func cgroupPIDs(t *testing.T, dir string) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// alive: pid exists and is not a zombie.
func alive(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}
