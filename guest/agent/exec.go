package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"paddock.dev/paddock/guest/api"
)

const defaultExecTimeout = 300 * time.Second

// cappedBuffer keeps the first limit bytes written to it and counts the
// rest, always accepting the write so the command's pipe keeps draining.
type cappedBuffer struct {
	buf     bytes.Buffer
	limit   int64
	dropped int64
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	room := b.limit - int64(b.buf.Len())
	switch {
	case room <= 0:
		b.dropped += int64(len(p))
	case int64(len(p)) > room:
		b.buf.Write(p[:room])
		b.dropped += int64(len(p)) - room
	default:
		b.buf.Write(p)
	}
	return len(p), nil
}

// bytes returns what was kept, with the marker when something was dropped.
func (b *cappedBuffer) bytes() []byte {
	if b.dropped > 0 {
		b.buf.WriteString(api.TruncationMarker)
	}
	return b.buf.Bytes()
}

// outputCap validates max_output_bytes.
func outputCap(n int64) (int64, error) {
	switch {
	case n == 0:
		return api.DefaultMaxOutputBytes, nil
	case n < 0 || n > api.MaxMaxOutputBytes:
		return 0, fmt.Errorf("%w: max_output_bytes %d must be from 1 to %d", ErrBadRequest, n, api.MaxMaxOutputBytes)
	}
	return n, nil
}

// commandTimeout validates timeout_seconds; zero gives def.
func commandTimeout(n int, def time.Duration) (time.Duration, error) {
	if n < 0 || n > api.MaxTimeoutSeconds {
		return 0, fmt.Errorf("%w: timeout_seconds %d must be from 0 to %d", ErrBadRequest, n, api.MaxTimeoutSeconds)
	}
	if n == 0 {
		return def, nil
	}
	return time.Duration(n) * time.Second, nil
}

// handleExec answers POST /v1/exec: run a command to completion.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) error {
	var req api.ExecRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	res, err := s.exec(r.Context(), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) exec(ctx context.Context, req *api.ExecRequest) (*api.ExecResult, error) {
	limit, err := outputCap(req.MaxOutputBytes)
	if err != nil {
		return nil, err
	}
	timeout, err := commandTimeout(req.TimeoutSeconds, defaultExecTimeout)
	if err != nil {
		return nil, err
	}
	if len(req.Stdin) > api.MaxExecStdinBytes {
		return nil, fmt.Errorf("%w: stdin is %d bytes, more than %d; use a job with a stdin pipe", ErrTooLarge, len(req.Stdin), api.MaxExecStdinBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var p *process
	if req.Git != nil {
		c, env, cleanup, gerr := s.gitCommand(&req.Command)
		if gerr != nil {
			return nil, gerr
		}
		defer cleanup()
		p, err = s.prepareProcess(ctx, c, env)
	} else {
		p, err = s.newProcess(ctx, &req.Command)
	}
	if err != nil {
		return nil, err
	}
	stdout := &cappedBuffer{limit: limit}
	stderr := &cappedBuffer{limit: limit}
	cmd := p.cmd
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	// A timeout or a dropped request kills the whole group; WaitDelay
	// stops reading pipes that a background child keeps open.
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = pipeGrace
	start := time.Now()
	if err := p.start(); err != nil {
		return nil, err
	}
	waitErr := cmd.Wait()
	if cmd.ProcessState == nil {
		return nil, fmt.Errorf("wait for %s: %w", cmd.Path, waitErr)
	}
	res := &api.ExecResult{
		TimedOut:       errors.Is(ctx.Err(), context.DeadlineExceeded),
		DurationMillis: time.Since(start).Milliseconds(),
	}
	res.ExitCode, res.Signal = exitStatus(cmd.ProcessState)
	res.Stdout, res.Stderr = stdout.bytes(), stderr.bytes()
	res.StdoutDropped, res.StderrDropped = stdout.dropped, stderr.dropped
	res.StdoutTruncated, res.StderrTruncated = stdout.dropped > 0, stderr.dropped > 0
	if p.confine {
		res.Confinement = p.waitReport(pipeGrace)
		if res.Confinement == nil && !res.TimedOut {
			return nil, confineFailure(res.ExitCode, stderr.buf.Bytes())
		}
	}
	s.log.Debug("exec", "path", cmd.Path, "exit", res.ExitCode, "signal", res.Signal, "timed_out", res.TimedOut, "duration", time.Since(start))
	return res, nil
}
