package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/session"
)

// StreamLimits bounds the daemon's Server-Sent Event streams. Job streams
// (exec/stream and jobs/{job}/stream) and event streams (events/stream)
// are counted apart, each on the whole daemon, per tenant and per
// session, so one tenant (or one session) cannot take every slot: a
// tenant at its cap leaves the rest of the daemon's to the others. The
// admin's own sessions have no tenant and only the session and daemon
// caps apply to them. Every stream ends after MaxAge, and a stream whose
// client stops reading ends once one write has waited WriteTimeout (or
// at MaxAge, whichever is first): every write has a deadline, so a
// client that reads nothing cannot keep its slot.
type StreamLimits struct {
	JobStreams             int           // on the daemon
	JobStreamsPerTenant    int           // on one tenant's sessions
	JobStreamsPerSession   int           // on one session
	EventStreams           int           // on the daemon
	EventStreamsPerTenant  int           // on one tenant's sessions
	EventStreamsPerSession int           // on one session
	MaxAge                 time.Duration // how long one stream lasts
	WriteTimeout           time.Duration // how long one write may wait for the client; 0 is DefaultStreamWriteTimeout
}

// DefaultStreamWriteTimeout is how long one write of a stream may wait
// for a client that does not read.
const DefaultStreamWriteTimeout = 30 * time.Second

// finalWriteGrace is how long the last event of a stream that reached its
// age (the error event) may take to be written.
const finalWriteGrace = 2 * time.Second

// DefaultStreamLimits are the limits a daemon starts with.
var DefaultStreamLimits = StreamLimits{
	JobStreams: 32, JobStreamsPerTenant: 8, JobStreamsPerSession: 4,
	EventStreams: 128, EventStreamsPerTenant: 16, EventStreamsPerSession: 8,
	MaxAge: time.Hour, WriteTimeout: DefaultStreamWriteTimeout,
}

// Codes of a stream refused at a cap (StreamLimitError.Code): which cap.
const (
	CodeJobStreamsDaemon    = errdefs.CodeJobStreamsDaemon
	CodeJobStreamsTenant    = errdefs.CodeJobStreamsTenant
	CodeJobStreamsSession   = errdefs.CodeJobStreamsSession
	CodeEventStreamsDaemon  = errdefs.CodeEventStreamsDaemon
	CodeEventStreamsTenant  = errdefs.CodeEventStreamsTenant
	CodeEventStreamsSession = errdefs.CodeEventStreamsSession
)

// StreamLimitError is a stream refused because one of the caps is
// reached (429, with the code and the cap's value in the body).
type StreamLimitError struct {
	Code  string
	Limit int
	what  string // "job streams" or "event streams"
	where string // "on this daemon", "for this tenant", "on this session"
}

// Unwrap makes it too_many_requests, with its own code (errdefs.Code).
func (e *StreamLimitError) Unwrap() error {
	return errdefs.WithCode(e.Code, errdefs.ErrTooManyRequests)
}

func (e *StreamLimitError) Error() string {
	return fmt.Sprintf("%d %s are open %s, the most allowed: close one or wait for one to end", e.Limit, e.what, e.where)
}

// streamLimitBody is the 429 of a stream cap.
type streamLimitBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Limit int    `json:"limit"`
}

// streamLimitError writes a StreamLimitError's answer; false for any
// other error.
func streamLimitError(w http.ResponseWriter, err error) bool {
	var le *StreamLimitError
	if !errors.As(err, &le) {
		return false
	}
	writeJSON(w, http.StatusTooManyRequests, streamLimitBody{Error: err.Error(), Code: le.Code, Limit: le.Limit})
	return true
}

// Check refuses limits that would refuse every stream or never end one.
func (l StreamLimits) Check() error {
	for _, n := range []int{l.JobStreams, l.JobStreamsPerTenant, l.JobStreamsPerSession, l.EventStreams, l.EventStreamsPerTenant, l.EventStreamsPerSession} {
		if n < 1 {
			return fmt.Errorf("%w: every stream cap must be at least 1", session.ErrBadRequest)
		}
	}
	if l.MaxAge <= 0 {
		return fmt.Errorf("%w: a stream's MaxAge must be positive", session.ErrBadRequest)
	}
	if l.WriteTimeout < 0 {
		return fmt.Errorf("%w: a stream's WriteTimeout must not be negative (0 is the default, %s)", session.ErrBadRequest, DefaultStreamWriteTimeout)
	}
	return nil
}

// SetStreamLimits replaces the stream limits; streams already open keep
// their slots and the age they started with.
func (s *Server) SetStreamLimits(l StreamLimits) error {
	if err := l.Check(); err != nil {
		return err
	}
	s.streamMu.Lock()
	s.streamLimits = l
	s.streamMu.Unlock()
	return nil
}

// streamCount is one kind of stream's open slots.
type streamCount struct {
	daemon     int
	tenants    map[string]int
	perSession map[string]int
}

// streamKind picks the caps of job or event streams.
type streamKind int

