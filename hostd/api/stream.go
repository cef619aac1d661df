package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"paddock.dev/paddock/hostd/session"
)

// Streams: at most maxStreams at once, each at most streamMaxAge.
const (
	maxStreams   = 16
	streamMaxAge = time.Hour
)

// sse writes Server-Sent Events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) (*sse, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, fmt.Errorf("streaming is not supported on this connection")
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sse{w: w, f: f}, nil
}

func (s *sse) event(name, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if id != "" {
		fmt.Fprintf(s.w, "id: %s\n", id)
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func (s *Server) enterStream() error {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	if s.streams >= maxStreams {
		return fmt.Errorf("%w: %d streams are open on this daemon, the most allowed", session.ErrConflict, maxStreams)
	}
	s.streams++
	return nil
}

func (s *Server) leaveStream() {
	s.streamMu.Lock()
	s.streams--
	s.streamMu.Unlock()
}

// streamJob follows a job from the offsets to its end: output and stderr
// events whose id is "<stdout offset>:<stderr offset>" (a cursor for
// Last-Event-ID), then one exit event.
func (s *Server) streamJob(w http.ResponseWriter, r *http.Request, id, job string, off, eoff int64, ev *sse) (*session.JobRead, error) {
	deadline := time.Now().Add(streamMaxAge)
	for time.Now().Before(deadline) {
		rd, err := s.sessions.ReadJob(r.Context(), tenant(r), id, job, off, eoff, 25*time.Second)
		if err != nil {
			ev.event("error", "", map[string]string{"error": err.Error()})
			return nil, nil
		}
		cursor := fmt.Sprintf("%d:%d", rd.NextOffset, rd.StderrNextOffset)
		if rd.OutputBase64 != "" {
			ev.event("output", cursor, map[string]any{"offset": off, "next_offset": rd.NextOffset, "output": rd.Output, "output_base64": rd.OutputBase64})
		}
		if rd.Stderr != "" {
			ev.event("stderr", cursor, map[string]any{"offset": eoff, "next_offset": rd.StderrNextOffset, "stderr": rd.Stderr})
		}
		off, eoff = rd.NextOffset, rd.StderrNextOffset
		if rd.EOF {
			ev.event("exit", cursor, map[string]any{"exit_code": rd.ExitCode, "state": rd.State, "signal": rd.Signal})
			return rd, nil
		}
		if r.Context().Err() != nil {
			return nil, nil
		}
	}
	ev.event("error", "", map[string]string{"error": "the stream reached its one-hour limit; resume with Last-Event-ID"})
	return nil, nil
}

// execStream runs a command as a job and streams its output.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request) error {
	var req session.ExecRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := req.Check(); err != nil {
		return err
	}
	id := r.PathValue("id")
	if req.ApprovalWaitSeconds > 0 {
		// Wait for an operator before taking one of the daemon's streams:
		// a held command must not hold a stream slot.
		approved, err := s.sessions.AwaitApproval(r.Context(), tenant(r), id, session.JobStart{Command: req.Command,
			TimeoutSeconds: req.TimeoutSeconds, ApprovalWaitSeconds: req.ApprovalWaitSeconds})
		if err != nil {
			return err
		}
		req.ApprovalID, req.ApprovalWaitSeconds = approved, 0
	}
	if err := s.enterStream(); err != nil {
		return err
	}
	defer s.leaveStream()
	start := time.Now()
	job, err := s.sessions.StartExecStream(r.Context(), tenant(r), id, req)
	if err != nil {
		return err
	}
	ev, err := newSSE(w)
	if err != nil {
		return err
	}
	ev.event("start", "0:0", map[string]string{"job": job.ID})
	rd, _ := s.streamJob(w, r, id, job.ID, 0, 0, ev)
	if rd != nil && rd.ExitCode != nil {
		// The client may be gone already: the record must still be made.
		s.sessions.RecordExec(context.WithoutCancel(r.Context()), id, req.Command, *rd.ExitCode, time.Since(start))
	}
	return nil
}

// jobStream follows an existing job, resuming from Last-Event-ID or
// ?offset=&stderr_offset=.
func (s *Server) jobStream(w http.ResponseWriter, r *http.Request) error {
	off, err := queryInt(r, "offset", 0, 0, 1<<40)
	if err != nil {
		return err
	}
	eoff, err := queryInt(r, "stderr_offset", 0, 0, 1<<40)
	if err != nil {
		return err
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		a, b, ok := strings.Cut(last, ":")
		o, err1 := strconv.ParseInt(a, 10, 64)
		e, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || o < 0 || e < 0 {
			return fmt.Errorf("%w: Last-Event-ID %q must be <stdout offset>:<stderr offset>", session.ErrBadRequest, last)
		}
		off, eoff = o, e
	}
	if err := s.enterStream(); err != nil {
		return err
	}
	defer s.leaveStream()
	// Fail before the stream starts when the job or session is unknown.
	if _, err := s.sessions.ReadJob(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("job"), off, eoff, 0); err != nil {
		return err
	}
	ev, err := newSSE(w)
	if err != nil {
		return err
	}
	s.streamJob(w, r, r.PathValue("id"), r.PathValue("job"), off, eoff, ev)
	return nil
}

// maxEventStreams bounds events/stream connections on a host.
const maxEventStreams = 64

// eventsStream replays the session's ledger (after ?since= or
// Last-Event-ID, a ledger seq), then sends new entries as they come,
// about every 500 ms. It ends with an error event once the session is
// gone or after an hour.
func (s *Server) eventsStream(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var after int64
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: Last-Event-ID %q must be a ledger sequence number", session.ErrBadRequest, last)
		}
		after = n
	}
	if _, err := s.sessions.Get(r.Context(), tenant(r), id); err != nil {
		return err
	}
	s.streamMu.Lock()
	if s.eventStreams >= maxEventStreams {
		s.streamMu.Unlock()
		return fmt.Errorf("%w: %d event streams are open on this daemon, the most allowed", session.ErrConflict, maxEventStreams)
	}
	s.eventStreams++
	s.streamMu.Unlock()
	defer func() { s.streamMu.Lock(); s.eventStreams--; s.streamMu.Unlock() }()
	ev, err := newSSE(w)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(streamMaxAge)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		entries, err := s.sessions.EventsAfter(r.Context(), tenant(r), id, after)
		if err != nil {
			ev.event("error", "", map[string]string{"error": err.Error()})
			return nil
		}
		for _, e := range entries {
			ev.event("ledger", strconv.FormatInt(e.Seq, 10), e)
			after = e.Seq
		}
		if sess, err := s.sessions.Get(r.Context(), tenant(r), id); err != nil || sess.State != session.StateRunning {
			ev.event("error", "", map[string]string{"error": "the session ended"})
			return nil
		}
		if time.Now().After(deadline) {
			ev.event("error", "", map[string]string{"error": "the stream reached its one-hour limit; reconnect with Last-Event-ID"})
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}
