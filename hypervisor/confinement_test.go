package hypervisor_test

// Confinement and resource limits, proven with real programs inside real
// sandboxes of every backend that claims them.

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

var (
	probesOnce sync.Once
	probesDir  string
	probesErr  error
)

// probes builds the static C helpers once: probe (one system call per
// run, from guest/confine/testdata) and netprobe (hypervisor/testdata).
func probes(t *testing.T) (probe, netprobe []byte) {
	t.Helper()
	testutil.RequiresCommand(t, "gcc")
	probesOnce.Do(func() {
		probesDir, probesErr = os.MkdirTemp("", "paddock-probes")
		if probesErr != nil {
			return
		}
		root := testutil.RepoRoot()
		for _, p := range [][2]string{
			{filepath.Join(root, "guest/confine/testdata/probe.c"), "probe"},
			{filepath.Join(root, "hypervisor/testdata/netprobe.c"), "netprobe"},
		} {
			out, err := exec.Command("gcc", "-static", "-O1", "-o", filepath.Join(probesDir, p[1]), p[0]).CombinedOutput()
			if err != nil {
				probesErr = &buildErr{string(out), err}
				return
			}
		}
	})
	if probesErr != nil {
		t.Fatalf("build probes: %v", probesErr)
	}
	a, err := os.ReadFile(filepath.Join(probesDir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(probesDir, "netprobe"))
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// host32BitEntry says whether int 0x80 getpid works on the host with no
// filter (some hypervisors' guests fault on it whatever a filter says).
func host32BitEntry(t *testing.T) bool {
	probes(t)
	out, err := exec.Command(filepath.Join(probesDir, "probe"), "int80").Output()
	return err == nil && strings.HasPrefix(string(out), "ok ")
}

type buildErr struct {
	out string
	err error
}

func (e *buildErr) Error() string { return e.err.Error() + ": " + e.out }

func install(t *testing.T, c *client.Client, path string, data []byte) {
	t.Helper()
	if _, err := c.WriteFile(ctxT(t), api.FileContent{Path: path, Content: data, Mode: "0755"}); err != nil {
		t.Fatalf("install %s: %v", path, err)
	}
}

func run(t *testing.T, c *client.Client, confine *api.Confinement, argv ...string) *api.ExecResult {
	t.Helper()
	res, err := c.Exec(ctxT(t), api.ExecRequest{Command: api.Command{Argv: argv, TimeoutSeconds: 30, Confine: confine}})
	if err != nil {
		t.Fatalf("exec %v: %v", argv, err)
	}
	return res
}

func TestConformanceConfinement(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		if !e.b.Capabilities().Confinement {
			t.Skip("backend reports no confinement support")
		}
		probe, _ := probes(t)
		_, c := e.create(t, hypervisor.MachineSpec{})
		install(t, c, "/tmp/probe", probe)
		// /home/agent belongs to the guest user, so only Landlock can
		// stop a write there: the unconfined control must succeed.
		mustOK(t, c, "echo keep > /home/agent/ro.txt")
		policy := &api.Confinement{Enforcement: "strict", ReadWrite: []string{"/workspace", "/tmp"}}
		for _, tc := range []struct {
			name       string
			argv       []string
			unconfined string // prefix of the control's output
			confined   string // prefix of the confined output ("" = killed)
		}{
			{"write outside writable paths", []string{"/tmp/probe", "write", "/home/agent/new.txt"}, "ok", "err=EACCES"},
			{"write inside a writable path", []string{"/tmp/probe", "write", "/workspace/new.txt"}, "ok", "ok"},
			{"truncate a read-only file", []string{"/tmp/probe", "truncate", "/home/agent/ro.txt"}, "ok", "err=EACCES"},
			// The baseline filter refuses these to every process in the
			// sandbox, confined or not.
			{"io_uring_setup", []string{"/tmp/probe", "io_uring_setup"}, "err=EPERM", "err=EPERM"},
			{"ptrace the agent", []string{"/tmp/probe", "ptrace", "1"}, "err=EPERM", "err=EPERM"},
			{"unshare a user namespace", []string{"/tmp/probe", "unshare_user"}, "err=EPERM", "err=EPERM"},
			{"mount", []string{"/tmp/probe", "mount"}, "err=EPERM", "err=EPERM"},
			{"32-bit int 0x80", []string{"/tmp/probe", "int80"}, "", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.argv[1] == "int80" && e.name == "procbox" && !host32BitEntry(t) {
					// procbox runs on the host's kernel.
					t.Skip("this machine has no working 32-bit system call entry (int 0x80 faults on the host with no filter)")
				}
				ctl := run(t, c, nil, tc.argv...)
				if tc.unconfined == "" {
					if ctl.Signal != "SYS" && ctl.Signal != "SIGSYS" {
						t.Errorf("unconfined: exit %d signal %q stdout %q, want killed by SIGSYS", ctl.ExitCode, ctl.Signal, ctl.Stdout)
					}
				} else if !strings.HasPrefix(string(ctl.Stdout), tc.unconfined) {
					t.Errorf("unconfined control: %q (stderr %q), want %q", ctl.Stdout, ctl.Stderr, tc.unconfined)
				}
				res := run(t, c, policy, tc.argv...)
				if tc.confined == "" {
					if res.Signal != "SYS" && res.Signal != "SIGSYS" {
						t.Errorf("confined: exit %d signal %q stdout %q, want killed by SIGSYS", res.ExitCode, res.Signal, res.Stdout)
					}
				} else if !strings.HasPrefix(string(res.Stdout), tc.confined) {
					t.Errorf("confined: %q (stderr %q), want %q", res.Stdout, res.Stderr, tc.confined)
				}
				if r := res.Confinement; r == nil || !r.Landlock || !r.Seccomp || !r.NoNewPrivs || r.LandlockABI < 1 {
					t.Errorf("report: %+v", r)
				}
			})
		}
		// ptrace of the agent fails even for the unconfined guest user (it
		// is root's process); confined, seccomp refuses the call itself.
		// Executable allow-list: only id may start (plus the shell).
		allow := &api.Confinement{Enforcement: "strict", ReadWrite: []string{"/workspace", "/tmp"}, Exec: []string{"/usr/bin/id"}}
		res, err := c.Exec(ctxT(t), api.ExecRequest{Command: api.Command{Shell: "id -u && /tmp/probe write /tmp/x", Confine: allow}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(res.Stdout), "1000\n") || res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "ermission denied") {
			t.Errorf("allow-list: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		if res.Confinement == nil || !res.Confinement.ExecAllowlist {
			t.Errorf("allow-list report: %+v", res.Confinement)
		}
	})
}

