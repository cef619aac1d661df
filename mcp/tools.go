package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	guestapi "paddock.dev/paddock/guest/api"
)

// Output bounds. A tool result goes into an agent's context window, so
// every tool cuts what it returns and says so in its description and in
// the result (a truncated flag, the bytes dropped, an offset to go on
// from).
const (
	// MaxStreamBytes is the most of each of stdout and stderr that
	// session_exec returns: the last bytes (the end of a command's output
	// is usually what matters).
	MaxStreamBytes = 16 << 10
	// MaxReadBytes is the most one session_file_read or session_job_read
	// returns of a file or of each job stream; the result gives the
	// offset to read on from.
	MaxReadBytes = 256 << 10
	// MaxWriteBytes is the largest content one write of a file takes in
	// one request (sandbox_write_file's limit, and session_file_write's up
	// to which the file goes in one PUT).
	MaxWriteBytes = 1 << 20
	// MaxUploadWriteBytes is the largest content session_file_write takes:
	// above MaxWriteBytes it goes through the API's resumable, verified
	// uploads in UploadChunkBytes chunks, with progress in bytes of the
	// total. Over HTTP the request body limit (DefaultHTTPMaxBody) is
	// sized to carry it as base64.
	MaxUploadWriteBytes = 8 << 20
	// UploadChunkBytes is one chunk of such an upload.
	UploadChunkBytes = 1 << 20
	// MaxListEntries is the most entries session_files and session_jobs
	// return.
	MaxListEntries = 500
	// MaxEvents is the most ledger entries session_events returns;
	// DefaultEvents when the input gives no limit.
	MaxEvents     = 200
	DefaultEvents = 50
	// MaxEventData is the most of one entry's data session_events
	// returns.
	MaxEventData = 2 << 10
	// MaxForkCount bounds the children one session_fork makes.
	MaxForkCount = 16
	// MaxRules bounds the process-policy patterns of a session_create.
	MaxRules = 64
	// MaxJobWaitMS bounds how long session_job_read waits for output.
	MaxJobWaitMS = 20000
)

// toolDef is one row of the table: a tool's name, who gets it, and how to
// add it to a server.
type toolDef struct {
	name string
	// write tools exist only with Options.AllowWrite.
	write bool
	// adminOnly tools are offered to the admin token alone.
	adminOnly bool
	// op is the session-token op the tool needs; "" means a session
	// token never gets the tool (the route needs a tenant's or the
	// admin's token).
	op       string
	register func(s *Server)
}

// handler is a tool's body: ctx carries the tool's name for the daemon's
// ledger.
type handler[In, Out any] func(ctx context.Context, s *Server, in In) (*Out, error)

// tool makes a table row for a typed handler. The SDK derives the input
// and output schemas from In and Out (field descriptions from their
// jsonschema tags), checks the input against its schema, and sends Out as
// the structured result.
func tool[In, Out any](name, desc string, write bool, op string, h handler[In, Out]) toolDef {
	return toolDef{name: name, write: write, op: op, register: func(s *Server) {
		t := &sdk.Tool{Name: name, Description: desc, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: !write}}
		sdk.AddTool(s.Server, t, func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, *Out, error) {
			stop := func() {}
			if !measured[name] {
				stop = heartbeat(ctx, req, name)
			}
			out, err := h(client.WithTool(context.WithValue(ctx, callKey{}, req), name), s, in)
			stop()
			if err != nil {
				return nil, nil, toolError(err)
			}
			return nil, out, nil
		})
	}}
}

// sessionInput is a tool input that names a session (through SessionRef).
type sessionInput interface{ sessionName() string }

func (r SessionRef) sessionName() string { return r.Session }

// onSession makes the handler of a tool on one session: it resolves the
// session the input names (or the server's default) before anything
// else, fails with that error when it cannot, and hands h the id.
func onSession[In sessionInput, Out any](h func(ctx context.Context, s *Server, id string, in In) (*Out, error)) handler[In, Out] {
	return func(ctx context.Context, s *Server, in In) (*Out, error) {
		id, err := s.session(in.sessionName())
		if err != nil {
			return nil, err
		}
		return h(ctx, s, id, in)
	}
}

// capList converts the first MaxListEntries of in with conv (an empty
// list, never nil, for none) and says whether it left any out.
func capList[T, U any](in []T, conv func(T) U) (out []U, truncated bool) {
	out = make([]U, 0, min(len(in), MaxListEntries))
	for _, x := range in {
		if len(out) == MaxListEntries {
			return out, true
		}
		out = append(out, conv(x))
	}
	return out, false
}

// progressEvery is how often a call whose client asked for progress (a
// progressToken) hears that its tool still runs.
var progressEvery = 5 * time.Second

// heartbeat sends a progress notification every progressEvery while a
// tool runs, when the call carries a progress token. Most tools cannot
// say how far they have got (a fork or an exec answers once, at the
// end), so the progress counts the notifications and the message says how
// long the tool has run; a client that resets its request timeout on
// progress keeps waiting for a long tool. The returned function stops it,
// and no notification follows the result.
func heartbeat(ctx context.Context, req *sdk.CallToolRequest, name string) (stop func()) {
	if req == nil || req.Params == nil || req.Session == nil {
		return func() {}
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		start := time.Now()
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(n),
					Message: fmt.Sprintf("%s still running after %s", name, time.Since(start).Round(time.Second))})
			}
		}
	}()
	return func() { close(done); <-finished }
}

// measured tools send progress with real numbers (progress of total)
// themselves instead of the heartbeat: a file write in bytes uploaded,
// evaluate and rollout in steps (the fork, each child's run, the deletes).
var measured = map[string]bool{"session_file_write": true, "session_evaluate": true, "session_rollout": true}

// callKey carries a tool call's request, for progress.
type callKey struct{}

