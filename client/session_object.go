package client

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"paddock.dev/paddock/api"
	guestapi "paddock.dev/paddock/guest/api"
)

// Session is one agent session seen as an object: a Client and a session
// id bound together, so a program writes s.Exec(ctx, ...) instead of
// c.Exec(ctx, id, ...). It is the same shape the Python and TypeScript
// SDKs give (a context manager there, `defer s.Close()` here). Every
// method hands its work to the Client method of the same verb; the
// Session keeps no state of its own beyond the id and the answer it was
// made from, so two Session values for one id are interchangeable.
type Session struct {
	// ID is the session's id.
	ID string
	// Info is the session as the API last described it to this object
	// (at create, fork or Refresh); nil for a Session made by
	// Client.Session until Refresh is called.
	Info *api.Session

	c *Client
}

// Session binds an existing session id to c. It does not ask the daemon:
// an unknown id shows up as not_found on the first call.
func (c *Client) Session(id string) *Session { return &Session{ID: id, c: c} }

// NewSession creates a session and returns it as a Session object
// (CreateSession returns the bare wire answer instead).
func (c *Client) NewSession(ctx context.Context, req api.CreateRequest) (*Session, error) {
	info, err := c.CreateSession(ctx, req)
	if err != nil {
		return nil, err
	}
	return c.sessionOf(info), nil
}

func (c *Client) sessionOf(info *api.Session) *Session {
	return &Session{ID: info.ID, Info: info, c: c}
}

// Client is the client this session talks through.
func (s *Session) Client() *Client { return s.c }

// Refresh asks the daemon for the session's current state and keeps it
// in Info.
func (s *Session) Refresh(ctx context.Context) (*api.Session, error) {
	info, err := s.c.GetSession(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	s.Info = info
	return info, nil
}

// Delete deletes the session and its sandbox.
func (s *Session) Delete(ctx context.Context) error { return s.c.DeleteSession(ctx, s.ID) }

// Close deletes the session, so `defer s.Close()` reads like the Python
// SDK's `with` block. A session already gone is not an error here, so a
// program may Delete explicitly and still defer Close. It waits at most a
// minute for the daemon.
func (s *Session) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var e *Error
	if err := s.Delete(ctx); err != nil && !(errors.As(err, &e) && e.Status == http.StatusNotFound) {
		return err
	}
	return nil
}

// Exec runs one command to its end and returns its buffered output.
func (s *Session) Exec(ctx context.Context, req api.ExecRequest) (*api.ExecResult, error) {
	return s.c.Exec(ctx, s.ID, req)
}

// Run is Exec of a bare command line with the default limits.
func (s *Session) Run(ctx context.Context, command string) (*api.ExecResult, error) {
	return s.c.Exec(ctx, s.ID, api.ExecRequest{Command: command})
}

// ExecStream runs one command and copies its output to stdout and
// stderr as it comes; it returns the exit code.
func (s *Session) ExecStream(ctx context.Context, req api.ExecRequest, stdout, stderr io.Writer) (int, error) {
	return s.c.ExecStream(ctx, s.ID, req, stdout, stderr)
}

// Checkpoint saves the session's state (req.Tag names it).
func (s *Session) Checkpoint(ctx context.Context, req api.CheckpointRequest) (*api.Checkpoint, error) {
	return s.c.Checkpoint(ctx, s.ID, -1, req)
}

// Restore returns the session to the checkpoint tag.
func (s *Session) Restore(ctx context.Context, tag string) (*api.Session, error) {
	info, err := s.c.Restore(ctx, s.ID, -1, tag)
	if err == nil {
		s.Info = info
	}
	return info, err
}

// Fork starts count children from the session's current state and
// returns them as Session objects, each to Close (or Promote) on its own.
func (s *Session) Fork(ctx context.Context, count int) ([]*Session, error) {
	kids, _, err := s.ForkWith(ctx, api.ForkRequest{Count: count})
	return kids, err
}

// ForkWith forks with the whole request (identity, a checkpoint to start
// from) and returns the children as Session objects beside the whole
// answer (whether they started from memory, the jobs not carried).
func (s *Session) ForkWith(ctx context.Context, req api.ForkRequest) ([]*Session, *api.ForkResult, error) {
	out, err := s.c.ForkWith(ctx, s.ID, -1, req)
	if err != nil {
		return nil, nil, err
	}
	kids := make([]*Session, 0, len(out.Children))
	for _, k := range out.Children {
		kids = append(kids, s.c.sessionOf(k))
	}
	return kids, out, nil
}

