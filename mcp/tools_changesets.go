package mcp

import (
	"context"
	"fmt"
	"unicode/utf8"

	"paddock.dev/paddock/api"
)

// Bounds of the changeset tools' output.
const (
	// MaxChangesetFileText is the most of one file's new content
	// sandbox_changesets shows (with contents), and MaxChangesetText the
	// most of all of them together.
	MaxChangesetFileText = 16 << 10
	MaxChangesetText     = 128 << 10
)

// changesetTools are speculation on the lower sandbox API: run a command
// on a copy, see what it would change, decide, apply.
func changesetTools() []toolDef {
	return []toolDef{
		tool("sandbox_speculate", fmt.Sprintf("Run a command in a sandbox speculatively: it runs on a copy, and what it would change in the paths given (1 to %d) "+
			"becomes a pending changeset; the sandbox itself is not changed. Returns the changeset (files changed, exit code, the last %d KiB of stdout and stderr).",
			api.MaxSpeculatePaths, MaxStreamBytes>>10), true, "", sandboxSpeculate),
		tool("sandbox_changesets", fmt.Sprintf("List a sandbox's changesets, or show one (changeset); with contents, the new text of each changed file "+
			"(at most %d KiB a file, %d KiB in all).", MaxChangesetFileText>>10, MaxChangesetText>>10), false, "", sandboxChangesets),
		tool("sandbox_changeset_decide", "Approve or reject a pending changeset; with apply, an approved one is written into the sandbox at once.", true, "", sandboxChangesetDecide),
		tool("session_speculate", fmt.Sprintf("Run a command in a session speculatively: it runs on a copy, and what it would change in the paths given (1 to %d) "+
			"becomes a pending changeset; the session is not changed. A command the policy holds for approval fails with its approval id (pass approval_id once approved).",
			api.MaxSpeculatePaths), true, api.OpExec, sessionSpeculate),
		tool("session_changesets", fmt.Sprintf("List a session's changesets, or show one (changeset); with contents, the new text of each changed file "+
			"(at most %d KiB a file, %d KiB in all).", MaxChangesetFileText>>10, MaxChangesetText>>10), false, api.OpFilesRead, sessionChangesets),
		tool("session_changeset_decide", "Approve or reject a session's pending changeset; with apply, an approved one is written into the session at once.", true, "", sessionChangesetDecide),
	}
}

// changesetCalls are the SDK's changeset calls for one kind of target.
type changesetCalls struct {
	speculate func(ctx context.Context, id string, req api.SpeculateRequest) (*api.Changeset, error)
	list      func(ctx context.Context, id string) ([]api.Changeset, error)
	get       func(ctx context.Context, id, cid string) (*api.Changeset, error)
	decide    func(ctx context.Context, id, cid string, d api.ChangesetDecision) (*api.Changeset, error)
	apply     func(ctx context.Context, id, cid string) (*api.ApplyResult, error)
}

func (s *Server) sandboxCalls() changesetCalls {
	return changesetCalls{s.c.SandboxSpeculate, s.c.SandboxChangesets, s.c.SandboxChangeset, s.c.SandboxDecideChangeset, s.c.SandboxApplyChangeset}
}

func (s *Server) sessionCalls() changesetCalls {
	return changesetCalls{s.c.Speculate, s.c.Changesets, s.c.Changeset, s.c.DecideChangeset, s.c.ApplyChangeset}
}

type SpeculateIn struct {
	SandboxRef
	Command        string   `json:"command" jsonschema:"the shell command to run on a copy"`
	Paths          []string `json:"paths" jsonschema:"the files or directories whose changes the changeset holds"`
	Cwd            string   `json:"cwd,omitempty" jsonschema:"the directory to run in"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"seconds before it is killed (default 60, at most 3600)"`
}

type ChangesetFileOut struct {
	Path    string `json:"path"`
	Op      string `json:"op" jsonschema:"added, modified or deleted"`
	Size    int64  `json:"size,omitempty"`
	Content string `json:"content,omitempty" jsonschema:"the new text, when asked for and it is text"`
	Cut     bool   `json:"content_cut,omitempty" jsonschema:"the content shown is not all of it (or was not kept)"`
}