// reportProgress tells the client of the call in ctx, when it asked for
// progress, that done of total is done.
func reportProgress(ctx context.Context, done, total int64, msg string) {
	req, _ := ctx.Value(callKey{}).(*sdk.CallToolRequest)
	if req == nil || req.Params == nil || req.Session == nil {
		return
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return
	}
	req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(done), Total: float64(total), Message: msg})
}

// stepProgress passes an orchestration's steps (client.ProgressFunc) on
// to the client of the call in ctx as progress of total.
func stepProgress(ctx context.Context) client.ProgressFunc {
	return func(done, total int, msg string) {
		reportProgress(ctx, int64(done), int64(total), msg)
	}
}

func adminOnly(d toolDef) toolDef { d.adminOnly = true; return d }

// toolTable is every tool, in the order a client lists them.
func toolTable() []toolDef {
	t := []toolDef{
		tool("session_list", "List the live sessions this token can reach, oldest first (at most 500).", false, "", sessionList),
		tool("session_get", "Show one session: its state, revision, runtime, checkpoints, children and usage.", false, api.OpRead, onSession(sessionGet)),
		tool("session_create", "Create a sandbox session and return its id. Give the id as \"session\" to the other tools.", true, "", sessionCreate),
		tool("session_exec", fmt.Sprintf("Run a shell command in the session's sandbox and return its exit code and output. "+
			"Only the last %d KiB of stdout and of stderr come back (truncated and the dropped byte counts say when more was cut). "+
			"A command the policy holds for approval fails with its approval id: call again with approval_id (and approval_wait_seconds to wait for the decision).",
			MaxStreamBytes>>10), true, api.OpExec, onSession(sessionExec)),
		tool("session_approvals", "List the session's approval requests (pending, approved, denied, consumed, expired).", false, api.OpRead, onSession(sessionApprovals)),
		adminOnly(tool("session_approve", "Approve (or, with deny, refuse) a command held for approval. Admin only.", true, "", onSession(sessionApprove))),
		tool("session_jobs", fmt.Sprintf("List the session's background jobs (at most %d).", MaxListEntries), false, api.OpJobs, onSession(sessionJobs)),
		tool("session_job_start", "Start a supervised background job (a shell command) and return its id; read its output with session_job_read.", true, api.OpJobs, onSession(sessionJobStart)),
		tool("session_job_read", fmt.Sprintf("Read a job's output from the given offsets, waiting up to wait_ms for new output. "+
			"At most %d KiB of each stream per call; continue from next_offset and stderr_next_offset. eof says the job ended.", MaxReadBytes>>10), false, api.OpJobs, onSession(sessionJobRead)),
		tool("session_job_stdin", "Write text to a job's stdin (a job started with stdin true); close sends end-of-file.", true, api.OpJobs, onSession(sessionJobStdin)),
		tool("session_job_kill", "Send a signal (default TERM) to a job's whole process tree.", true, api.OpJobs, onSession(sessionJobKill)),
		tool("session_files", fmt.Sprintf("List a directory in the session's sandbox (or stat a file); at most %d entries.", MaxListEntries), false, api.OpFilesRead, onSession(sessionFiles)),
		tool("session_file_read", fmt.Sprintf("Read a file in the session's sandbox from offset, at most %d KiB per call (length may ask for less). "+
			"Text comes as content; other bytes as content_base64. eof false means more remains: read on from next_offset.", MaxReadBytes>>10), false, api.OpFilesRead, onSession(sessionFileRead)),
		tool("session_file_write", fmt.Sprintf("Write a file in the session's sandbox (parents are made). Content is text, or base64 in content_base64; at most %d MiB "+
			"(above %d KiB it goes through a resumable, SHA-256-verified upload, with progress in bytes).",
			MaxUploadWriteBytes>>20, MaxWriteBytes>>10), true, api.OpFilesWrite, onSession(sessionFileWrite)),
		tool("session_checkpoint", "Take a checkpoint of the session under a tag, to restore or fork from later.", true, api.OpCheckpoint, onSession(sessionCheckpoint)),
		tool("session_restore", "Put the session back to one of its checkpoints (its files, and its memory when the checkpoint has it).", true, "", onSession(sessionRestore)),
		tool("session_fork", fmt.Sprintf("Fork the session into count children (at most %d) that start from its state now or from a checkpoint; returns their ids.", MaxForkCount), true, "", onSession(sessionFork)),
		tool("session_promote", "Carry a fork child's workspace changes back to its parent. dry_run shows the plan; give its plan_id back to apply exactly that plan.", true, "", onSession(sessionPromote)),
		tool("session_events", fmt.Sprintf("Read the session's audit ledger, newest last: the newest limit entries (default %d, at most %d), or with after the entries after that seq, oldest first (next and more say how to go on); each entry's data cut at %d bytes.",
			DefaultEvents, MaxEvents, MaxEventData), false, api.OpRead, onSession(sessionEvents)),
		tool("session_delete", "Delete the session and its sandbox (it cannot be undone).", true, "", onSession(sessionDelete)),
	}
	t = append(t, moreTools()...)
	t = append(t, sandboxTools()...)
	return append(t, changesetTools()...)
}

// SessionRef names the session a tool works on.
type SessionRef struct {
	Session string `json:"session,omitempty" jsonschema:"the session id (ses-…); empty means the server's default session"`
}

// --- sessions

type ListIn struct{}

type SessionSummary struct {
	ID       string `json:"id"`
	Agent    string `json:"agent"`
	State    string `json:"state"`
	Backend  string `json:"backend"`
	Revision int64  `json:"revision"`
	Parent   string `json:"parent,omitempty"`
	Created  string `json:"created_at"`
	Expires  string `json:"expires_at"`
}

type ListOut struct {
	Sessions  []SessionSummary `json:"sessions"`
	Truncated bool             `json:"truncated"`
}

