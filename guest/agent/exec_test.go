package agent_test

import (
	"bytes"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
)

// execOutcome is the part of an ExecResult the table compares.
type execOutcome struct {
	ExitCode int
	Signal   string
	Stdout   string
	Stderr   string
	TimedOut bool
}

func TestExec(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	cwd := t.TempDir()
	tests := []struct {
		name string
		req  api.ExecRequest
		want execOutcome
	}{
		{"argv", api.ExecRequest{Command: api.Command{Argv: []string{"echo", "hi", "there"}}},
			execOutcome{Stdout: "hi there\n"}},
		{"argv absolute path", api.ExecRequest{Command: api.Command{Argv: []string{"/bin/echo", "x"}}},
			execOutcome{Stdout: "x\n"}},
		{"shell with both streams and exit code", api.ExecRequest{Command: api.Command{Shell: "echo out; echo err >&2; exit 3"}},
			execOutcome{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}},
		{"stdin", api.ExecRequest{Command: api.Command{Argv: []string{"cat"}}, Stdin: []byte("from stdin\x00binary")},
			execOutcome{Stdout: "from stdin\x00binary"}},
		{"no stdin reads EOF", api.ExecRequest{Command: api.Command{Argv: []string{"cat"}}},
			execOutcome{}},
		{"env added", api.ExecRequest{Command: api.Command{Shell: `echo "$FOO"`, Env: []string{"FOO=bar baz"}}},
			execOutcome{Stdout: "bar baz\n"}},
		{"env overrides base", api.ExecRequest{Command: api.Command{Shell: `echo "$LANG"`, Env: []string{"LANG=C"}}},
			execOutcome{Stdout: "C\n"}},
		{"base env", api.ExecRequest{Command: api.Command{Shell: `echo "$HOME"`}},
			execOutcome{Stdout: a.root + "\n"}},
		{"cwd", api.ExecRequest{Command: api.Command{Argv: []string{"pwd"}, Cwd: cwd}},
			execOutcome{Stdout: cwd + "\n"}},
		{"default cwd is home", api.ExecRequest{Command: api.Command{Argv: []string{"pwd"}}},
			execOutcome{Stdout: a.root + "\n"}},
		{"killed by a signal", api.ExecRequest{Command: api.Command{Shell: "kill -TERM $$"}},
			execOutcome{ExitCode: -1, Signal: "TERM"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := a.c.Exec(testCtx(t), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			got := execOutcome{res.ExitCode, res.Signal, string(res.Stdout), string(res.Stderr), res.TimedOut}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("exec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExecRefusesBadRequests(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	tests := []struct {
		name string
		req  api.ExecRequest
		want int
	}{
		{"no command", api.ExecRequest{}, http.StatusBadRequest},
		{"argv and shell", api.ExecRequest{Command: api.Command{Argv: []string{"true"}, Shell: "true"}}, http.StatusBadRequest},
		{"empty argv[0]", api.ExecRequest{Command: api.Command{Argv: []string{""}}}, http.StatusBadRequest},
		{"unknown command", api.ExecRequest{Command: api.Command{Argv: []string{"no-such-command-paddock"}}}, http.StatusBadRequest},
		{"relative command path", api.ExecRequest{Command: api.Command{Argv: []string{"./x"}}}, http.StatusBadRequest},
		{"relative cwd", api.ExecRequest{Command: api.Command{Argv: []string{"true"}, Cwd: "tmp"}}, http.StatusBadRequest},
		{"missing cwd", api.ExecRequest{Command: api.Command{Argv: []string{"true"}, Cwd: "/no/such/dir"}}, http.StatusBadRequest},
		{"negative timeout", api.ExecRequest{Command: api.Command{Argv: []string{"true"}, TimeoutSeconds: -1}}, http.StatusBadRequest},
		{"timeout too long", api.ExecRequest{Command: api.Command{Argv: []string{"true"}, TimeoutSeconds: api.MaxTimeoutSeconds + 1}}, http.StatusBadRequest},
		{"output cap too big", api.ExecRequest{Command: api.Command{Argv: []string{"true"}, MaxOutputBytes: api.MaxMaxOutputBytes + 1}}, http.StatusBadRequest},
		{"env without =", api.ExecRequest{Command: api.Command{Argv: []string{"true"}, Env: []string{"FOO"}}}, http.StatusBadRequest},
		{"argv too large", api.ExecRequest{Command: api.Command{Argv: []string{"echo", strings.Repeat("x", api.MaxArgvBytes)}}}, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := a.c.Exec(testCtx(t), tt.req)
			wantStatus(t, err, tt.want)
		})
	}
}

func TestExecTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	start := time.Now()
	res, err := a.c.Exec(testCtx(t), api.ExecRequest{Command: api.Command{
		Shell:          "sleep 100 & echo $!; sleep 100",
		TimeoutSeconds: 1,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("exec took %s with a 1 s timeout", took)
	}
	got := execOutcome{res.ExitCode, res.Signal, "", "", res.TimedOut}
	if diff := cmp.Diff(execOutcome{ExitCode: -1, Signal: "KILL", TimedOut: true}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	bg, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("background pid: %v (stdout %q)", err, res.Stdout)
	}
	if !waitGone(bg, 2*time.Second) {
		syscall.Kill(bg, syscall.SIGKILL)
		t.Errorf("background sleep %d survived the timeout", bg)
	}
}

func TestExecOutputCapKeepsDraining(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	const limit, total = 1 << 20, 20 << 20
	res, err := a.c.Exec(testCtx(t), api.ExecRequest{Command: api.Command{
		Shell:          "head -c " + strconv.Itoa(total) + " /dev/zero; echo done >&2",
		MaxOutputBytes: limit,
	}})
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		ExitCode          int
		StdoutLen         int
		MarkerAtEnd       bool
		Truncated         bool
		Dropped           int64
		Stderr            string
		StderrTruncated   bool
		KeptBytesAreZeros bool
	}
	got := outcome{
		ExitCode:          res.ExitCode,
		StdoutLen:         len(res.Stdout),
		MarkerAtEnd:       bytes.HasSuffix(res.Stdout, []byte(api.TruncationMarker)),
		Truncated:         res.StdoutTruncated,
		Dropped:           res.StdoutDropped,
		Stderr:            string(res.Stderr),
		StderrTruncated:   res.StderrTruncated,
		KeptBytesAreZeros: len(res.Stdout) >= limit && bytes.Count(res.Stdout[:limit], []byte{0}) == limit,
	}
	want := outcome{
		StdoutLen:         limit + len(api.TruncationMarker),
		MarkerAtEnd:       true,
		Truncated:         true,
		Dropped:           total - limit,
		Stderr:            "done\n",
		KeptBytesAreZeros: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capped exec (-want +got):\n%s", diff)
	}
}

func TestExecReturnsWhileABackgroundChildHoldsThePipes(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	start := time.Now()
	res, err := a.c.Exec(testCtx(t), api.ExecRequest{Command: api.Command{Shell: "sleep 30 & echo $!; exit 4"}})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if bg, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); err == nil {
		syscall.Kill(bg, syscall.SIGKILL)
	} else {
		t.Errorf("stdout %q: %v", res.Stdout, err)
	}
	if took > 2500*time.Millisecond {
		t.Errorf("exec returned after %s; want under 2.5 s", took)
	}
	if res.ExitCode != 4 {
		t.Errorf("exit code %d, want 4", res.ExitCode)
	}
}

func TestExecConfined(t *testing.T) {
	t.Parallel()
	a := startAgent(t, func(c *agent.Config) { c.ConfineBinary = os.Args[0] })
	ctx := testCtx(t)

	res, err := a.c.Exec(ctx, api.ExecRequest{Command: api.Command{
		Shell: "echo confined",
		Confine: &api.Confinement{
			Enforcement: "best-effort",
			ReadOnly:    []string{"/opt/ro"},
			Rlimits:     map[string]uint64{"nofile": 64, "nproc": 100},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "confined\n" || res.ExitCode != 0 {
		t.Errorf("confined exec: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	want := &api.ConfineReport{NoNewPrivs: true, Missing: []string{"/opt/ro"}, Rlimits: []string{"nofile", "nproc"}}
	if diff := cmp.Diff(want, res.Confinement); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}

	// A command that itself exits 126 after the report is not a refusal.
	res, err = a.c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: "exit 126", Confine: &api.Confinement{Enforcement: "strict"}}})
	if err != nil || res.ExitCode != 126 || res.Confinement == nil {
		t.Errorf("command exiting 126: %+v, %v", res, err)
	}

	_, err = a.c.Exec(ctx, api.ExecRequest{Command: api.Command{
		Argv:    []string{"true"},
		Confine: &api.Confinement{Enforcement: "strict", Exec: []string{"/refuse"}},
	}})
	wantStatus(t, err, http.StatusConflict)
	if !strings.Contains(err.Error(), "kernel too old") {
		t.Errorf("refusal %q does not carry confine's stderr", err)
	}

	// Unconfined requests do not go through the confine binary.
	res, err = a.c.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"true"}}})
	if err != nil || res.Confinement != nil {
		t.Errorf("unconfined exec: %+v, %v", res, err)
	}
}
