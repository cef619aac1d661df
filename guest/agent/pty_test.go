package agent_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"paddock.dev/paddock/guest/client"
)

// readPTY collects terminal output until the connection ends; it returns
// the output and the error that ended it (carrying the close reason).
func readPTY(ctx context.Context, conn *websocket.Conn, out *bytes.Buffer) error {
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		if typ == websocket.MessageBinary {
			out.Write(data)
		}
	}
}

func TestPTY(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	tests := []struct {
		name       string
		cols, rows uint16
		command    string
		input      func(ctx context.Context, conn *websocket.Conn) error
		wantOut    string
		wantCode   int
	}{
		{name: "output and exit code", cols: 80, rows: 24, command: "echo hi; exit 3", wantOut: "hi", wantCode: 3},
		{name: "is a terminal", cols: 80, rows: 24, command: "test -t 0 && test -t 1 && echo tty", wantOut: "tty"},
		{name: "size at open", cols: 120, rows: 33, command: "stty size", wantOut: "33 120"},
		{name: "resize then stty size", cols: 80, rows: 24, command: "read x; stty size",
			input: func(ctx context.Context, conn *websocket.Conn) error {
				if err := client.Resize(ctx, conn, 100, 40); err != nil {
					return err
				}
				return conn.Write(ctx, websocket.MessageBinary, []byte("\n"))
			},
			wantOut: "40 100"},
		{name: "input reaches the program", cols: 80, rows: 24, command: "read x; echo got-$x; exit 5",
			input: func(ctx context.Context, conn *websocket.Conn) error {
				return conn.Write(ctx, websocket.MessageBinary, []byte("abc\r"))
			},
			wantOut: "got-abc", wantCode: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			conn, err := a.c.PTY(ctx, tt.cols, tt.rows, tt.command)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.CloseNow()
			if tt.input != nil {
				if err := tt.input(ctx, conn); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			err = readPTY(ctx, conn, &out)
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("output %q does not contain %q", out.String(), tt.wantOut)
			}
			code, ok := client.ExitCode(err)
			if !ok || code != tt.wantCode {
				t.Errorf("connection ended with %v (exit %d, %v); want exit=%d", err, code, ok, tt.wantCode)
			}
		})
	}
}

func TestPTYHangsUpWhenTheClientLeaves(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	conn, err := a.c.PTY(ctx, 80, 24, "echo pid=$$; exec sleep 100")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	pid := 0
	for pid == 0 {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("before the pid arrived: %v (output %q)", err, out.String())
		}
		out.Write(data)
		if s, ok := strings.CutPrefix(strings.TrimSpace(out.String()), "pid="); ok {
			pid, _ = strconv.Atoi(s)
		}
	}
	conn.CloseNow()
	if !waitGone(pid, 3*time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("terminal program %d outlived its client", pid)
	}
}

func TestPTYRefusesBadSizes(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	_, err := a.c.PTY(testCtx(t), 0, 24, "")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 {
		t.Errorf("cols=0: %v, want a 400", err)
	}
}