func summary(x *api.Session) SessionSummary {
	return SessionSummary{ID: x.ID, Agent: x.Agent, State: x.State, Backend: x.Backend, Revision: x.Revision, Parent: x.Parent,
		Created: x.CreatedAt.UTC().Format(time.RFC3339), Expires: x.ExpiresAt.UTC().Format(time.RFC3339)}
}

func sessionList(ctx context.Context, s *Server, _ ListIn) (*ListOut, error) {
	all, err := s.c.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := &ListOut{}
	out.Sessions, out.Truncated = capList(all, summary)
	return out, nil
}

type SessionOut struct {
	SessionSummary
	Image       string   `json:"image"`
	Workspace   string   `json:"workspace"`
	Checkpoints []string `json:"checkpoints"`
	Children    []string `json:"children"`
	Execs       int64    `json:"execs"`
	ComputeMS   int64    `json:"compute_ms"`
}

func sessionOut(x *api.Session) *SessionOut {
	o := &SessionOut{SessionSummary: summary(x), Image: x.Runtime.Image, Workspace: x.Workspace.Path,
		Checkpoints: []string{}, Children: append([]string{}, x.Children...), Execs: x.Usage.Execs, ComputeMS: x.Usage.ComputeMS}
	for _, c := range x.Checkpoints {
		o.Checkpoints = append(o.Checkpoints, c.Tag)
	}
	return o
}

func sessionGet(ctx context.Context, s *Server, id string, in SessionRef) (*SessionOut, error) {
	x, err := s.c.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	return sessionOut(x), nil
}

type CreateIn struct {
	Agent      string `json:"agent,omitempty" jsonschema:"a name for the agent using the session (default mcp)"`
	Image      string `json:"image,omitempty" jsonschema:"the sandbox image; empty means the daemon's default"`
	Backend    string `json:"backend,omitempty" jsonschema:"the backend (procbox, qemu); empty means the daemon's default"`
	Git        string `json:"git,omitempty" jsonschema:"an https:// git URL cloned into the workspace at create"`
	TTLSeconds int    `json:"ttl_seconds,omitempty" jsonschema:"seconds until the session expires; 0 means the daemon's default"`
	// A session may be made stricter than the daemon's policy: commands
	// it refuses or holds for approval, and a cap on its commands.
	Allow    []string `json:"allow,omitempty" jsonschema:"process policy: command patterns allowed (with allow set, nothing else runs)"`
	Deny     []string `json:"deny,omitempty" jsonschema:"process policy: command patterns refused"`
	Ask      []string `json:"ask,omitempty" jsonschema:"process policy: command patterns held until an operator approves"`
	MaxExecs int64    `json:"max_execs,omitempty" jsonschema:"budget: the most commands session_exec may run in the session; 0 means no limit"`
}

func sessionCreate(ctx context.Context, s *Server, in CreateIn) (*SessionOut, error) {
	if in.Agent == "" {
		in.Agent = "mcp"
	}
	if in.TTLSeconds < 0 {
		return nil, fmt.Errorf("invalid_argument: ttl_seconds must not be negative")
	}
	if in.MaxExecs < 0 || len(in.Allow)+len(in.Deny)+len(in.Ask) > MaxRules {
		return nil, fmt.Errorf("invalid_argument: max_execs must not be negative, and allow, deny and ask hold at most %d patterns together", MaxRules)
	}
	req := api.CreateRequest{Agent: in.Agent, TTLSeconds: in.TTLSeconds,
		Runtime: api.Runtime{Image: in.Image, Backend: in.Backend}, Workspace: api.WorkspaceRequest{Git: in.Git}}
	if len(in.Allow)+len(in.Deny)+len(in.Ask) > 0 {
		req.Policy = &api.PolicyRequest{Process: &api.ProcessRules{Allow: in.Allow, Deny: in.Deny, Ask: in.Ask}}
	}
	if in.MaxExecs > 0 {
		req.Budget = &api.Budget{MaxExecs: &in.MaxExecs}
	}
	x, err := s.c.CreateSession(ctx, req)
	if err != nil {
		return nil, err
	}
	return sessionOut(x), nil
}

type DeleteOut struct {
	Deleted string `json:"deleted"`
}

func sessionDelete(ctx context.Context, s *Server, id string, in SessionRef) (*DeleteOut, error) {
	if err := s.c.DeleteSession(ctx, id); err != nil {
		return nil, err
	}
	return &DeleteOut{Deleted: id}, nil
}

// --- exec and approvals

type ExecIn struct {
	SessionRef
	Command             string `json:"command" jsonschema:"the shell command line to run"`
	TimeoutSeconds      int    `json:"timeout_seconds,omitempty" jsonschema:"seconds before the command is killed; 0 means the daemon's default"`
	ApprovalID          string `json:"approval_id,omitempty" jsonschema:"an approval id from an earlier call held for approval: spends that approval on this same command"`
	ApprovalWaitSeconds int    `json:"approval_wait_seconds,omitempty" jsonschema:"seconds (at most 120) to wait for an operator to decide a command held for approval"`
}

type ExecOut struct {
	ExitCode      int    `json:"exit_code"`
	Signal        string `json:"signal,omitempty"`
	TimedOut      bool   `json:"timed_out"`
	Stdout        string `json:"stdout"`
	Stderr        string `json:"stderr"`
	Truncated     bool   `json:"truncated" jsonschema:"true when some output was cut (by the daemon's cap or this tool's)"`
	StdoutDropped int64  `json:"stdout_dropped_bytes" jsonschema:"bytes of stdout not returned (the start of it)"`
	StderrDropped int64  `json:"stderr_dropped_bytes" jsonschema:"bytes of stderr not returned (the start of it)"`
	DurationMS    int64  `json:"duration_ms"`
}

