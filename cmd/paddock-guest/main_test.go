package main

import (
	"bytes"
	"context"
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
)

// The test binary runs main's subcommands when PADDOCK_GUEST_MAIN is set,
// so the real serve → confine → exec path runs without a separate build.
// The agent starts confine with the command's environment, without that
// variable, so "confine" is recognised by name.
func TestMain(m *testing.M) {
	if os.Getenv("PADDOCK_GUEST_MAIN") == "1" || (len(os.Args) > 1 && os.Args[1] == api.ConfineSubcommand) {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer written by a process and read by the test.
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

func guestCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PADDOCK_GUEST_MAIN=1")
	return cmd
}

func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	tests := []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"bogus"}, 2},
		{[]string{"version"}, 0},
		{[]string{"serve", "--no-such-flag"}, 2},
		{[]string{"serve"}, 1}, // no listener given
		{[]string{"serve", "--listen", "/tmp/x", "--listen-fd", "3"}, 1},
		{[]string{"serve", "--env", "NOEQUALS"}, 2},
	}
	for _, tt := range tests {
		if got := run(tt.args, &out, &errb); got != tt.want {
			t.Errorf("run(%q) = %d, want %d; stderr %s", tt.args, got, tt.want, errb.String())
		}
	}
	if want := "paddock-guest dev (protocol " + strconv.Itoa(api.Version) + ")"; !strings.Contains(out.String(), want) {
		t.Errorf("version printed %q", out.String())
	}
}

// TestServeWithRealConfine starts `paddock-guest serve` and runs a confined
// command through the real `paddock-guest confine`.
func TestServeWithRealConfine(t *testing.T) {
	dir := t.TempDir()
	sockDir, err := os.MkdirTemp("", "pgm")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "s")
	cmd := guestCmd("serve", "--listen", sock, "--root", dir, "--home", dir,
		"--spool-dir", filepath.Join(dir, "spool"), "--upload-dir", filepath.Join(dir, "up"), "--log-json",
		"--env", "PADDOCK_A=1", "--env", "LANG=C")
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve exited with %v; logs:\n%s", err, logs.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("serve did not stop on SIGINT")
		}
	}()
	c := client.NewUnix(sock)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, err := c.Health(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("serve never answered; logs:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: `echo "$PADDOCK_A $LANG $HOME"`}})
	if err != nil || string(res.Stdout) != "1 C "+dir+"\n" {
		t.Errorf("--env: %q, %v", res.Stdout, err)
	}
	res, err = c.Exec(ctx, api.ExecRequest{Command: api.Command{
		Shell: "ulimit -n",
		Confine: &api.Confinement{
			Enforcement: "best-effort",
			Rlimits:     map[string]uint64{"nofile": 77},
		},
	}})
	if err != nil {
		t.Fatalf("confined exec: %v", err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "77" || res.Confinement == nil {
		t.Errorf("confined ulimit -n: %q (stderr %q), report %+v", got, res.Stderr, res.Confinement)
	}
	if res.Confinement != nil && !res.Confinement.NoNewPrivs {
		t.Errorf("report without no_new_privs: %+v", res.Confinement)
	}
	if !strings.Contains(logs.String(), `"msg":"guest agent serving"`) {
		t.Errorf("--log-json did not log JSON: %s", logs.String())
	}
}

// TestInitAsPID1 runs `paddock-guest init` as PID 1 of a new PID namespace.
func TestInitAsPID1(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a PID namespace")
	}
	cmd := exec.Command(unshare, "--pid", "--fork", "--kill-child", os.Args[0],
		"init", "--", "sh", "-c", `echo "$PPID"; exit 5`)
	cmd.Env = append(os.Environ(), "PADDOCK_GUEST_MAIN=1")
	out, err := cmd.Output()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 5 {
		t.Fatalf("init: %v, output %q; want exit status 5", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "1" {
		t.Errorf("child's parent is %q, want PID 1 (init)", got)
	}
}
