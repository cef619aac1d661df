package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
)

// jobOutput reads a job to EOF and returns both streams and the last read.
func jobOutput(t *testing.T, c *client.Client, id string, limit int64) (stdout, stderr string, last *api.JobRead) {
	t.Helper()
	ctx := testCtx(t)
	var out, errb bytes.Buffer
	var o client.ReadOptions
	o.Limit = limit
	for {
		o.Wait = 5 * time.Second
		r, err := c.ReadJob(ctx, id, o)
		if err != nil {
			t.Fatalf("read job %s: %v", id, err)
		}
		if r.NextOffset != o.Offset+int64(len(r.Output)) || r.StderrNextOffset != o.StderrOffset+int64(len(r.Stderr)) {
			t.Fatalf("offsets do not add up: %+v", r)
		}
		out.Write(r.Output)
		errb.Write(r.Stderr)
		o.Offset, o.StderrOffset = r.NextOffset, r.StderrNextOffset
		if r.EOF {
			return out.String(), errb.String(), r
		}
	}
}

// jobEnd is the part of a finished job the tests compare.
type jobEnd struct {
	State    string
	ExitCode int
	Signal   string
	Stdout   string
	Stderr   string
	Dropped  int64
}

func endOf(t *testing.T, c *client.Client, id string) jobEnd {
	t.Helper()
	stdout, stderr, r := jobOutput(t, c, id, 0)
	e := jobEnd{State: r.State, Signal: r.Signal, Stdout: stdout, Stderr: stderr, Dropped: r.DroppedBytes}
	if r.ExitCode == nil {
		t.Fatalf("job %s ended without an exit code: %+v", id, r.Job)
	}
	e.ExitCode = *r.ExitCode
	return e
}