func checkWait(secs int) error {
	if secs < 0 || secs > api.MaxApprovalWaitSeconds {
		return fmt.Errorf("invalid_argument: approval_wait_seconds must be 0 to %d", api.MaxApprovalWaitSeconds)
	}
	return nil
}

func sessionExec(ctx context.Context, s *Server, id string, in ExecIn) (*ExecOut, error) {
	if in.Command == "" {
		return nil, fmt.Errorf("invalid_argument: command is empty")
	}
	if err := checkWait(in.ApprovalWaitSeconds); err != nil {
		return nil, err
	}
	r, err := s.c.Exec(ctx, id, api.ExecRequest{Command: in.Command, TimeoutSeconds: in.TimeoutSeconds,
		ApprovalID: in.ApprovalID, ApprovalWaitSeconds: in.ApprovalWaitSeconds})
	if err != nil {
		return nil, err
	}
	return execOut(r), nil
}

// execOut is a command's result with each stream cut to its last
// MaxStreamBytes.
func execOut(r *api.ExecResult) *ExecOut {
	out := &ExecOut{ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut, Truncated: r.Truncated,
		StdoutDropped: r.StdoutDropped, StderrDropped: r.StderrDropped, DurationMS: r.DurationMS}
	var cut bool
	out.Stdout, cut = tail(r.Stdout, MaxStreamBytes, &out.StdoutDropped)
	out.Truncated = out.Truncated || cut
	out.Stderr, cut = tail(r.Stderr, MaxStreamBytes, &out.StderrDropped)
	out.Truncated = out.Truncated || cut
	return out
}

// tail keeps the last n bytes of s (on a rune boundary), adding what it
// cut to *dropped.
func tail(s string, n int, dropped *int64) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	*dropped += int64(i)
	return s[i:], true
}

type ApprovalsOut struct {
	Approvals []ApprovalOut `json:"approvals"`
}

type ApprovalOut struct {
	ID        string `json:"id"`
	Command   string `json:"command"`
	Summary   string `json:"summary"`
	Matched   string `json:"matched"`
	State     string `json:"state"`
	Requester string `json:"requester"`
	Decider   string `json:"decider,omitempty"`
	Note      string `json:"note,omitempty"`
	ExpiresAt string `json:"expires_at"`
}

func approvalOut(a api.Approval) ApprovalOut {
	return ApprovalOut{ID: a.ID, Command: a.Command, Summary: a.Summary, Matched: a.Matched, State: a.State,
		Requester: a.Requester, Decider: a.Decider, Note: a.Note, ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339)}
}

