package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"paddock.dev/paddock/guest/api"
)

// maxPTYDim bounds the terminal size a client may ask for.
const maxPTYDim = 10000

// ptyArgv is the command of a terminal session: the given shell line, or a
// login shell.
func ptyArgv(command string) []string {
	if command != "" {
		return []string{"/bin/sh", "-c", command}
	}
	if checkExecutable("/bin/bash") == nil {
		return []string{"/bin/bash", "-l"}
	}
	return []string{"/bin/sh", "-l"}
}

// handlePTY answers GET /v1/pty?cols=&rows=&command= with a WebSocket
// carrying a real terminal: binary frames are raw bytes both ways, a text
// frame {"resize":{...}} resizes, and the close reason is exit=<code>.
func (s *Server) handlePTY(w http.ResponseWriter, r *http.Request) error {
	cols, err := queryInt(r, "cols", 80, 1, maxPTYDim)
	if err != nil {
		return err
	}
	rows, err := queryInt(r, "rows", 24, 1, maxPTYDim)
	if err != nil {
		return err
	}
	command := r.URL.Query().Get("command")
	if strings.ContainsRune(command, 0) {
		return fmt.Errorf("%w: command contains a NUL byte", ErrBadRequest)
	}
	c := api.Command{Argv: ptyArgv(command), Confine: s.cfg.PTYConfine}
	if envValue(s.baseEnv, "TERM") == "" {
		c.Env = []string{"TERM=xterm-256color"}
	}
	p, err := s.newProcess(nil, &c)
	if err != nil {
		return err
	}
	// A new session with the terminal as its controlling tty (fd 0).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Credential: s.cred}
	ptmx, tty, err := pty.Open()
	if err != nil {
		p.abort()
		return fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	defer ptmx.Close()
	// The terminal belongs to whoever sits at it, as login would do, so
	// the guest user can write to its own tty (`echo hi > $(tty)`).
	if s.chown {
		_ = tty.Chown(s.uid, s.gid)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		tty.Close()
		p.abort()
		return fmt.Errorf("size the pseudo-terminal: %w", err)
	}
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = tty, tty, tty
	p.childEnds = append(p.childEnds, tty)
	if err := p.start(); err != nil {
		return err
	}
	pid := p.cmd.Process.Pid
	waitc := make(chan *os.ProcessState, 1)
	go func() {
		_ = p.cmd.Wait()
		waitc <- p.cmd.ProcessState
	}()

	// The agent is reached only through the host's own socket, never by a
	// browser directly, so there is no origin to check.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		_ = killGroup(pid, syscall.SIGKILL)
		<-waitc
		return nil // Accept has answered the request
	}
	conn.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.log.Info("pty opened", "pid", pid, "cols", cols, "rows", rows)

	outDone := make(chan struct{})
	go func() { // terminal → client
		defer close(outDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // client → terminal
		defer cancel()
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := ptmx.Write(data); err != nil {
					return
				}
				continue
			}
			var rz api.PTYResize
			if json.Unmarshal(data, &rz) == nil && rz.Resize.Cols > 0 && rz.Resize.Rows > 0 {
				_ = pty.Setsize(ptmx, &pty.Winsize{Cols: rz.Resize.Cols, Rows: rz.Resize.Rows})
			}
		}
	}()

	var ps *os.ProcessState
	select {
	case ps = <-waitc:
	case <-ctx.Done(): // the client went away: hang up the session
		_ = killGroup(pid, syscall.SIGHUP)
		select {
		case ps = <-waitc:
		case <-time.After(time.Second):
			_ = killGroup(pid, syscall.SIGKILL)
			ps = <-waitc
		}
		conn.CloseNow()
		s.log.Info("pty closed by client", "pid", pid)
		return nil
	}
	select {
	case <-outDone:
	case <-time.After(pipeGrace): // something still holds the terminal
		_ = killGroup(pid, syscall.SIGHUP)
		_ = ptmx.SetReadDeadline(time.Now())
		<-outDone
	}
	code := ptyExitCode(ps)
	_ = conn.Close(websocket.StatusNormalClosure, fmt.Sprintf("exit=%d", code))
	s.log.Info("pty closed", "pid", pid, "exit", code)
	return nil
}

// ptyExitCode is the exit status a shell would show: 128+n for signal n.
func ptyExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