const (
	jobStreams streamKind = iota
	eventStreams
)

// enterStream takes a slot of kind for session id of tenant ("" for the
// admin's sessions: no tenant cap) and returns its release and the
// stream's age and write limits. The caller has found the session as the caller's
// tenant sees it, so a refusal never tells one tenant about another's
// sessions.
func (s *Server) enterStream(kind streamKind, tenant, id string) (release func(), lim StreamLimits, err error) {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	l := s.streamLimits
	c, what := &s.jobStreams, "job streams"
	caps := [3]int{l.JobStreamsPerSession, l.JobStreamsPerTenant, l.JobStreams}
	codes := [3]string{CodeJobStreamsSession, CodeJobStreamsTenant, CodeJobStreamsDaemon}
	if kind == eventStreams {
		c, what = &s.eventStreams, "event streams"
		caps = [3]int{l.EventStreamsPerSession, l.EventStreamsPerTenant, l.EventStreams}
		codes = [3]string{CodeEventStreamsSession, CodeEventStreamsTenant, CodeEventStreamsDaemon}
	}
	if c.tenants == nil {
		c.tenants, c.perSession = map[string]int{}, map[string]int{}
	}
	switch {
	case c.perSession[id] >= caps[0]:
		return nil, l, &StreamLimitError{Code: codes[0], Limit: caps[0], what: what, where: "on this session"}
	case tenant != "" && c.tenants[tenant] >= caps[1]:
		return nil, l, &StreamLimitError{Code: codes[1], Limit: caps[1], what: what, where: "on this tenant's sessions"}
	case c.daemon >= caps[2]:
		return nil, l, &StreamLimitError{Code: codes[2], Limit: caps[2], what: what, where: "on this daemon"}
	}
	c.daemon++
	c.perSession[id]++
	if tenant != "" {
		c.tenants[tenant]++
	}
	var once bool
	return func() {
		s.streamMu.Lock()
		defer s.streamMu.Unlock()
		if once {
			return
		}
		once = true
		c.daemon--
		if c.perSession[id]--; c.perSession[id] == 0 {
			delete(c.perSession, id)
		}
		if tenant != "" {
			if c.tenants[tenant]--; c.tenants[tenant] == 0 {
				delete(c.tenants, tenant)
			}
		}
	}, l, nil
}

// ageLimitMessage is the error event of a stream that reached its age.
func ageLimitMessage(age time.Duration, resume string) string {
	return fmt.Sprintf("the stream reached its time limit (%s); %s with Last-Event-ID", age, resume)
}

// sse writes Server-Sent Events. Every write has a deadline: no later
// than the stream's end (its start plus MaxAge) and no more than
// WriteTimeout from the write's start. A write that misses it fails, and
// so does every one after it: the stream ends and gives its slot back.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	end     time.Time     // the stream's age limit
	timeout time.Duration // one write's limit
	err     error         // the first failed write
}