func sessionApprovals(ctx context.Context, s *Server, id string, in SessionRef) (*ApprovalsOut, error) {
	as, err := s.c.Approvals(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &ApprovalsOut{Approvals: []ApprovalOut{}}
	for _, a := range as[max(0, len(as)-MaxListEntries):] {
		out.Approvals = append(out.Approvals, approvalOut(a))
	}
	return out, nil
}

type ApproveIn struct {
	SessionRef
	ApprovalID string `json:"approval_id" jsonschema:"the approval request's id (apr-…)"`
	Deny       bool   `json:"deny,omitempty" jsonschema:"refuse the request instead of approving it"`
	Note       string `json:"note,omitempty" jsonschema:"why, recorded in the ledger"`
}

func sessionApprove(ctx context.Context, s *Server, id string, in ApproveIn) (*ApprovalOut, error) {
	if in.ApprovalID == "" {
		return nil, fmt.Errorf("invalid_argument: approval_id is empty")
	}
	decide := s.c.Approve
	if in.Deny {
		decide = s.c.Deny
	}
	a, err := decide(ctx, id, in.ApprovalID, in.Note)
	if err != nil {
		return nil, err
	}
	o := approvalOut(*a)
	return &o, nil
}

// --- jobs

type JobOut struct {
	ID           string `json:"id"`
	Command      string `json:"command"`
	State        string `json:"state"`
	ExitCode     *int   `json:"exit_code,omitempty"`
	Signal       string `json:"signal,omitempty"`
	StdoutBytes  int64  `json:"stdout_bytes"`
	StderrBytes  int64  `json:"stderr_bytes"`
	DroppedBytes int64  `json:"dropped_bytes"`
	Stdin        bool   `json:"stdin"`
}

func jobOut(j api.Job) JobOut {
	return JobOut{ID: j.ID, Command: j.Command, State: j.State, ExitCode: j.ExitCode, Signal: j.Signal,
		StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes, DroppedBytes: j.DroppedBytes, Stdin: j.Stdin}
}

type JobsOut struct {
	Jobs      []JobOut `json:"jobs"`
	Truncated bool     `json:"truncated"`
}

func sessionJobs(ctx context.Context, s *Server, id string, in SessionRef) (*JobsOut, error) {
	var l struct {
		Jobs []api.Job `json:"jobs"`
	}
	if err := s.c.Call(ctx, http.MethodGet, id, "/jobs", nil, nil, &l); err != nil {
		return nil, err
	}
	out := &JobsOut{}
	out.Jobs, out.Truncated = capList(l.Jobs, jobOut)
	return out, nil
}

type JobStartIn struct {
	SessionRef
	Command             string `json:"command" jsonschema:"the shell command line to run in the background"`
	Stdin               bool   `json:"stdin,omitempty" jsonschema:"give the job a stdin to write with session_job_stdin"`
	TimeoutSeconds      int    `json:"timeout_seconds,omitempty" jsonschema:"seconds before the job is killed; 0 means none"`
	ApprovalID          string `json:"approval_id,omitempty" jsonschema:"an approval id from an earlier call held for approval"`
	ApprovalWaitSeconds int    `json:"approval_wait_seconds,omitempty" jsonschema:"seconds (at most 120) to wait for an operator to decide a command held for approval"`
}

func sessionJobStart(ctx context.Context, s *Server, id string, in JobStartIn) (*JobOut, error) {
	if in.Command == "" {
		return nil, fmt.Errorf("invalid_argument: command is empty")
	}
	if err := checkWait(in.ApprovalWaitSeconds); err != nil {
		return nil, err
	}
	var j api.Job
	if err := s.c.Call(ctx, http.MethodPost, id, "/jobs", nil, api.JobStart{Command: in.Command, Stdin: in.Stdin, TimeoutSeconds: in.TimeoutSeconds,
		ApprovalID: in.ApprovalID, ApprovalWaitSeconds: in.ApprovalWaitSeconds}, &j); err != nil {
		return nil, err
	}
	o := jobOut(j)
	return &o, nil
}

type JobRef struct {
	SessionRef
	Job string `json:"job" jsonschema:"the job id"`
}

type JobReadIn struct {
	JobRef
	Offset       int64 `json:"offset,omitempty" jsonschema:"the stdout byte to read from (next_offset of the last read)"`
	StderrOffset int64 `json:"stderr_offset,omitempty" jsonschema:"the stderr byte to read from (stderr_next_offset of the last read)"`
	WaitMS       int   `json:"wait_ms,omitempty" jsonschema:"milliseconds (at most 20000) to wait for new output when there is none yet"`
}

type JobReadOut struct {
	JobOut
	Stdout           string `json:"stdout"`
	StdoutBase64     string `json:"stdout_base64,omitempty" jsonschema:"stdout as base64 when it is not UTF-8 text"`
	NextOffset       int64  `json:"next_offset"`
	Stderr           string `json:"stderr"`
	StderrNextOffset int64  `json:"stderr_next_offset"`
	More             bool   `json:"more" jsonschema:"more output is ready to read now"`
	EOF              bool   `json:"eof" jsonschema:"the job ended and all its output was read"`
	Truncated        bool   `json:"truncated" jsonschema:"the job's output passed its cap and some was dropped"`
}

func sessionJobRead(ctx context.Context, s *Server, id string, in JobReadIn) (*JobReadOut, error) {
	if in.Job == "" {
		return nil, fmt.Errorf("invalid_argument: job is empty")
	}
	if in.Offset < 0 || in.StderrOffset < 0 || in.WaitMS < 0 || in.WaitMS > MaxJobWaitMS {
		return nil, fmt.Errorf("invalid_argument: offsets must not be negative and wait_ms must be 0 to %d", MaxJobWaitMS)
	}
	q := url.Values{"offset": {strconv.FormatInt(in.Offset, 10)}, "stderr_offset": {strconv.FormatInt(in.StderrOffset, 10)},
		"wait_ms": {strconv.Itoa(in.WaitMS)}}
	var r api.JobRead
	if err := s.c.Call(ctx, http.MethodGet, id, "/jobs/"+url.PathEscape(in.Job), q, nil, &r); err != nil {
		return nil, err
	}
	raw, err := base64.StdEncoding.DecodeString(r.OutputBase64)
	if err != nil {
		return nil, fmt.Errorf("internal: the daemon sent bad base64 output: %w", err)
	}
	out := &JobReadOut{JobOut: jobOut(r.Job), NextOffset: r.NextOffset, StderrNextOffset: r.StderrNextOffset, More: r.More, EOF: r.EOF, Truncated: r.Truncated}
	// A read longer than the bound is cut at its head, and the next
	// offsets point just past what is returned, so nothing is skipped.
	if len(raw) > MaxReadBytes {
		raw = raw[:MaxReadBytes]
		out.NextOffset = in.Offset + MaxReadBytes
		out.More, out.EOF = true, false
	}
	// Text cut in the middle of a character (by the bound, or because the
	// job has not written the rest yet) comes back without the partial
	// character, which the next read starts with.
	if k := textPrefix(raw, r.EOF); k >= 0 {
		if k < len(raw) {
			out.NextOffset = in.Offset + int64(k)
		}
		out.Stdout = string(raw[:k])
	} else {
		out.StdoutBase64 = base64.StdEncoding.EncodeToString(raw)
	}
	se := []byte(r.Stderr)
	if len(se) > MaxReadBytes {
		se = se[:MaxReadBytes]
		out.StderrNextOffset = in.StderrOffset + MaxReadBytes
		out.More, out.EOF = true, false
	}
	k := textPrefix(se, r.EOF)
	if k < 0 {
		k = len(se) // the API sends stderr as text already
	} else if k < len(se) {
		out.StderrNextOffset = in.StderrOffset + int64(k)
	}
	out.Stderr = string(se[:k])
	if out.NextOffset != r.NextOffset || out.StderrNextOffset != r.StderrNextOffset {
		out.More, out.EOF = true, false
	}
	return out, nil
}

// textPrefix is how much of b to return as text: all of it when it is
// UTF-8; all but its last one to three bytes when they are the start of a
// character cut short and the stream goes on (not at its end, and some
// text is left, so a reader always moves on); -1 when it is not text.
func textPrefix(b []byte, end bool) int {
	if utf8.Valid(b) {
		return len(b)
	}
	if end {
		return -1
	}
	for k := len(b) - 1; k >= 1 && k >= len(b)-3; k-- {
		if utf8.RuneStart(b[k]) {
			if utf8.Valid(b[:k]) && !utf8.FullRune(b[k:]) {
				return k
			}
			break
		}
	}
	return -1
}

type JobStdinIn struct {
	JobRef
	Text  string `json:"text,omitempty" jsonschema:"text to write to the job's stdin"`
	Close bool   `json:"close,omitempty" jsonschema:"close the job's stdin after writing"`
}

type OKOut struct {
	OK bool `json:"ok"`
}

func sessionJobStdin(ctx context.Context, s *Server, id string, in JobStdinIn) (*OKOut, error) {
	if in.Job == "" {
		return nil, fmt.Errorf("invalid_argument: job is empty")
	}
	if len(in.Text) > MaxWriteBytes {
		return nil, fmt.Errorf("too_large: text is %d bytes, at most %d", len(in.Text), MaxWriteBytes)
	}
	if err := s.c.Call(ctx, http.MethodPost, id, "/jobs/"+url.PathEscape(in.Job)+"/stdin", nil, api.JobStdin{Text: in.Text, Close: in.Close}, nil); err != nil {
		return nil, err
	}
	return &OKOut{OK: true}, nil
}

type JobKillIn struct {
	JobRef
	Signal string `json:"signal,omitempty" jsonschema:"TERM (the default), KILL, INT, HUP, …"`
}

func sessionJobKill(ctx context.Context, s *Server, id string, in JobKillIn) (*OKOut, error) {
	if in.Job == "" {
		return nil, fmt.Errorf("invalid_argument: job is empty")
	}
	if in.Signal == "" {
		in.Signal = "TERM"
	}
	if err := s.c.Call(ctx, http.MethodDelete, id, "/jobs/"+url.PathEscape(in.Job), url.Values{"signal": {in.Signal}}, nil, nil); err != nil {
		return nil, err
	}
	return &OKOut{OK: true}, nil
}

// --- files

type FilesIn struct {
	SessionRef
	Path string `json:"path,omitempty" jsonschema:"the directory or file; empty means the workspace"`
}

type FileEntry struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode"`
	Target string `json:"target,omitempty"`
}

