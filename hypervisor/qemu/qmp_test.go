package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/internal/testutil"
)

// shortDir is a temporary directory short enough for a unix socket path
// (108 bytes), which t.TempDir's long names can exceed.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "qmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startQEMU runs a QEMU with no machine and no guest, only its QMP
// monitor, and returns a connected client and the process.
// The channel is closed when the process has exited.
func startQEMU(t *testing.T) (*Client, <-chan struct{}) {
	t.Helper()
	bin := testutil.RequiresCommand(t, "qemu-system-x86_64")
	sock := filepath.Join(shortDir(t), "qmp.sock")
	cmd := exec.Command(bin, "-machine", "none", "-nodefaults", "-nographic", "-display", "none",
		"-qmp", "unix:"+sock+",server=on,wait=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		c, err := Dial(ctx, sock, DialOptions{})
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c, exited
		}
		select {
		case <-exited:
			t.Fatalf("qemu exited before QMP answered: %v\n%s", cmd.ProcessState, stderr.String())
		case <-ctx.Done():
			t.Fatalf("qmp never answered: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestQMPAgainstQEMU(t *testing.T) {
	c, exited := startQEMU(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var v QMPVersion
	if err := c.Execute(ctx, "query-version", nil, &v); err != nil {
		t.Fatal(err)
	}
	if v.QEMU.Major < 7 || v.String() != c.Greeting().Version.String() {
		t.Errorf("query-version %s, greeting says %s", v, c.Greeting().Version)
	}
	caps, err := Probe(ctx, ProbeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if caps.QEMUVersion != v.String() || caps.QEMUPackage != v.Package {
		t.Errorf("probe says %s (%s), QMP says %s (%s)", caps.QEMUVersion, caps.QEMUPackage, v, v.Package)
	}
	t.Logf("QEMU %s (%s)", v, v.Package)

	var st struct {
		Status  string `json:"status"`
		Running bool   `json:"running"`
	}
	if err := c.Execute(ctx, "query-status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status != "running" || !st.Running {
		t.Errorf("query-status = %+v, want running", st)
	}

	err = c.Execute(ctx, "no-such-command", nil, nil)
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != ClassCommandNotFound || qe.Command != "no-such-command" {
		t.Fatalf("unknown command: %v, want a *Error of class %s", err, ClassCommandNotFound)
	}
	// Bad arguments are QEMU's GenericError, still typed.
	err = c.Execute(ctx, "query-status", map[string]any{"bogus": 1}, nil)
	if !errors.As(err, &qe) || qe.Class != ClassGenericError {
		t.Fatalf("bad arguments: %v, want a *Error of class %s", err, ClassGenericError)
	}

	// stop and cont emit STOP and RESUME even without a guest.
	for _, step := range []struct{ cmd, event string }{{"stop", "STOP"}, {"cont", "RESUME"}} {
		if err := c.Execute(ctx, step.cmd, nil, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-c.Events():
			if ev.Name != step.event || ev.Time.IsZero() {
				t.Errorf("after %s: event %+v, want %s with a time", step.cmd, ev, step.event)
			}
		case <-ctx.Done():
			t.Fatalf("no %s event after %s", step.event, step.cmd)
		}
	}

	// Many Executes at once each get their own reply.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each command's reply has a key the other's lacks.
			cmd, key := "query-status", "status"
			if i%2 == 1 {
				cmd, key = "query-version", "qemu"
			}
			var out map[string]any
			if err := c.Execute(ctx, cmd, nil, &out); err != nil {
				errs <- err
				return
			}
			if _, ok := out[key]; !ok {
				errs <- fmt.Errorf("%s: reply %v is another command's", cmd, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// quit: QEMU answers, says SHUTDOWN, exits, and the client sees EOF.
	if err := c.Execute(ctx, "quit", nil, nil); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("quit: %v", err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the connection did not close after quit")
	}
	t.Logf("after quit: %v", c.Err())
	if err := c.Err(); !errors.Is(err, ErrClosed) || !errors.Is(err, io.EOF) {
		t.Errorf("Err after quit = %v, want ErrClosed wrapping io.EOF", err)
	}
	var names []string
	for ev := range c.Events() { // closed with the connection
		names = append(names, ev.Name)
	}
	if diff := cmp.Diff([]string{"SHUTDOWN"}, names); diff != "" {
		t.Errorf("events after quit (-want +got):\n%s", diff)
	}
	if err := c.Execute(ctx, "query-status", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Execute after EOF = %v, want ErrClosed", err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("qemu still running after quit")
	}
}

// fakeQMP serves one QMP connection on a unix socket: greeting and
// capabilities, then serve (with the command lines it reads).
func fakeQMP(t *testing.T, serve func(cmds *bufio.Scanner, w net.Conn)) string {
	t.Helper()
	sock := filepath.Join(shortDir(t), "qmp.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, `{"QMP": {"version": {"qemu": {"micro": 0, "minor": 0, "major": 99}, "package": "fake"}, "capabilities": []}}`+"\r\n")
		sc := bufio.NewScanner(conn)
		if !sc.Scan() || !strings.Contains(sc.Text(), "qmp_capabilities") {
			return
		}
		io.WriteString(conn, `{"return": {}}`+"\r\n")
		serve(sc, conn)
	}()
	return sock
}

// idOf returns a command line's id as JSON.
func idOf(t *testing.T, line string) string {
	var c struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(line), &c); err != nil {
		t.Errorf("client sent %q: %v", line, err)
	}
	return string(c.ID)
}

func dialFake(t *testing.T, sock string, opts DialOptions) *Client {
	t.Helper()
	c, err := Dial(context.Background(), sock, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestQMPOversizedMessageClosesTheConnection(t *testing.T) {
	sock := fakeQMP(t, func(cmds *bufio.Scanner, w net.Conn) {
		if !cmds.Scan() {
			return
		}
		// A reply one byte over the limit, then a valid one that must not be read.
		big := `{"return": {"x": "` + strings.Repeat("a", DefaultMaxMessage) + `"}, "id": ` + idOf(t, cmds.Text()) + "}\r\n"
		io.WriteString(w, big)
		io.WriteString(w, `{"return": {}, "id": `+idOf(t, cmds.Text())+"}\r\n")
		cmds.Scan() // until the client hangs up
	})
	c := dialFake(t, sock, DialOptions{})
	err := c.Execute(context.Background(), "query-status", nil, nil)
	if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrMessageTooLarge) || !errors.Is(err, ErrProtocol) {
		t.Fatalf("Execute = %v, want ErrClosed wrapping ErrMessageTooLarge", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), ErrMessageTooLarge) {
		t.Errorf("Err = %v", c.Err())
	}
}

func TestQMPProtocolErrors(t *testing.T) {
	for _, tc := range []struct{ name, reply string }{
		{"invalid JSON", `{"return": `},
		{"reply without id", `{"return": {}}`},
		{"neither reply nor event", `{"hello": 1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := fakeQMP(t, func(cmds *bufio.Scanner, w net.Conn) {
				if cmds.Scan() {
					io.WriteString(w, tc.reply+"\r\n")
					cmds.Scan()
				}
			})
			c := dialFake(t, sock, DialOptions{})
			if err := c.Execute(context.Background(), "query-status", nil, nil); !errors.Is(err, ErrProtocol) || !errors.Is(err, ErrClosed) {
				t.Fatalf("Execute = %v, want ErrClosed wrapping ErrProtocol", err)
			}
		})
	}
}

func TestQMPEvents(t *testing.T) {
	sock := fakeQMP(t, func(cmds *bufio.Scanner, w net.Conn) {
		for cmds.Scan() {
			// Five events, then the reply: the client has handled the
			// events by the time Execute returns.
			for i := range 5 {
				fmt.Fprintf(w, `{"timestamp": {"seconds": 1700000000, "microseconds": %d}, "event": "EV%d", "data": {"n": %d}}`+"\r\n", i, i, i)
			}
			fmt.Fprintf(w, `{"return": {}, "id": %s}`+"\r\n", idOf(t, cmds.Text()))
		}
	})
	c := dialFake(t, sock, DialOptions{EventBuffer: 2})
	if got := c.Greeting().Version.String(); got != "99.0.0" {
		t.Errorf("greeting version %s", got)
	}
	ctx := context.Background()
	if err := c.Execute(ctx, "x", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.DroppedEvents(); got != 3 {
		t.Errorf("dropped %d events, want 3 (buffer 2, nobody reading)", got)
	}
	type ev struct {
		Name string
		Data string
		Time time.Time
	}
	var got []ev
	for range 2 {
		e := <-c.Events()
		got = append(got, ev{e.Name, string(e.Data), e.Time})
	}
	want := []ev{
		{"EV0", `{"n": 0}`, time.Unix(1700000000, 0)},
		{"EV1", `{"n": 1}`, time.Unix(1700000000, 1000)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// With a reader, nothing more is dropped.
	var wg sync.WaitGroup
	wg.Add(1)
	n := 0
	go func() {
		defer wg.Done()
		for range c.Events() {
			n++
		}
	}()
	for range 3 {
		if err := c.Execute(ctx, "x", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	wg.Wait()
	// 20 sent (5 per Execute), 2 read above; a slow reader may still drop some.
	if got := uint64(n) + 2 + c.DroppedEvents(); got != 20 {
		t.Errorf("read %d+2 events and dropped %d: %d, want 20", n, c.DroppedEvents(), got)
	}
}

func TestQMPCancelledExecuteLeavesTheConnectionUsable(t *testing.T) {
	sock := fakeQMP(t, func(cmds *bufio.Scanner, w net.Conn) {
		var held []string
		for cmds.Scan() {
			if strings.Contains(cmds.Text(), `"slow"`) {
				held = append(held, idOf(t, cmds.Text()))
				continue
			}
			for _, id := range held { // late reply to the abandoned command
				fmt.Fprintf(w, `{"return": {"late": true}, "id": %s}`+"\r\n", id)
			}
			held = nil
			fmt.Fprintf(w, `{"return": {"ok": true}, "id": %s}`+"\r\n", idOf(t, cmds.Text()))
		}
	})
	c := dialFake(t, sock, DialOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Execute(ctx, "slow", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow = %v, want DeadlineExceeded", err)
	}
	var out map[string]bool
	if err := c.Execute(context.Background(), "fast", nil, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"ok": true}, out); diff != "" {
		t.Errorf("fast got another reply (-want +got):\n%s", diff)
	}
}

func TestDialTimesOutOnASilentServer(t *testing.T) {
	sock := filepath.Join(shortDir(t), "qmp.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err == nil {
			defer conn.Close()
			io.Copy(io.Discard, conn) // never greets
		}
	}()
	start := time.Now()
	if _, err := Dial(context.Background(), sock, DialOptions{Timeout: 200 * time.Millisecond}); err == nil {
		t.Fatal("Dial succeeded without a greeting")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Dial took %v with a 200ms timeout", d)
	}
}