type ChangesetOut struct {
	ID          string             `json:"id"`
	Status      string             `json:"status" jsonschema:"pending, approved, rejected or applied"`
	Command     string             `json:"command"`
	ExitCode    int                `json:"exit_code"`
	Stdout      string             `json:"stdout"`
	Stderr      string             `json:"stderr"`
	Files       []ChangesetFileOut `json:"files"`
	Complete    bool               `json:"complete" jsonschema:"false when the command's changes were more than a changeset keeps"`
	Network     bool               `json:"network" jsonschema:"the command had network access, so it may have done things outside the files"`
	SideEffects string             `json:"side_effects"`
	Reason      string             `json:"reason,omitempty"`
	Applied     []string           `json:"applied,omitempty" jsonschema:"paths written when the changeset was applied by this call"`
}

// changesetOut is c for an agent: output tails, file list, and (with
// contents) each file's text within the bounds.
func changesetOut(c *api.Changeset, contents bool) *ChangesetOut {
	var d int64
	so, _ := tail(c.Stdout, MaxStreamBytes, &d)
	se, _ := tail(c.Stderr, MaxStreamBytes, &d)
	out := &ChangesetOut{ID: c.ID, Status: c.Status, Command: c.Command, ExitCode: c.ExitCode, Stdout: so, Stderr: se,
		Files: []ChangesetFileOut{}, Complete: c.Complete, Network: c.SideEffects.Network, SideEffects: c.SideEffects.Detail, Reason: c.Reason}
	budget := MaxChangesetText
	for _, f := range c.Files[:min(len(c.Files), MaxListEntries)] {
		fo := ChangesetFileOut{Path: f.Path, Op: f.Op, Size: f.Size, Cut: f.ContentOmitted}
		if contents && len(f.Content) > 0 && utf8.Valid(f.Content) {
			n := min(len(f.Content), MaxChangesetFileText, budget)
			for n > 0 && n < len(f.Content) && !utf8.RuneStart(f.Content[n]) {
				n--
			}
			fo.Content, fo.Cut = string(f.Content[:n]), fo.Cut || n < len(f.Content)
			budget -= n
		} else if contents && len(f.Content) > 0 {
			fo.Cut = true // not text
		}
		out.Files = append(out.Files, fo)
	}
	return out
}

func sandboxSpeculate(ctx context.Context, s *Server, in SpeculateIn) (*ChangesetOut, error) {
	id, err := sandboxID(in.SandboxRef)
	if err != nil {
		return nil, err
	}
	return speculate(ctx, s.sandboxCalls(), id, api.SpeculateRequest{Command: in.Command, Paths: in.Paths, Cwd: in.Cwd, TimeoutSeconds: in.TimeoutSeconds})
}

type SessionSpeculateIn struct {
	SessionRef
	Command        string   `json:"command" jsonschema:"the shell command to run on a copy"`
	Paths          []string `json:"paths" jsonschema:"the files or directories whose changes the changeset holds"`
	Cwd            string   `json:"cwd,omitempty" jsonschema:"the directory to run in"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"seconds before it is killed (default 60, at most 3600)"`
	ApprovalID     string   `json:"approval_id,omitempty" jsonschema:"an approval id from an earlier call held for approval"`
}

func sessionSpeculate(ctx context.Context, s *Server, in SessionSpeculateIn) (*ChangesetOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	return speculate(ctx, s.sessionCalls(), id, api.SpeculateRequest{Command: in.Command, Paths: in.Paths, Cwd: in.Cwd, TimeoutSeconds: in.TimeoutSeconds, ApprovalID: in.ApprovalID})
}

func speculate(ctx context.Context, calls changesetCalls, id string, req api.SpeculateRequest) (*ChangesetOut, error) {
	if req.Command == "" || len(req.Paths) == 0 || len(req.Paths) > api.MaxSpeculatePaths {
		return nil, fmt.Errorf("invalid_argument: give a command and 1 to %d paths", api.MaxSpeculatePaths)
	}
	c, err := calls.speculate(ctx, id, req)
	if err != nil {
		return nil, err
	}
	return changesetOut(c, false), nil
}