// Promote carries this fork child's workspace changes back to its parent
// (req.DryRun: only the plan).
func (s *Session) Promote(ctx context.Context, req api.PromoteRequest) (*api.PromoteResult, error) {
	return s.c.Promote(ctx, s.ID, req)
}

// Evaluate forks the session into candidates, runs each one's setup and
// the test, and names the winner (see Client.Evaluate).
func (s *Session) Evaluate(ctx context.Context, req EvaluateRequest) (*EvaluateResult, error) {
	return s.c.Evaluate(ctx, s.ID, req)
}

// Rollout forks the session into runs of one command (see Client.Rollout).
func (s *Session) Rollout(ctx context.Context, req RolloutRequest) (*RolloutResult, error) {
	return s.c.Rollout(ctx, s.ID, req)
}

// Replay runs the session's recorded commands again (see Client.Replay).
func (s *Session) Replay(ctx context.Context, req api.ReplayRequest) (*api.ReplayResult, error) {
	return s.c.Replay(ctx, s.ID, req)
}

// Rewind is the session's rewind config and its points, oldest first.
func (s *Session) Rewind(ctx context.Context) (*api.Rewind, error) { return s.c.Rewind(ctx, s.ID) }

// RewindConfig changes the session's rewind settings.
func (s *Session) RewindConfig(ctx context.Context, req api.RewindConfigRequest) (*api.Rewind, error) {
	return s.c.RewindConfig(ctx, s.ID, req)
}

// RewindUndo goes back to a rewind point.
func (s *Session) RewindUndo(ctx context.Context, req api.RewindUndoRequest) (*api.RewindUndo, error) {
	return s.c.RewindUndo(ctx, s.ID, req)
}

// RewindPin pins (or unpins) the rewind point tag.
func (s *Session) RewindPin(ctx context.Context, tag string, pinned bool) (*api.RewindPoint, error) {
	return s.c.RewindPin(ctx, s.ID, tag, pinned)
}

// RewindBisect searches the rewind points for the first one a test fails at.
func (s *Session) RewindBisect(ctx context.Context, req api.RewindBisectRequest) (*api.RewindBisect, error) {
	return s.c.RewindBisect(ctx, s.ID, req)
}

// RewindBranch forks a new session from a rewind point.
func (s *Session) RewindBranch(ctx context.Context, req api.RewindBranchRequest) (*api.RewindBranch, error) {
	return s.c.RewindBranch(ctx, s.ID, req)
}

// Speculate runs a command in a throwaway fork and keeps its changes as a
// changeset to review.
func (s *Session) Speculate(ctx context.Context, req api.SpeculateRequest) (*api.Changeset, error) {
	return s.c.Speculate(ctx, s.ID, req)
}

// Changesets lists the session's changesets.
func (s *Session) Changesets(ctx context.Context) ([]api.Changeset, error) {
	return s.c.Changesets(ctx, s.ID)
}

// Changeset is one changeset of the session.
func (s *Session) Changeset(ctx context.Context, cid string) (*api.Changeset, error) {
	return s.c.Changeset(ctx, s.ID, cid)
}

// DecideChangeset accepts or rejects (parts of) a changeset.
func (s *Session) DecideChangeset(ctx context.Context, cid string, d api.ChangesetDecision) (*api.Changeset, error) {
	return s.c.DecideChangeset(ctx, s.ID, cid, d)
}

// ApplyChangeset writes a decided changeset into the session.
func (s *Session) ApplyChangeset(ctx context.Context, cid string) (*api.ApplyResult, error) {
	return s.c.ApplyChangeset(ctx, s.ID, cid)
}

// Events returns the session's ledger.
func (s *Session) Events(ctx context.Context) ([]api.LedgerEntry, error) {
	return s.c.Events(ctx, s.ID)
}

// EventsSince returns the ledger entries and VM events newer than since.
func (s *Session) EventsSince(ctx context.Context, since time.Time) (*api.Events, error) {
	return s.c.EventsSince(ctx, s.ID, since)
}

// FollowEvents calls fn for each live event of the session (see
// Client.FollowEvents).
func (s *Session) FollowEvents(ctx context.Context, since time.Time, fn func(SessionEvent) error) error {
	return s.c.FollowEvents(ctx, s.ID, since, fn)
}

