package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestCLISessionShell runs `paddock session shell` against `paddock
// serve` with pipes (no terminal): the remote exit code comes back as the
// CLI's, piped input is typed into the shell, and refusals exit 5.
func TestCLISessionShell(t *testing.T) {
	c := serveCLI(t)
	env := c.env
	run := func(env []string, stdin []byte, args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, c.bin, env, stdin, args...)
	}
	id := c.newSession()

	if out, se, code := run(env, nil, "session", "shell", id, "--", "sh", "-c", "echo in-shell; exit 7"); code != 7 || !strings.Contains(out, "in-shell") {
		t.Errorf("shell -- sh -c 'exit 7': code %d stdout %q stderr %q", code, out, se)
	}
	if out, se, code := run(env, []byte("echo hi-$((20+1)); exit\n"), "session", "shell", id); code != 0 || !strings.Contains(out, "hi-21") {
		t.Errorf("shell with piped input: code %d stdout %q stderr %q", code, out, se)
	}
	if out, se, code := run(env, []byte("exit 4\n"), "session", "shell", id); code != 4 {
		t.Errorf("shell with piped exit 4: code %d stdout %q stderr %q", code, out, se)
	}
	tl, _, _ := run(env, nil, "session", "timeline", id)
	if strings.Count(tl, "pty.open") != 3 || strings.Count(tl, "pty.close") != 3 || strings.Contains(tl, "hi-") {
		t.Errorf("timeline after three shells:\n%s", tl)
	}

	// A read-only session refuses terminals, and so does a session token.
	out, se, code := run(env, nil, "--json", "session", "run", "--readonly")
	var ro struct{ ID string }
	if err := json.Unmarshal([]byte(out), &ro); err != nil || code != 0 {
		t.Fatalf("session run --readonly: %q %q %d", out, se, code)
	}
	if _, se, code := run(env, nil, "session", "shell", ro.ID, "--", "true"); code != exitForbidden || !strings.Contains(se, "read-only") {
		t.Errorf("shell on a read-only session: code %d stderr %q", code, se)
	}
	out, se, code = run(env, nil, "--json", "session", "token", id, "--ops", "exec,read")
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(out), &tok); err != nil || code != 0 || tok.Token == "" {
		t.Fatalf("token mint: %q %q %d", out, se, code)
	}
	tokEnv := append(slices.Clone(env), "PADDOCK_TOKEN="+tok.Token)
	if _, se, code := run(tokEnv, nil, "session", "shell", id, "--", "true"); code != exitForbidden || !strings.Contains(se, "session token") {
		t.Errorf("shell with a session token: code %d stderr %q", code, se)
	}
}

// TestCLISessionShellTTY runs `paddock session shell` on a pseudo-terminal
// of the test's, as a person would: the session's terminal starts at the
// local size and follows it (SIGWINCH), ^C reaches the remote shell
// instead of stopping the CLI (raw mode), and the exit code comes back.
func TestCLISessionShellTTY(t *testing.T) {
	c := serveCLI(t)
	id := c.newSession()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	cli := exec.Command(c.bin, "session", "shell", id)
	cli.Env = c.env
	cli.Stdin, cli.Stdout, cli.Stderr = tty, tty, tty
	cli.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	defer cli.Process.Kill()
	var screen lockedBuilder
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	// until types line (again every second) until the screen shows want.
	until := func(line, want string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(screen.String(), want); {
			if line != "" {
				ptmx.WriteString(line)
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %q:\n%s", want, screen.String())
			}
			for end := time.Now().Add(time.Second); time.Now().Before(end) && !strings.Contains(screen.String(), want); {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	until("stty size\r", "30 100")
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 132, Rows: 43}); err != nil {
		t.Fatal(err)
	}
	until("stty size\r", "43 132")
	ptmx.WriteString("sleep 60; echo not-interrupted\r")
	time.Sleep(500 * time.Millisecond)
	ptmx.WriteString("\x03")
	until("", "^C")
	until("echo after-$((3*3))\r", "after-9")
	ptmx.WriteString("exit 6\r")
	done := make(chan error, 1)
	go func() { done <- cli.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 6 {
			t.Errorf("the CLI ended with %v, want exit code 6\n%s", err, screen.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the CLI did not exit:\n%s", screen.String())
	}
	if strings.Contains(screen.String(), "\nnot-interrupted") {
		t.Errorf("^C did not reach the remote shell:\n%s", screen.String())
	}
}