type FilesOut struct {
	Kind      string      `json:"kind" jsonschema:"dir for a listing, file for a single stat"`
	Path      string      `json:"path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

func sessionFiles(ctx context.Context, s *Server, id string, in FilesIn) (*FilesOut, error) {
	path := in.Path
	if path == "" {
		x, err := s.c.GetSession(ctx, id)
		if err != nil {
			return nil, err
		}
		path = x.Workspace.Path
	}
	var l guestapi.Listing
	if err := s.c.Call(ctx, http.MethodGet, id, "/files", url.Values{"path": {path}}, nil, &l); err != nil {
		return nil, err
	}
	out := &FilesOut{Kind: l.Kind, Path: l.Path}
	var cut bool
	out.Entries, cut = capList(l.Entries, func(e guestapi.FileInfo) FileEntry {
		return FileEntry{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size, Mode: e.Mode, Target: e.Target}
	})
	out.Truncated = l.Truncated || cut
	return out, nil
}

type FileReadIn struct {
	SessionRef
	Path   string `json:"path" jsonschema:"the file to read"`
	Offset int64  `json:"offset,omitempty" jsonschema:"the byte to start at"`
	Length int    `json:"length,omitempty" jsonschema:"the most bytes to return (at most 262144, the default)"`
}

type FileReadOut struct {
	Path          string `json:"path"`
	Content       string `json:"content" jsonschema:"the bytes read, when they are UTF-8 text"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the bytes read as base64, when they are not UTF-8 text"`
	Offset        int64  `json:"offset"`
	Length        int    `json:"length"`
	Size          int64  `json:"size" jsonschema:"the whole file's size"`
	NextOffset    int64  `json:"next_offset"`
	EOF           bool   `json:"eof" jsonschema:"true when the read reached the end of the file"`
}

func sessionFileRead(ctx context.Context, s *Server, id string, in FileReadIn) (*FileReadOut, error) {
	if err := checkRead(in.Path, in.Offset, &in.Length); err != nil {
		return nil, err
	}
	q := url.Values{"path": {in.Path}, "offset": {strconv.FormatInt(in.Offset, 10)}, "length": {strconv.Itoa(in.Length)}}
	var r api.FileRange
	if err := s.c.Call(ctx, http.MethodGet, id, "/files/range", q, nil, &r); err != nil {
		return nil, err
	}
	raw, err := base64.StdEncoding.DecodeString(r.DataBase64)
	if err != nil {
		return nil, fmt.Errorf("internal: the daemon sent bad base64: %w", err)
	}
	// A text file read in parts may stop in the middle of a character:
	// that character comes whole with the next part.
	if k := textPrefix(raw, r.EOF); k >= 0 {
		raw = raw[:k]
	}
	return fileReadOut(r.Path, r.Offset, raw, r.Size, r.EOF), nil
}

// checkRead checks a file read's path, offset and length, and sets a
// length of 0 to the default, MaxReadBytes.
func checkRead(path string, offset int64, length *int) error {
	if path == "" {
		return fmt.Errorf("invalid_argument: path is empty")
	}
	if *length == 0 {
		*length = MaxReadBytes
	}
	if offset < 0 || *length < 0 || *length > MaxReadBytes {
		return fmt.Errorf("invalid_argument: offset must not be negative and length must be 1 to %d", MaxReadBytes)
	}
	return nil
}

// fileReadOut is the result of reading part of a file of size bytes from
// off: text as content, other bytes as content_base64.
func fileReadOut(path string, off int64, part []byte, size int64, eof bool) *FileReadOut {
	out := &FileReadOut{Path: path, Offset: off, Length: len(part), Size: size, NextOffset: off + int64(len(part)), EOF: eof}
	if utf8.Valid(part) {
		out.Content = string(part)
	} else {
		out.ContentBase64 = base64.StdEncoding.EncodeToString(part)
	}
	return out
}

type FileWriteIn struct {
	SessionRef
	Path          string `json:"path" jsonschema:"the file to write (absolute, or relative to the workspace)"`
	Content       string `json:"content,omitempty" jsonschema:"the file's text"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file's bytes as base64, instead of content"`
	Mode          string `json:"mode,omitempty" jsonschema:"octal permission bits, e.g. 0755"`
}

