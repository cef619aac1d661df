package mcp

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// MaxGitOutput is the most of a git command's output session_git returns
// (its start; the daemon itself cuts a diff at 256 KiB).
const MaxGitOutput = 64 << 10

// moreTools are the tools past the first set: git, probe, artifacts,
// rewind, rollout, evaluate, session tokens and previews.
func moreTools() []toolDef {
	return []toolDef{
		tool("session_git", fmt.Sprintf("Git in the session's workspace: status, diff, log (read), or commit and branch (which need a server started with --allow-write). "+
			"Output is cut at %d KiB (truncated says so).", MaxGitOutput>>10), false, api.OpGit, sessionGit),
		tool("session_probe", "Say what the session's sandbox has: OS, architecture and the tools found on its PATH.", false, api.OpRead, sessionProbe),
		tool("session_artifacts", fmt.Sprintf("List the workspace's changes since the session started (added, modified, deleted; at most %d of each).", MaxListEntries), false, api.OpRead, sessionArtifacts),
		tool("session_rewind_points", fmt.Sprintf("List the session's rewind points (automatic checkpoints before commands), oldest first; at most the newest %d.", MaxListEntries), false, "", sessionRewindPoints),
		tool("session_rewind", "Go back: undo the last steps commands (default 1), or back to the rewind point named by to.", true, "", sessionRewind),
		tool("session_rollout", fmt.Sprintf("Run one command in count fork children at once (1 to %d) and report each run (exit code, the last 4 KiB of output); children are deleted unless keep.", MaxForkCount), true, "", sessionRollout),
		tool("session_evaluate", fmt.Sprintf("Try candidate commands (1 to %d), each in its own fork child, run test after each, and keep the winner's child (for session_promote).", client.MaxCandidates), true, "", sessionEvaluate),
		tool("session_token", "Mint a session token for the ops given (read, exec, jobs, files.read, files.write, git, checkpoint, preview). The token is shown once.", true, "", sessionToken),
		tool("session_preview", "Make a preview URL for a port the sandbox listens on. The URL carries its own token and is shown once.", true, api.OpPreview, sessionPreview),
	}
}

type GitIn struct {
	SessionRef
	Verb    string `json:"verb" jsonschema:"status, diff, log, commit or branch"`
	Repo    string `json:"repo,omitempty" jsonschema:"the repository directory; empty means the workspace"`
	Message string `json:"message,omitempty" jsonschema:"the commit message (commit)"`
	Name    string `json:"name,omitempty" jsonschema:"the new branch's name (branch)"`
}

type GitOut struct {
	Repo      string   `json:"repo"`
	Output    string   `json:"output"`
	Truncated bool     `json:"truncated"`
	Commit    string   `json:"commit,omitempty"`
	Branch    string   `json:"branch,omitempty"`
	Log       []string `json:"log,omitempty" jsonschema:"for log: one line per commit, id and subject"`
}

func sessionGit(ctx context.Context, s *Server, in GitIn) (*GitOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	var r api.GitResult
	switch in.Verb {
	case "status", "diff", "log":
		err = s.c.Call(ctx, http.MethodGet, id, "/git/"+in.Verb, repoQuery(in.Repo), nil, &r)
	case "commit", "branch":
		if !s.opts.AllowWrite {
			return nil, fmt.Errorf("forbidden: git %s changes the repository, and this server was started without --allow-write", in.Verb)
		}
		err = s.c.Call(ctx, http.MethodPost, id, "/git/"+in.Verb, nil, api.GitRequest{Repo: in.Repo, Message: in.Message, Name: in.Name}, &r)
	default:
		return nil, fmt.Errorf("invalid_argument: verb %q: give status, diff, log, commit or branch", in.Verb)
	}
	if err != nil {
		return nil, err
	}
	out := &GitOut{Repo: r.Repo, Output: r.Output, Truncated: r.Truncated, Commit: r.Commit, Branch: r.Branch}
	if len(out.Output) > MaxGitOutput {
		out.Output, out.Truncated = out.Output[:MaxGitOutput], true
	}
	for _, e := range r.Entries[:min(len(r.Entries), api.MaxGitLog)] {
		out.Log = append(out.Log, e.ID+" "+e.Subject)
	}
	return out, nil
}

func repoQuery(repo string) map[string][]string {
	if repo == "" {
		return nil
	}
	return map[string][]string{"repo": {repo}}
}

type ProbeOut struct {
	OS    string            `json:"os"`
	Arch  string            `json:"arch"`
	Tools map[string]string `json:"tools" jsonschema:"tool name to the path it was found at"`
}

func sessionProbe(ctx context.Context, s *Server, in SessionRef) (*ProbeOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	var p struct {
		OS    string            `json:"os"`
		Arch  string            `json:"arch"`
		Tools map[string]string `json:"tools"`
	}
	if err := s.c.Call(ctx, http.MethodGet, id, "/probe", nil, nil, &p); err != nil {
		return nil, err
	}
	if p.Tools == nil {
		p.Tools = map[string]string{}
	}
	return &ProbeOut{OS: p.OS, Arch: p.Arch, Tools: p.Tools}, nil
}