func TestJobs(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	tests := []struct {
		name string
		req  api.JobRequest
		want jobEnd
	}{
		{"separate streams", api.JobRequest{Command: api.Command{Shell: "echo out; echo err >&2; echo out2"}},
			jobEnd{State: api.JobExited, Stdout: "out\nout2\n", Stderr: "err\n"}},
		{"exit code", api.JobRequest{Command: api.Command{Argv: []string{"sh", "-c", "exit 9"}}},
			jobEnd{State: api.JobExited, ExitCode: 9}},
		{"died of a signal nobody asked for", api.JobRequest{Command: api.Command{Shell: "kill -KILL $$"}},
			jobEnd{State: api.JobSignaled, ExitCode: -1, Signal: "KILL"}},
		{"timeout", api.JobRequest{Command: api.Command{Shell: "echo started; sleep 100", TimeoutSeconds: 1}},
			jobEnd{State: api.JobTimedOut, ExitCode: -1, Signal: "KILL", Stdout: "started\n"}},
		{"drains past the cap and keeps the exit status",
			api.JobRequest{Command: api.Command{Shell: "head -c 5000000 /dev/zero; echo tail >&2; exit 7", MaxOutputBytes: 1000}},
			jobEnd{State: api.JobExited, ExitCode: 7, Stdout: strings.Repeat("\x00", 1000), Stderr: "tail\n", Dropped: 5000000 - 1000}},
		{"background child holding the pipes", api.JobRequest{Command: api.Command{Shell: "sleep 3 & echo bg"}},
			jobEnd{State: api.JobExited, Stdout: "bg\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, err := a.c.StartJob(testCtx(t), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != api.JobRunning || j.PID <= 0 || j.ID == "" {
				t.Errorf("started job: %+v", j)
			}
			if diff := cmp.Diff(tt.want, endOf(t, a.c, j.ID)); diff != "" {
				t.Errorf("job end (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJobLongPollReturnsOnOutput(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	j, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "sleep 0.4; echo late; sleep 100"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.c.SignalJob(ctx, j.ID, "KILL")
	start := time.Now()
	r, err := a.c.ReadJob(ctx, j.ID, client.ReadOptions{Wait: 20 * time.Second})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Output) != "late\n" || took > 5*time.Second || took < 300*time.Millisecond {
		t.Errorf("long poll returned %q after %s; want \"late\\n\" after about 0.4 s", r.Output, took)
	}
	// Nothing new: the poll runs to its wait.
	start = time.Now()
	r, err = a.c.ReadJob(ctx, j.ID, client.ReadOptions{Offset: r.NextOffset, Wait: 300 * time.Millisecond})
	if err != nil || len(r.Output) != 0 || time.Since(start) < 250*time.Millisecond {
		t.Errorf("idle poll: %q after %s, %v", r.Output, time.Since(start), err)
	}
}

func TestJobLongPollReturnsOnExit(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	j, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Argv: []string{"sleep", "0.3"}}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := a.c.ReadJob(ctx, j.ID, client.ReadOptions{Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.State == api.JobRunning || time.Since(start) > 5*time.Second {
		t.Errorf("poll on a silent job returned state %s after %s", r.State, time.Since(start))
	}
}

func TestJobStdin(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	j, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Argv: []string{"cat"}}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.WriteStdin(ctx, j.ID, api.JobStdin{Data: []byte("hello\n")}); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("y"), api.MaxStdinWriteBytes)
	if _, err := a.c.WriteStdin(ctx, j.ID, api.JobStdin{Data: big}); err != nil {
		t.Fatal(err)
	}
	_, err = a.c.WriteStdin(ctx, j.ID, api.JobStdin{Data: append(big, 'z')})
	wantStatus(t, err, http.StatusRequestEntityTooLarge)
	st, err := a.c.WriteStdin(ctx, j.ID, api.JobStdin{Data: []byte("bye\n"), Close: true})
	if err != nil {
		t.Fatal(err)
	}
	if !st.StdinClosed || !st.Stdin {
		t.Errorf("after close: %+v", st)
	}
	want := jobEnd{State: api.JobExited, Stdout: "hello\n" + string(big) + "bye\n"}
	if diff := cmp.Diff(want, endOf(t, a.c, j.ID)); diff != "" {
		t.Errorf("cat (-want +got):\n%s", diff)
	}
	_, err = a.c.WriteStdin(ctx, j.ID, api.JobStdin{Data: []byte("late")})
	wantStatus(t, err, http.StatusConflict)

	noStdin, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Argv: []string{"sleep", "10"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.c.SignalJob(ctx, noStdin.ID, "KILL")
	_, err = a.c.WriteStdin(ctx, noStdin.ID, api.JobStdin{Data: []byte("x")})
	wantStatus(t, err, http.StatusConflict)
}

func TestJobKill(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	j, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "sleep 100 & echo $!; sleep 100"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.c.ReadJob(ctx, j.ID, client.ReadOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var bg int
	if _, err := fmt.Sscan(string(r.Output), &bg); err != nil {
		t.Fatalf("background pid in %q: %v", r.Output, err)
	}
	killed, err := a.c.SignalJob(ctx, j.ID, "TERM")
	if err != nil {
		t.Fatal(err)
	}
	if killed.State != api.JobKilled || killed.Signal != "TERM" {
		t.Errorf("after TERM: state %s signal %s", killed.State, killed.Signal)
	}
	if !waitGone(bg, 2*time.Second) {
		t.Errorf("background child %d survived a signal to the group", bg)
	}
	// Signalling a finished job changes nothing.
	again, err := a.c.SignalJob(ctx, j.ID, "KILL")
	if err != nil || again.State != api.JobKilled || again.Signal != "TERM" {
		t.Errorf("second signal: %+v, %v", again, err)
	}
	_, err = a.c.SignalJob(ctx, j.ID, "NOPE")
	wantStatus(t, err, http.StatusBadRequest)
}

func TestJobPagedRead(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	j, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Argv: []string{"seq", "1", "100000"}}})
	if err != nil {
		t.Fatal(err)
	}
	stdout, _, _ := jobOutput(t, a.c, j.ID, 4096)
	var want strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintln(&want, i)
	}
	if stdout != want.String() {
		t.Errorf("paged stdout: %d bytes, want %d", len(stdout), want.Len())
	}
}