// content is a file write's bytes: text, or base64, at most MaxWriteBytes.
func content(path, text, b64 string) ([]byte, error) {
	return contentMax(path, text, b64, MaxWriteBytes)
}

// contentMax is content with max bytes at most.
func contentMax(path, text, b64 string, max int) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("invalid_argument: path is empty")
	}
	if text != "" && b64 != "" {
		return nil, fmt.Errorf("invalid_argument: give content or content_base64, not both")
	}
	data := []byte(text)
	if b64 != "" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return nil, fmt.Errorf("invalid_argument: content_base64: %v", err)
		}
	}
	if len(data) > max {
		return nil, fmt.Errorf("too_large: the content is %d bytes; this tool writes at most %d", len(data), max)
	}
	return data, nil
}

type FileWriteOut struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
	// Upload and Verified are set when the file went through a resumable
	// upload (above MaxWriteBytes): its id, and whether its SHA-256 was
	// checked.
	Upload   string `json:"upload,omitempty"`
	Verified bool   `json:"verified,omitempty"`
}

func sessionFileWrite(ctx context.Context, s *Server, id string, in FileWriteIn) (*FileWriteOut, error) {
	data, err := contentMax(in.Path, in.Content, in.ContentBase64, MaxUploadWriteBytes)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxWriteBytes {
		return uploadFile(ctx, s, id, in, data)
	}
	if err := s.c.Call(ctx, http.MethodPut, id, "/files/content", nil,
		api.FileWrite{Path: in.Path, ContentBase64: base64.StdEncoding.EncodeToString(data), Mode: in.Mode}, nil); err != nil {
		return nil, err
	}
	return &FileWriteOut{Path: in.Path, Bytes: len(data)}, nil
}

// uploadFile writes data through the API's resumable upload: open it
// with the size and SHA-256, send UploadChunkBytes at a time from where
// the daemon says it has got to (progress: bytes of the total), then
// complete it, which checks the hash. An upload that fails part way is
// deleted so it holds no space.
func uploadFile(ctx context.Context, s *Server, id string, in FileWriteIn, data []byte) (*FileWriteOut, error) {
	sum := sha256.Sum256(data)
	var up api.Upload
	if err := s.c.Call(ctx, http.MethodPost, id, "/uploads", nil,
		api.UploadRequest{Path: in.Path, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Mode: in.Mode}, &up); err != nil {
		return nil, err
	}
	abort := func(err error) (*FileWriteOut, error) {
		_ = s.c.Call(context.WithoutCancel(ctx), http.MethodDelete, id, "/uploads/"+url.PathEscape(up.ID), nil, nil, nil)
		return nil, err
	}
	total := int64(len(data))
	for off := up.Received; off < total; {
		end := min(off+UploadChunkBytes, total)
		got, err := s.c.UploadChunk(ctx, id, up.ID, off, data[off:end])
		if err != nil {
			return abort(err)
		}
		if got.Received <= off {
			return abort(fmt.Errorf("unavailable: the upload did not move past byte %d", off))
		}
		off = got.Received
		reportProgress(ctx, off, total, fmt.Sprintf("uploaded %d of %d bytes", off, total))
	}
	var done api.Upload
	if err := s.c.Call(ctx, http.MethodPost, id, "/uploads/"+url.PathEscape(up.ID)+"/complete", nil, nil, &done); err != nil {
		return abort(err)
	}
	return &FileWriteOut{Path: in.Path, Bytes: len(data), Upload: done.ID, Verified: done.Verified}, nil
}

// --- checkpoints, fork, promote

type CheckpointIn struct {
	SessionRef
	Tag    string `json:"tag" jsonschema:"a name for the checkpoint, unique in the session"`
	Memory *bool  `json:"memory,omitempty" jsonschema:"also keep the running processes (on backends that can); the default is the backend's"`
}

type CheckpointOut struct {
	Tag       string `json:"tag"`
	Memory    bool   `json:"memory"`
	CreatedAt string `json:"created_at"`
}

func sessionCheckpoint(ctx context.Context, s *Server, id string, in CheckpointIn) (*CheckpointOut, error) {
	if in.Tag == "" {
		return nil, fmt.Errorf("invalid_argument: tag is empty")
	}
	c, err := s.c.Checkpoint(ctx, id, -1, api.CheckpointRequest{Tag: in.Tag, Memory: in.Memory})
	if err != nil {
		return nil, err
	}
	return &CheckpointOut{Tag: c.Tag, Memory: c.Memory, CreatedAt: c.CreatedAt.UTC().Format(time.RFC3339)}, nil
}

type RestoreIn struct {
	SessionRef
	Tag string `json:"tag" jsonschema:"the checkpoint to go back to"`
}

func sessionRestore(ctx context.Context, s *Server, id string, in RestoreIn) (*SessionOut, error) {
	if in.Tag == "" {
		return nil, fmt.Errorf("invalid_argument: tag is empty")
	}
	x, err := s.c.Restore(ctx, id, -1, in.Tag)
	if err != nil {
		return nil, err
	}
	return sessionOut(x), nil
}

type ForkIn struct {
	SessionRef
	Count    int    `json:"count,omitempty" jsonschema:"how many children (1 to 16, default 1)"`
	From     string `json:"from,omitempty" jsonschema:"a checkpoint tag to start the children from; empty means the state now"`
	Identity string `json:"identity,omitempty" jsonschema:"best-effort (default), unique or preserve: whether children get host names and machine ids of their own"`
}

type ForkOut struct {
	Children     []string `json:"children"`
	Memory       bool     `json:"memory" jsonschema:"the children carry on the parent's running processes"`
	NotCarried   []string `json:"not_carried_jobs" jsonschema:"ids of the parent's running jobs the children do not have"`
	IdentityNote string   `json:"identity_note,omitempty"`
}