type ChangesetsIn struct {
	SandboxRef
	Changeset string `json:"changeset,omitempty" jsonschema:"one changeset's id; empty lists them all"`
	Contents  bool   `json:"contents,omitempty" jsonschema:"with changeset: show each changed file's new text"`
}

type ChangesetsOut struct {
	Changesets []ChangesetOut `json:"changesets"`
}

func sandboxChangesets(ctx context.Context, s *Server, in ChangesetsIn) (*ChangesetsOut, error) {
	id, err := sandboxID(in.SandboxRef)
	if err != nil {
		return nil, err
	}
	return changesets(ctx, s.sandboxCalls(), id, in.Changeset, in.Contents)
}

type SessionChangesetsIn struct {
	SessionRef
	Changeset string `json:"changeset,omitempty" jsonschema:"one changeset's id; empty lists them all"`
	Contents  bool   `json:"contents,omitempty" jsonschema:"with changeset: show each changed file's new text"`
}

func sessionChangesets(ctx context.Context, s *Server, in SessionChangesetsIn) (*ChangesetsOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	return changesets(ctx, s.sessionCalls(), id, in.Changeset, in.Contents)
}

func changesets(ctx context.Context, calls changesetCalls, id, cid string, contents bool) (*ChangesetsOut, error) {
	out := &ChangesetsOut{Changesets: []ChangesetOut{}}
	if cid != "" {
		c, err := calls.get(ctx, id, cid)
		if err != nil {
			return nil, err
		}
		out.Changesets = append(out.Changesets, *changesetOut(c, contents))
		return out, nil
	}
	if contents {
		return nil, fmt.Errorf("invalid_argument: contents needs one changeset (the \"changeset\" field)")
	}
	l, err := calls.list(ctx, id)
	if err != nil {
		return nil, err
	}
	for i := range l[:min(len(l), api.MaxChangesetsPerTarget)] {
		out.Changesets = append(out.Changesets, *changesetOut(&l[i], false))
	}
	return out, nil
}

type DecideIn struct {
	SandboxRef
	Changeset string `json:"changeset" jsonschema:"the changeset's id"`
	Decision  string `json:"decision" jsonschema:"approve or reject"`
	Reason    string `json:"reason,omitempty" jsonschema:"why, kept with the changeset"`
	Apply     bool   `json:"apply,omitempty" jsonschema:"with approve: write the changes into the sandbox now"`
}

func sandboxChangesetDecide(ctx context.Context, s *Server, in DecideIn) (*ChangesetOut, error) {
	id, err := sandboxID(in.SandboxRef)
	if err != nil {
		return nil, err
	}
	return decide(ctx, s.sandboxCalls(), id, in.Changeset, in.Decision, in.Reason, in.Apply)
}

type SessionDecideIn struct {
	SessionRef
	Changeset string `json:"changeset" jsonschema:"the changeset's id"`
	Decision  string `json:"decision" jsonschema:"approve or reject"`
	Reason    string `json:"reason,omitempty" jsonschema:"why, kept with the changeset"`
	Apply     bool   `json:"apply,omitempty" jsonschema:"with approve: write the changes into the session now"`
}

func sessionChangesetDecide(ctx context.Context, s *Server, in SessionDecideIn) (*ChangesetOut, error) {
	id, err := s.session(in.Session)
	if err != nil {
		return nil, err
	}
	return decide(ctx, s.sessionCalls(), id, in.Changeset, in.Decision, in.Reason, in.Apply)
}

func decide(ctx context.Context, calls changesetCalls, id, cid, decision, reason string, apply bool) (*ChangesetOut, error) {
	if cid == "" || (decision != "approve" && decision != "reject") || (apply && decision != "approve") {
		return nil, fmt.Errorf("invalid_argument: give a changeset and the decision approve or reject (apply only with approve)")
	}
	c, err := calls.decide(ctx, id, cid, api.ChangesetDecision{Decision: decision, Reason: reason})
	if err != nil {
		return nil, err
	}
	if !apply {
		return changesetOut(c, false), nil
	}
	r, err := calls.apply(ctx, id, cid)
	if err != nil {
		return nil, err
	}
	out := changesetOut(&r.Changeset, false)
	out.Applied = append([]string{}, r.Applied...)
	return out, nil
}