type ArtifactsOut struct {
	Workspace string   `json:"workspace"`
	Added     []string `json:"added"`
	Modified  []string `json:"modified"`
	Deleted   []string `json:"deleted"`
	Truncated bool     `json:"truncated"`
}

func sessionArtifacts(ctx context.Context, s *Server, in SessionRef) (*ArtifactsOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	a, err := s.c.Artifacts(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &ArtifactsOut{Workspace: a.Workspace}
	cut := func(l []string) []string {
		if len(l) > MaxListEntries {
			out.Truncated = true
			l = l[:MaxListEntries]
		}
		return append([]string{}, l...)
	}
	out.Added, out.Modified, out.Deleted = cut(a.Added), cut(a.Modified), cut(a.Deleted)
	return out, nil
}

type RewindPointOut struct {
	Tag       string `json:"tag"`
	Trigger   string `json:"trigger"`
	Command   string `json:"command"`
	Pinned    bool   `json:"pinned"`
	CreatedAt string `json:"created_at"`
}

type RewindPointsOut struct {
	Points []RewindPointOut `json:"points"`
	Total  int              `json:"total"`
}

func sessionRewindPoints(ctx context.Context, s *Server, in SessionRef) (*RewindPointsOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	r, err := s.c.Rewind(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &RewindPointsOut{Points: []RewindPointOut{}, Total: len(r.Points)}
	for _, p := range r.Points[max(0, len(r.Points)-MaxListEntries):] {
		out.Points = append(out.Points, RewindPointOut{Tag: p.Tag, Trigger: p.Trigger, Command: p.Command, Pinned: p.Pinned, CreatedAt: p.CreatedAt.UTC().Format(time.RFC3339)})
	}
	return out, nil
}

type RewindIn struct {
	SessionRef
	Steps int    `json:"steps,omitempty" jsonschema:"how many points back (default 1)"`
	To    string `json:"to,omitempty" jsonschema:"a rewind point's tag to go back to, instead of steps"`
}

type RewindOut struct {
	Restored string   `json:"restored" jsonschema:"the tag of the point now restored"`
	Dropped  []string `json:"dropped"`
	Revision int64    `json:"revision"`
}

func sessionRewind(ctx context.Context, s *Server, in RewindIn) (*RewindOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	if in.Steps < 0 || in.Steps > MaxListEntries {
		return nil, fmt.Errorf("invalid_argument: steps must be 0 to %d", MaxListEntries)
	}
	r, err := s.c.RewindUndo(ctx, id, api.RewindUndoRequest{Steps: in.Steps, To: in.To})
	if err != nil {
		return nil, err
	}
	return &RewindOut{Restored: r.Restored.Tag, Dropped: append([]string{}, r.Dropped...), Revision: r.Revision}, nil
}

// MaxTailBytes is the most of each stream a rollout run reports.
const MaxTailBytes = 4 << 10

type RolloutIn struct {
	SessionRef
	Command        string `json:"command" jsonschema:"the shell command to run in every child"`
	Count          int    `json:"count" jsonschema:"how many children (1 to 16)"`
	Keep           bool   `json:"keep,omitempty" jsonschema:"keep the children (default: delete them after)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"each run's timeout; 0 means the default"`
}

type RolloutRunOut struct {
	Index      int    `json:"index"`
	Session    string `json:"session"`
	ExitCode   *int   `json:"exit_code"`
	TimedOut   bool   `json:"timed_out"`
	Error      string `json:"error,omitempty"`
	StdoutTail string `json:"stdout_tail"`
	StderrTail string `json:"stderr_tail"`
	Deleted    bool   `json:"deleted"`
}

type RolloutOut struct {
	Runs []RolloutRunOut `json:"runs"`
}

func sessionRollout(ctx context.Context, s *Server, in RolloutIn) (*RolloutOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	if in.Count < 1 || in.Count > MaxForkCount || in.TimeoutSeconds < 0 {
		return nil, fmt.Errorf("invalid_argument: count must be 1 to %d, timeout_seconds not negative", MaxForkCount)
	}
	r, err := s.c.Rollout(ctx, id, client.RolloutRequest{Count: in.Count, Command: in.Command, Keep: in.Keep, Timeout: time.Duration(in.TimeoutSeconds) * time.Second,
		Progress: stepProgress(ctx)})
	if err != nil {
		return nil, err
	}
	out := &RolloutOut{Runs: []RolloutRunOut{}}
	for _, x := range r.Runs {
		var d int64
		so, _ := tail(x.StdoutTail, MaxTailBytes, &d)
		se, _ := tail(x.StderrTail, MaxTailBytes, &d)
		out.Runs = append(out.Runs, RolloutRunOut{Index: x.Index, Session: x.Session, ExitCode: x.ExitCode, TimedOut: x.TimedOut, Error: x.Error,
			StdoutTail: so, StderrTail: se, Deleted: x.Deleted})
	}
	return out, nil
}

type EvaluateIn struct {
	SessionRef
	Candidates     []string `json:"candidates" jsonschema:"shell commands, each tried in a fork child of its own"`
	Test           string   `json:"test,omitempty" jsonschema:"run in each child after its candidate exited 0; empty means the candidate's exit code decides"`
	KeepAll        bool     `json:"keep_all,omitempty" jsonschema:"keep every child, not only the winner's"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"each command's timeout; 0 means the default"`
}

type CandidateOut struct {
	Index        int    `json:"index"`
	Session      string `json:"session"`
	Score        int    `json:"score"`
	ExitCode     *int   `json:"exit_code"`
	TestExitCode *int   `json:"test_exit_code,omitempty"`
	Error        string `json:"error,omitempty"`
}

type EvaluateOut struct {
	Results       []CandidateOut `json:"results"`
	Winner        int            `json:"winner" jsonschema:"the winning candidate's index, -1 when none passed"`
	WinnerSession string         `json:"winner_session,omitempty" jsonschema:"the winner's child session, ready for session_promote"`
}

func sessionEvaluate(ctx context.Context, s *Server, in EvaluateIn) (*EvaluateOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	if in.TimeoutSeconds < 0 {
		return nil, fmt.Errorf("invalid_argument: timeout_seconds must not be negative")
	}
	r, err := s.c.Evaluate(ctx, id, client.EvaluateRequest{Candidates: in.Candidates, Test: in.Test, KeepAll: in.KeepAll, Timeout: time.Duration(in.TimeoutSeconds) * time.Second,
		Progress: stepProgress(ctx)})
	if err != nil {
		return nil, err
	}
	out := &EvaluateOut{Results: []CandidateOut{}, Winner: r.Winner, WinnerSession: r.WinnerSession}
	for _, c := range r.Results {
		out.Results = append(out.Results, CandidateOut{Index: c.Index, Session: c.Session, Score: c.Score, ExitCode: c.ExitCode, TestExitCode: c.TestExitCode, Error: c.Error})
	}
	return out, nil
}

type TokenIn struct {
	SessionRef
	Ops        []string `json:"ops" jsonschema:"what the token may do: read, exec, jobs, files.read, files.write, git, checkpoint, preview"`
	TTLSeconds int      `json:"ttl_seconds,omitempty" jsonschema:"seconds until it expires (default 3600, at most 86400)"`
	Label      string   `json:"label,omitempty" jsonschema:"a name for it (at most 64 characters)"`
}

type TokenOut struct {
	ID        string   `json:"id"`
	Token     string   `json:"token" jsonschema:"the secret, shown this once"`
	Ops       []string `json:"ops"`
	ExpiresAt string   `json:"expires_at"`
}

func sessionToken(ctx context.Context, s *Server, in TokenIn) (*TokenOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	if len(in.Ops) == 0 || len(in.Ops) > len(api.GrantableOps()) {
		return nil, fmt.Errorf("invalid_argument: give 1 to %d ops", len(api.GrantableOps()))
	}
	t, err := s.c.MintToken(ctx, id, api.TokenRequest{Ops: in.Ops, TTLSeconds: in.TTLSeconds, Label: in.Label})
	if err != nil {
		return nil, err
	}
	return &TokenOut{ID: t.ID, Token: t.Token, Ops: t.Ops, ExpiresAt: t.ExpiresAt.UTC().Format(time.RFC3339)}, nil
}

type PreviewIn struct {
	SessionRef
	Port       int `json:"port" jsonschema:"the TCP port the sandbox listens on"`
	TTLSeconds int `json:"ttl_seconds,omitempty" jsonschema:"seconds until the URL stops working; 0 means the daemon's default"`
}

type PreviewOut struct {
	ID        string `json:"id"`
	URL       string `json:"url" jsonschema:"the URL, with its token; shown this once"`
	Port      int    `json:"port"`
	ExpiresAt string `json:"expires_at"`
}

func sessionPreview(ctx context.Context, s *Server, in PreviewIn) (*PreviewOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	if in.Port < 1 || in.Port > 65535 || in.TTLSeconds < 0 {
		return nil, fmt.Errorf("invalid_argument: port must be 1 to 65535, ttl_seconds not negative")
	}
	p, err := s.c.CreatePreview(ctx, id, api.PreviewRequest{Port: in.Port, TTLSeconds: in.TTLSeconds})
	if err != nil {
		return nil, err
	}
	// The daemon answers a path; over /mcp it goes on the address the
	// caller used, over stdio on the client's daemon URL.
	u := s.c.PreviewURL(p)
	switch b := callBase(ctx); {
	case b == noPublicBase:
		u = p.URL
	case b != "" && p.URL != "":
		u = b + p.URL
	}
	return &PreviewOut{ID: p.ID, URL: u, Port: p.Port, ExpiresAt: p.ExpiresAt.UTC().Format(time.RFC3339)}, nil
}
