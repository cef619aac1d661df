package agent_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// initHelper starts the test binary as agent.RunInit over argv.
func initHelper(t *testing.T, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"init-helper"}, argv...)...)
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatalf("init helper: %v", err)
	}
	return ee.ExitCode()
}

func TestInitExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		argv []string
		want int
	}{
		{"exit code passes through", []string{"sh", "-c", "exit 7"}, 7},
		{"success", []string{"true"}, 0},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"command not found", []string{"/no/such/paddock-serve"}, 127},
		{"no command", nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := initHelper(t, tt.argv...).Run()
			if got := exitCode(t, err); got != tt.want {
				t.Errorf("exit status %d, want %d", got, tt.want)
			}
		})
	}
}

func TestInitForwardsSIGTERM(t *testing.T) {
	t.Parallel()
	cmd := initHelper(t, "sh", "-c", `trap "exit 42" TERM; echo ready; while :; do sleep 0.05; done`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if got := exitCode(t, err); got != 42 {
			t.Errorf("exit status %d, want the child's 42", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("init did not exit after SIGTERM")
	}
}

// TestInitReapsOrphans leaves orphans that init (a child subreaper here,
// PID 1 in a sandbox) inherits; once they exit none may stay a zombie.
func TestInitReapsOrphans(t *testing.T) {
	t.Parallel()
	// The orphans block on a FIFO until the test opens it, so how slowly a
	// loaded machine starts them does not matter: no sleeps to race.
	fifo := filepath.Join(t.TempDir(), "release")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := initHelper(t, "sh", "-c", `for i in 1 2 3; do (cat "$0" >/dev/null &); done; read x`, fifo)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	initPID := cmd.Process.Pid
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 20 s: %s", what)
			}
		}
	}
	waitFor("init never had 3 orphaned cats as children (reparenting did not happen)", func() bool {
		return len(childrenOf(t, initPID, "cat")) == 3
	})
	// Release them: each cat reads EOF and exits, an orphan of init's.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	waitFor("the orphans did not exit, or stayed zombies under init", func() bool {
		return len(childrenOf(t, initPID, "cat")) == 0
	})
	if z := zombiesOf(t, initPID); len(z) > 0 {
		t.Errorf("zombies left under init: %v", z)
	}
	stdin.Write([]byte("done\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("init: %v", err)
	}
}

// procStat returns a process's name, state and parent from /proc.
func procStat(pid string) (name string, state byte, ppid int, ok bool) {
	data, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return "", 0, 0, false
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < 0 || end+2 >= len(s) {
		return "", 0, 0, false
	}
	fields := strings.Fields(s[end+2:])
	if len(fields) < 2 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(fields[1])
	return s[open+1 : end], fields[0][0], ppid, true
}

func childrenOf(t *testing.T, parent int, name string) []string {
	t.Helper()
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if n, _, ppid, ok := procStat(e.Name()); ok && ppid == parent && n == name {
			out = append(out, e.Name())
		}
	}
	return out
}

func zombiesOf(t *testing.T, parent int) []string {
	t.Helper()
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if n, st, ppid, ok := procStat(e.Name()); ok && ppid == parent && st == 'Z' {
			out = append(out, e.Name()+" "+n)
		}
	}
	return out
}