// Artifacts returns the workspace changes since the baseline.
func (s *Session) Artifacts(ctx context.Context) (*api.Artifacts, error) {
	return s.c.Artifacts(ctx, s.ID)
}

// Approvals lists the session's approval requests.
func (s *Session) Approvals(ctx context.Context) ([]api.Approval, error) {
	return s.c.Approvals(ctx, s.ID)
}

// Files is the file verbs of the session's sandbox.
func (s *Session) Files() Files { return Files{s: s} }

// Jobs is the background-job verbs of the session.
func (s *Session) Jobs() Jobs { return Jobs{s: s} }

// Files reads and writes files in a session's sandbox; get one from
// Session.Files.
type Files struct{ s *Session }

// Read returns the whole content of the file at path (at most
// api.MaxFileWriteBytes; larger files are read in ranges through Call).
func (f Files) Read(ctx context.Context, path string) ([]byte, error) {
	var out api.FileRead
	if err := f.s.c.Call(ctx, http.MethodGet, f.s.ID, "/files/content", url.Values{"path": {path}}, nil, &out); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(out.ContentBase64)
}

// Write writes data to the file at path, making missing parent
// directories; mode is octal ("0644") or "" for the default.
func (f Files) Write(ctx context.Context, path string, data []byte, mode string) (*guestapi.FileInfo, error) {
	if len(data) > api.MaxFileWriteBytes {
		return nil, errors.New("client: " + strconv.Itoa(len(data)) + " bytes is over the " + strconv.Itoa(api.MaxFileWriteBytes) + "-byte limit of one write; use an upload")
	}
	parents := true
	var out guestapi.FileInfo
	req := api.FileWrite{Path: path, ContentBase64: base64.StdEncoding.EncodeToString(data), Mode: mode, Parents: &parents}
	return &out, f.s.c.Call(ctx, http.MethodPut, f.s.ID, "/files/content", nil, req, &out)
}

// List lists the directory at path (or stats a single file).
func (f Files) List(ctx context.Context, path string) (*guestapi.Listing, error) {
	var out guestapi.Listing
	return &out, f.s.c.Call(ctx, http.MethodGet, f.s.ID, "/files", url.Values{"path": {path}}, nil, &out)
}

// Delete removes the file at path; recursive removes a directory tree.
func (f Files) Delete(ctx context.Context, path string, recursive bool) error {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	return f.s.c.Call(ctx, http.MethodDelete, f.s.ID, "/files", q, nil, nil)
}

// Jobs starts and drives background jobs in a session; get one from
// Session.Jobs.
type Jobs struct{ s *Session }

// Start starts a job.
func (j Jobs) Start(ctx context.Context, req api.JobStart) (*api.Job, error) {
	var out api.Job
	return &out, j.s.c.Call(ctx, http.MethodPost, j.s.ID, "/jobs", nil, req, &out)
}

// List lists the session's jobs.
func (j Jobs) List(ctx context.Context) ([]api.Job, error) {
	var out struct {
		Jobs []api.Job `json:"jobs"`
	}
	return out.Jobs, j.s.c.Call(ctx, http.MethodGet, j.s.ID, "/jobs", nil, nil, &out)
}

// Read returns a job's output from the offsets; a wait above zero waits
// (long poll, the daemon caps it at 25 s) for more when there is none.
func (j Jobs) Read(ctx context.Context, job string, offset, stderrOffset int64, wait time.Duration) (*api.JobRead, error) {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}, "stderr_offset": {strconv.FormatInt(stderrOffset, 10)}}
	if wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	var out api.JobRead
	return &out, j.s.c.Call(ctx, http.MethodGet, j.s.ID, "/jobs/"+url.PathEscape(job), q, nil, &out)
}

// Stdin writes to a job's stdin (req.Close closes it after).
func (j Jobs) Stdin(ctx context.Context, job string, req api.JobStdin) (*api.Job, error) {
	var out api.Job
	return &out, j.s.c.Call(ctx, http.MethodPost, j.s.ID, "/jobs/"+url.PathEscape(job)+"/stdin", nil, req, &out)
}

// Kill sends signal ("" is TERM) to a job.
func (j Jobs) Kill(ctx context.Context, job, signal string) (*api.Job, error) {
	q := url.Values{}
	if signal != "" {
		q.Set("signal", signal)
	}
	var out api.Job
	return &out, j.s.c.Call(ctx, http.MethodDelete, j.s.ID, "/jobs/"+url.PathEscape(job), q, nil, &out)
}