func TestConformanceOffline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		_, netprobe := probes(t)
		// A listener on the host's loopback must not be reachable from the
		// sandbox's own loopback.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		_, c := e.create(t, hypervisor.MachineSpec{Network: hypervisor.NetworkOffline})
		install(t, c, "/tmp/netprobe", netprobe)
		if out := string(run(t, c, nil, "/tmp/netprobe", "ifaces").Stdout); strings.TrimSpace(out) != "lo" {
			t.Errorf("interfaces: %q, want only lo", out)
		}
		for _, tc := range []struct{ argv []string }{
			{[]string{"tcp", "1.1.1.1", "443"}},
			{[]string{"tcp", "10.0.2.2", "80"}},
			{[]string{"dns", "8.8.8.8"}},
			{[]string{"dns", "127.0.0.53"}},
			{[]string{"tcp", "127.0.0.1", port}},
		} {
			out := string(run(t, c, nil, append([]string{"/tmp/netprobe"}, tc.argv...)...).Stdout)
			if !strings.HasPrefix(out, "err=") {
				t.Errorf("%v reached something: %q", tc.argv, out)
			}
		}
	})
}

func TestConformanceForkBomb(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		_, c := e.create(t, hypervisor.MachineSpec{PIDs: 64})
		ctx := ctxT(t)
		j, err := c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "f() { f | f & }; f; sleep 5", TimeoutSeconds: 60}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		// The agent still answers, and the host can still start processes.
		hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := c.Health(hctx); err != nil {
			t.Errorf("agent unresponsive during the fork bomb: %v", err)
		}
		cancel()
		if out, err := exec.Command("true").CombinedOutput(); err != nil {
			t.Errorf("host cannot fork during the fork bomb: %v %s", err, out)
		}
		// The bomb hit the limit: the shell reports failed forks.
		r, err := c.ReadJob(ctx, j.ID, client.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.ToLower(string(r.Stderr)), "fork") {
			t.Errorf("the fork bomb never hit the pids limit; stderr %q", r.Stderr)
		}
		if _, err := c.SignalJob(ctx, j.ID, "KILL"); err != nil {
			t.Fatal(err)
		}
		// Once the bomb is gone, commands run again.
		deadline := time.Now().Add(20 * time.Second)
		for {
			// The guest user's processes (a VM's /proc also lists its
			// kernel's threads).
			res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: "n=0; for p in /proc/[0-9]*; do [ -O $p ] && n=$((n+1)); done; echo $n"}})
			if err == nil && res.ExitCode == 0 {
				n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
				if n < 20 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox did not recover after killing the fork bomb: %v %+v", err, res)
			}
			c.SignalJob(ctx, j.ID, "KILL")
			mustKillStragglers(ctx, c)
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// mustKillStragglers kills fork-bomb processes that left the job's
// process group (none should, but the test must not hang on them).
func mustKillStragglers(ctx context.Context, c *client.Client) {
	c.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"kill", "-KILL", "-1"}}})
}

func TestConformanceDiskLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		_, c := e.create(t, hypervisor.MachineSpec{DiskMB: 16})
		res := sh(t, c, "dd if=/dev/zero of=/workspace/fill bs=1M count=64 2>&1; echo rc=$?")
		out := string(res.Stdout)
		// tmpfs answers ENOSPC, a btrfs quota EDQUOT.
		if !(strings.Contains(out, "No space left on device") || strings.Contains(out, "Disk quota exceeded")) || strings.Contains(out, "rc=0") {
			t.Errorf("filling a 16 MiB disk: %q", out)
		}
		size, _ := strconv.Atoi(strings.TrimSpace(mustOK(t, c, "stat -c %s /workspace/fill")))
		if size > 16<<20 || size < 8<<20 {
			t.Errorf("filled file is %d bytes, want about 16 MiB", size)
		}
		// Freeing space makes the disk usable again.
		mustOK(t, c, "rm /workspace/fill && echo ok > /workspace/after")
	})
}

// TestConformanceMemoryLimit runs a command that eats memory past the
// sandbox's limit: the command dies, the agent lives on.
func TestConformanceMemoryLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		mem := int64(64)
		if e.name == "qemu" {
			mem = 256 // a VM's kernel needs its own share
		}
		_, c := e.create(t, hypervisor.MachineSpec{MemoryMB: mem})
		// tail buffers a line that never ends, so it grows until killed.
		res := sh(t, c, "head -c 400000000 /dev/zero | tail -n 1 >/dev/null; echo rc=$?")
		if strings.Contains(string(res.Stdout), "rc=0") {
			t.Errorf("a 400 MB line fit in %d MB: %q", mem, res.Stdout)
		}
		if _, err := c.Health(ctxT(t)); err != nil {
			t.Fatalf("agent died with the command: %v", err)
		}
		mustOK(t, c, "echo still here")
	})
}