func sessionFork(ctx context.Context, s *Server, id string, in ForkIn) (*ForkOut, error) {
	if in.Count == 0 {
		in.Count = 1
	}
	if in.Count < 1 || in.Count > MaxForkCount {
		return nil, fmt.Errorf("invalid_argument: count must be 1 to %d", MaxForkCount)
	}
	r, err := s.c.ForkWith(ctx, id, -1, api.ForkRequest{Count: in.Count, From: in.From, Identity: in.Identity})
	if err != nil {
		return nil, err
	}
	out := &ForkOut{Children: []string{}, Memory: r.Memory, NotCarried: []string{}, IdentityNote: r.IdentityNote}
	for _, c := range r.Children {
		out.Children = append(out.Children, c.ID)
	}
	for _, n := range r.NotCarried {
		out.NotCarried = append(out.NotCarried, n.Job)
	}
	return out, nil
}

type PromoteIn struct {
	SessionRef
	DryRun        bool     `json:"dry_run,omitempty" jsonschema:"show the plan and change nothing"`
	PlanID        string   `json:"plan_id,omitempty" jsonschema:"the plan_id of a dry run: apply exactly that plan (refused if either session changed since)"`
	SkipConflicts bool     `json:"skip_conflicts,omitempty" jsonschema:"apply the clean paths and leave the conflicts"`
	Paths         []string `json:"paths,omitempty" jsonschema:"promote only these files or directories (at most 100)"`
}

type PromoteOut struct {
	Child      string   `json:"child"`
	Parent     string   `json:"parent"`
	DryRun     bool     `json:"dry_run"`
	PlanID     string   `json:"plan_id"`
	Apply      []string `json:"apply" jsonschema:"the paths the plan writes or removes on the parent (at most 500 listed)"`
	Conflicts  []string `json:"conflicts" jsonschema:"paths both sides changed (at most 500 listed)"`
	Applied    int      `json:"applied" jsonschema:"how many paths were written or removed"`
	Skipped    int      `json:"skipped"`
	Checkpoint string   `json:"checkpoint,omitempty" jsonschema:"the parent's checkpoint taken before the first write: restore it to undo"`
}

func sessionPromote(ctx context.Context, s *Server, id string, in PromoteIn) (*PromoteOut, error) {
	if len(in.Paths) > api.MaxPromotePaths {
		return nil, fmt.Errorf("invalid_argument: at most %d paths", api.MaxPromotePaths)
	}
	r, err := s.c.Promote(ctx, id, api.PromoteRequest{DryRun: in.DryRun, PlanID: in.PlanID, SkipConflicts: in.SkipConflicts, Paths: in.Paths})
	if err != nil {
		return nil, err
	}
	out := &PromoteOut{Child: r.Child, Parent: r.Parent, DryRun: r.DryRun, PlanID: r.PlanID, Apply: []string{}, Conflicts: []string{},
		Applied: len(r.Applied), Skipped: len(r.Skipped), Checkpoint: r.Checkpoint}
	for _, c := range r.Plan.Apply[:min(len(r.Plan.Apply), MaxListEntries)] {
		out.Apply = append(out.Apply, c.Op+" "+c.Path)
	}
	for _, c := range r.Plan.Conflicts[:min(len(r.Plan.Conflicts), MaxListEntries)] {
		out.Conflicts = append(out.Conflicts, c.Path+": "+c.Reason)
	}
	return out, nil
}

// --- events

type EventsIn struct {
	SessionRef
	Limit int   `json:"limit,omitempty" jsonschema:"how many entries (default 50, at most 200)"`
	After int64 `json:"after,omitempty" jsonschema:"the entries after this seq, oldest first (next of an earlier call); without it the newest entries"`
}

type EventOut struct {
	Seq       int64  `json:"seq"`
	Time      string `json:"time"`
	Kind      string `json:"kind"`
	Actor     string `json:"actor"`
	Data      string `json:"data" jsonschema:"the entry's data as JSON text, cut at 2048 bytes"`
	Truncated bool   `json:"truncated,omitempty"`
}

type EventsOut struct {
	Events []EventOut `json:"events"`
	Next   int64      `json:"next" jsonschema:"the seq of the last entry returned: give it as after to read the entries that follow"`
	More   bool       `json:"more,omitempty" jsonschema:"with after: more entries follow this page"`
}

func sessionEvents(ctx context.Context, s *Server, id string, in EventsIn) (*EventsOut, error) {
	if in.Limit == 0 {
		in.Limit = DefaultEvents
	}
	if in.Limit < 1 || in.Limit > MaxEvents {
		return nil, fmt.Errorf("invalid_argument: limit must be 1 to %d", MaxEvents)
	}
	if in.After < 0 {
		return nil, fmt.Errorf("invalid_argument: after must be 0 or more")
	}
	// Without after, the newest entries: the daemon gives the tail, so
	// a ledger longer than one of its pages still shows its newest.
	q := client.EventsQuery{Tail: in.Limit}
	if in.After > 0 {
		q = client.EventsQuery{After: in.After, Limit: in.Limit}
	}
	ev, err := s.c.EventsPage(ctx, id, q)
	if err != nil {
		return nil, err
	}
	out := &EventsOut{Events: []EventOut{}, Next: in.After, More: ev.LedgerMore}
	for _, e := range ev.Ledger {
		out.Next = e.Seq
		var b bytes.Buffer
		if json.Compact(&b, e.Data) != nil {
			b.Reset()
			b.Write(e.Data)
		}
		d := b.String()
		cut := false
		if len(d) > MaxEventData {
			d, cut = d[:MaxEventData], true
		}
		out.Events = append(out.Events, EventOut{Seq: e.Seq, Time: e.Time.UTC().Format(time.RFC3339Nano), Kind: e.Kind, Actor: e.Actor, Data: d, Truncated: cut})
	}
	return out, nil
}