func TestJobErrorsAndList(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	j, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Argv: []string{"echo", "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	endOf(t, a.c, j.ID)
	_, err = a.c.ReadJob(ctx, "jnope", client.ReadOptions{})
	wantStatus(t, err, http.StatusNotFound)
	_, err = a.c.ReadJob(ctx, j.ID, client.ReadOptions{Offset: 100})
	wantStatus(t, err, http.StatusBadRequest)
	_, err = a.c.ReadJob(ctx, j.ID, client.ReadOptions{Wait: (api.MaxWaitMillis + 1) * time.Millisecond})
	wantStatus(t, err, http.StatusBadRequest)
	_, err = a.c.SignalJob(ctx, "jnope", "")
	wantStatus(t, err, http.StatusNotFound)
	_, err = a.c.StartJob(ctx, api.JobRequest{})
	wantStatus(t, err, http.StatusBadRequest)

	j2, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "exit 0"}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := a.c.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range list {
		ids = append(ids, l.ID)
	}
	if diff := cmp.Diff([]string{j.ID, j2.ID}, ids); diff != "" {
		t.Errorf("job list (-want +got):\n%s", diff)
	}
}

func TestJobConfined(t *testing.T) {
	t.Parallel()
	a := startAgent(t, func(c *agent.Config) { c.ConfineBinary = os.Args[0] })
	ctx := testCtx(t)
	j, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{
		Shell:   "echo in-job",
		Confine: &api.Confinement{Rlimits: map[string]uint64{"core": 0}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := &api.ConfineReport{NoNewPrivs: true, Rlimits: []string{"core"}}
	if diff := cmp.Diff(want, j.Confinement); diff != "" {
		t.Errorf("job report (-want +got):\n%s", diff)
	}
	if got := endOf(t, a.c, j.ID); got.Stdout != "in-job\n" {
		t.Errorf("confined job output %q", got.Stdout)
	}
	_, err = a.c.StartJob(ctx, api.JobRequest{Command: api.Command{
		Argv:    []string{"true"},
		Confine: &api.Confinement{Exec: []string{"/refuse"}},
	}})
	wantStatus(t, err, http.StatusConflict)
	if !strings.Contains(err.Error(), "kernel too old") {
		t.Errorf("refusal %q does not carry confine's stderr", err)
	}
	list, err := a.c.Jobs(ctx)
	if err != nil || len(list) != 1 {
		t.Errorf("refused job must not be listed: %+v, %v", list, err)
	}
}

func TestJobsStopWithTheServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var pid int
	t.Run("serve", func(t *testing.T) {
		a := startAgent(t, func(c *agent.Config) { c.SpoolDir = dir })
		j, err := a.c.StartJob(context.Background(), api.JobRequest{Command: api.Command{Argv: []string{"sleep", "100"}}})
		if err != nil {
			t.Fatal(err)
		}
		pid = j.PID
	})
	if !waitGone(pid, 2*time.Second) {
		t.Errorf("job %d outlived the agent", pid)
	}
}

func TestJobTableLimit(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	var ids []string
	for range api.MaxJobs {
		j, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Argv: []string{"sleep", "60"}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	_, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Argv: []string{"true"}}})
	wantStatus(t, err, http.StatusConflict)

	// Once one has ended, it makes room for the next.
	victim := ids[len(ids)/2]
	if _, err := a.c.SignalJob(ctx, victim, "KILL"); err != nil {
		t.Fatal(err)
	}
	endOf(t, a.c, victim)
	if _, err := os.Stat(filepath.Join(a.cfg.SpoolDir, victim)); err != nil {
		t.Fatalf("spool of %s before eviction: %v", victim, err)
	}
	if _, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Argv: []string{"true"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = a.c.ReadJob(ctx, victim, client.ReadOptions{})
	wantStatus(t, err, http.StatusNotFound)
	if _, err := os.Stat(filepath.Join(a.cfg.SpoolDir, victim)); !os.IsNotExist(err) {
		t.Errorf("spool of the evicted job is still there: %v", err)
	}
	list, err := a.c.Jobs(ctx)
	if err != nil || len(list) != api.MaxJobs {
		t.Errorf("%d jobs listed, want %d (%v)", len(list), api.MaxJobs, err)
	}
}