func newSSE(w http.ResponseWriter, lim StreamLimits) (*sse, error) {
	s := &sse{w: w, rc: http.NewResponseController(w), end: time.Now().Add(lim.MaxAge), timeout: lim.WriteTimeout}
	if s.timeout <= 0 {
		s.timeout = DefaultStreamWriteTimeout
	}
	if err := s.deadline(); err != nil {
		return nil, fmt.Errorf("streaming is not supported on this connection: %v", err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := s.rc.Flush(); err != nil {
		return nil, fmt.Errorf("streaming is not supported on this connection: %v", err)
	}
	return s, nil
}

// deadline sets the connection's write deadline for the next write:
// now plus the write limit, but not past the stream's end (past it, the
// closing error event gets finalWriteGrace).
func (s *sse) deadline() error {
	now := time.Now()
	d := now.Add(s.timeout)
	if now.Before(s.end) {
		d = minTime(d, s.end)
	} else {
		d = now.Add(min(s.timeout, finalWriteGrace))
	}
	return s.rc.SetWriteDeadline(d)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// event writes one event; once a write failed (the client went away or
// stopped reading past the deadline) every event fails.
func (s *sse) event(name, id string, v any) error {
	if s.err != nil {
		return s.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if s.err = s.deadline(); s.err != nil {
		return s.err
	}
	if id != "" {
		if _, s.err = fmt.Fprintf(s.w, "id: %s\n", id); s.err != nil {
			return s.err
		}
	}
	if _, s.err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b); s.err != nil {
		return s.err
	}
	s.err = s.rc.Flush()
	return s.err
}

// failed is the first failed write, nil while the client keeps up.
func (s *sse) failed() error { return s.err }

// streamJob follows a job from the offsets to its end: output and stderr
// events whose id is "<stdout offset>:<stderr offset>" (a cursor for
// Last-Event-ID), then one exit event.
func (s *Server) streamJob(w http.ResponseWriter, r *http.Request, id, job string, off, eoff int64, ev *sse, maxAge time.Duration) {
	deadline := ev.end
	for {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		rd, err := s.sessions.ReadJob(r.Context(), tenant(r), id, job, off, eoff, min(25*time.Second, left))
		if err != nil {
			ev.event("error", "", errorBody{Error: err.Error(), Code: errdefs.Code(err)})
			return
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
			return
		}
		if r.Context().Err() != nil || ev.failed() != nil {
			// Gone, or not reading within the write limit: the stream
			// ends and its slot is given back.
			return
		}
	}
	ev.event("error", "", errorBody{Error: ageLimitMessage(maxAge, "resume"), Code: errdefs.CodeStreamMaxAge})
}

// execStream runs a command as a job and streams its output.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request) error {
	var req session.ExecRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := session.CheckExec(&req); err != nil {
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
	sess, err := s.sessions.Get(r.Context(), tenant(r), id)
	if err != nil {
		return err
	}
	release, lim, err := s.enterStream(jobStreams, sess.Tenant, id)
	if err != nil {
		return err
	}
	defer release()
	job, err := s.sessions.StartExecStream(r.Context(), tenant(r), id, req)
	if err != nil {
		return err
	}
	ev, err := newSSE(w, lim)
	if err != nil {
		return err
	}
	ev.event("start", "0:0", map[string]string{"job": job.ID})
	// The exec's ledger entry and usage are the core's, made when the
	// job ends, whether or not this client stays to see it.
	s.streamJob(w, r, id, job.ID, 0, 0, ev, lim.MaxAge)
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
	id := r.PathValue("id")
	sess, err := s.sessions.Get(r.Context(), tenant(r), id)
	if err != nil {
		return err
	}
	release, lim, err := s.enterStream(jobStreams, sess.Tenant, id)
	if err != nil {
		return err
	}
	defer release()
	// Fail before the stream starts when the job is unknown.
	if _, err := s.sessions.ReadJob(r.Context(), tenant(r), id, r.PathValue("job"), off, eoff, 0); err != nil {
		return err
	}
	ev, err := newSSE(w, lim)
	if err != nil {
		return err
	}
	s.streamJob(w, r, id, r.PathValue("job"), off, eoff, ev, lim.MaxAge)
	return nil
}

// eventsStream replays the session's ledger and VM events (after
// Last-Event-ID, a ledger seq, or else only those newer than ?since=, an
// RFC 3339 time), then sends new ones as they come,
// about every 500 ms. It ends with an error event once the session is
// gone or after its MaxAge (StreamLimits).
func (s *Server) eventsStream(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var after int64
	// VM events carry no event id (Last-Event-ID stays a ledger seq): a
	// resumed stream sends those from the time of the last ledger entry
	// seen (one with that exact time may repeat), then those after the
	// last row it sent.
	var vmSince time.Time
	var vmAfter int64
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: Last-Event-ID %q must be a ledger sequence number", session.ErrBadRequest, last)
		}
		after = n
		if n > 0 {
			if es, err := s.sessions.EventsAfter(r.Context(), tenant(r), id, n-1); err == nil && len(es) > 0 && es[0].Seq == n {
				vmSince = es[0].Time.Add(-time.Nanosecond)
			}
		}
	} else if since, err := querySince(r); err != nil {
		return err
	} else if !since.IsZero() {
		if after, err = s.sessions.LedgerSeqBefore(r.Context(), tenant(r), id, since); err != nil {
			return err
		}
		vmSince = since
	}
	sess, err := s.sessions.Get(r.Context(), tenant(r), id)
	if err != nil {
		return err
	}
	release, lim, err := s.enterStream(eventStreams, sess.Tenant, id)
	if err != nil {
		return err
	}
	defer release()
	ev, err := newSSE(w, lim)
	if err != nil {
		return err
	}
	maxAge, deadline := lim.MaxAge, ev.end
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		entries, err := s.sessions.EventsAfter(r.Context(), tenant(r), id, after)
		if err != nil {
			ev.event("error", "", errorBody{Error: err.Error(), Code: errdefs.Code(err)})
			return nil
		}
		for _, e := range entries {
			if ev.event("ledger", strconv.FormatInt(e.Seq, 10), e) != nil {
				return nil // not read within the write limit, or gone
			}
			after = e.Seq
		}
		vms, err := s.sessions.VMEventsFor(r.Context(), tenant(r), id, vmAfter, vmSince)
		if err != nil {
			ev.event("error", "", errorBody{Error: err.Error(), Code: errdefs.Code(err)})
			return nil
		}
		for _, e := range vms {
			if ev.event("vm", "", e) != nil {
				return nil
			}
			vmAfter = e.ID
		}
		if sess, err := s.sessions.Get(r.Context(), tenant(r), id); err != nil || sess.State != session.StateRunning {
			ev.event("error", "", errorBody{Error: "the session ended", Code: errdefs.CodeSessionEnded})
			return nil
		}
		if time.Now().After(deadline) {
			ev.event("error", "", errorBody{Error: ageLimitMessage(maxAge, "reconnect"), Code: errdefs.CodeStreamMaxAge})
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}
