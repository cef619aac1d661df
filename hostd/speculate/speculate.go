// Package speculate runs a command in an isolated copy of a session or a
// sandbox and keeps what it changed under the paths the caller named as
// a changeset, to be reviewed, decided (approve or reject) and applied to
// the target later (POST .../speculate, .../changesets...). It is a
// sibling of the session core (hostd/session): it imports the core and
// works through its surface for siblings, and the core never imports it.
//
// How the copy is made: the target is forked into one child (a disk fork
// on procbox, a memory fork where the backend has one), the command runs
// in the child, the child's files under the paths are compared before and
// after the command, and the child is deleted. The target's machine is
// never replaced, so its running jobs go on untouched (a checkpoint, run
// and restore would have restarted them from the checkpoint). The child
// is a real fork: it is taken from the target's budget (max_children) and
// the host's admission like any fork child, and the fork and the child's
// deletion are in the ledger.
//
// The command walks the target's own pipeline first: the process policy
// judges it (403), an approval may hold it (428, sessions only: a sandbox
// has no approvals and is refused instead), and the budget admits it as
// an exec (it is counted as one). Apply writes through the files routes'
// pipeline (hostd/workspace), so budgets, the read-only workspace, the
// execute list and the ledger see every write.
package speculate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/policy"
)

// The public wire types (package api), kept under these names here.
type (
	Request     = apiv1.SpeculateRequest
	Changeset   = apiv1.Changeset
	File        = apiv1.ChangesetFile
	Decision    = apiv1.ChangesetDecision
	ApplyResult = apiv1.ApplyResult
)

// Target kinds, as Changeset.TargetKind names them.
const (
	KindSession = "session"
	KindSandbox = "sandbox"
)

// How the copy is made (Changeset.How).
const HowFork = "fork"

// Limits besides api/changesets.go's.
const (
	// MaxPathBytes bounds one path of a request.
	MaxPathBytes = 1024
	// MaxReasonBytes bounds a decision's reason.
	MaxReasonBytes = 1024
	// MaxCwdBytes bounds the working directory.
	MaxCwdBytes = 1024
	// maxScanEntries bounds the entries one path's manifest reads: past
	// it the changeset is incomplete.
	maxScanEntries = 20000
)

// Files is the files routes' write path that apply goes through
// (hostd/workspace.Service): the same pipeline, guards, budget and ledger
// as PUT and DELETE .../files.
type Files interface {
	WriteFile(ctx context.Context, tenant, id string, req apiv1.FileWrite) (*api.FileInfo, error)
	DeleteFile(ctx context.Context, tenant, id, path string, recursive bool) error
}

// Service keeps the changesets of one Manager's sessions and sandboxes.
type Service struct {
	m     *session.Manager
	st    *store.Store
	files Files

	// applying serializes applies (and decisions) on one target, so two
	// applies cannot both pass the conflict check and then write.
	mu       sync.Mutex
	applying map[string]*sync.Mutex
}

// New returns the speculation service of m, applying through files. It
// drops a session's changesets when the session is deleted or expires.
func New(m *session.Manager, files Files) *Service {
	s := &Service{m: m, st: m.Store(), files: files, applying: map[string]*sync.Mutex{}}
	m.OnStop(s.stopped)
	return s
}

func (s *Service) stopped(ctx context.Context, id string, why session.StopReason) {
	if why != session.StopDeleted && why != session.StopExpired {
		return
	}
	if err := s.st.DeleteChangesets(context.WithoutCancel(ctx), id); err != nil {
		s.m.Logger().Warn("drop a session's changesets", "session", id, "err", err)
	}
	s.mu.Lock()
	delete(s.applying, id)
	s.mu.Unlock()
}

func (s *Service) lockTarget(id string) func() {
	s.mu.Lock()
	l := s.applying[id]
	if l == nil {
		l = &sync.Mutex{}
		s.applying[id] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func coded(code string, kind error, f string, a ...any) error {
	return errdefs.WithCode(code, fmt.Errorf("%w: %s", kind, fmt.Sprintf(f, a...)))
}

// target loads id as the caller with tenant sees it, refusing a record of
// the other kind as not found (a sandbox's id on the sessions' routes and
// the other way round).
func (s *Service) target(ctx context.Context, tenant, id, kind string) (*session.Session, error) {
	x, err := s.m.Load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if (x.Kind == session.KindSandbox) != (kind == KindSandbox) {
		return nil, fmt.Errorf("%w: no %s %s", session.ErrNotFound, kind, id)
	}
	return x, nil
}

// permit checks that the caller in ctx may also use op on id (the route
// checked its own op already).
func permit(ctx context.Context, op auth.Access, id, why string) error {
	who, ok := auth.FromContext(ctx)
	if !ok {
		return fmt.Errorf("%w: this call carries no verified caller", session.ErrForbidden)
	}
	if err := who.Permit(op, id); err != nil {
		return fmt.Errorf("%w: %s needs %s: %v", session.ErrForbidden, why, op, err)
	}
	return nil
}

// checkRequest validates a request on its own and returns the paths made
// absolute (a session's relative paths are under its workspace).
func checkRequest(req *Request, kind, workspace string) ([]string, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, session.BadRequest("command is required")
	}
	if len(req.Command) > apiv1.MaxSpeculateCommandBytes {
		return nil, fmt.Errorf("%w: command is %d bytes, at most %d", session.ErrTooLarge, len(req.Command), apiv1.MaxSpeculateCommandBytes)
	}
	if strings.ContainsRune(req.Command, 0) {
		return nil, session.BadRequest("command must not contain a NUL byte")
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > apiv1.MaxSpeculateTimeoutSeconds {
		return nil, session.BadRequest("timeout_seconds %d must be from 1 to %d (0 or absent: %d)", req.TimeoutSeconds, apiv1.MaxSpeculateTimeoutSeconds, apiv1.DefaultSpeculateTimeoutSeconds)
	}
	if req.TimeoutSeconds == 0 {
		req.TimeoutSeconds = apiv1.DefaultSpeculateTimeoutSeconds
	}
	if len(req.Cwd) > MaxCwdBytes || strings.ContainsRune(req.Cwd, 0) || (req.Cwd != "" && !path.IsAbs(req.Cwd)) {
		return nil, session.BadRequest("cwd must be an absolute path of at most %d bytes", MaxCwdBytes)
	}
	if len(req.ApprovalID) > 128 {
		return nil, session.BadRequest("approval_id is not an approval's id")
	}
	if kind == KindSandbox && req.ApprovalID != "" {
		return nil, session.BadRequest("approval_id: a sandbox has no approvals")
	}
	if len(req.Paths) == 0 {
		return nil, session.BadRequest("paths is required: name the files or directories whose changes to record (1 to %d)", apiv1.MaxSpeculatePaths)
	}
	if len(req.Paths) > apiv1.MaxSpeculatePaths {
		return nil, session.BadRequest("paths has %d entries, at most %d", len(req.Paths), apiv1.MaxSpeculatePaths)
	}
	out := make([]string, 0, len(req.Paths))
	for _, p := range req.Paths {
		if p == "" || len(p) > MaxPathBytes || strings.ContainsRune(p, 0) {
			return nil, session.BadRequest("path %q must be 1 to %d bytes without NUL", session.ClipText(p, 64), MaxPathBytes)
		}
		if slices.Contains(strings.Split(p, "/"), "..") {
			return nil, session.BadRequest("path %q must not contain '..'", session.ClipText(p, 64))
		}
		if !path.IsAbs(p) {
			if kind == KindSandbox || workspace == "" {
				return nil, session.BadRequest("path %q must be absolute on a sandbox", session.ClipText(p, 64))
			}
			p = path.Join(workspace, p)
		}
		p = path.Clean(p)
		if p == "/" {
			return nil, session.BadRequest("path / is the whole machine, too large to scan: name the directories the command changes")
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// networkOf says whether s's machine can reach beyond itself, as its
// network policy was compiled.
func networkOf(s *session.Session) apiv1.SideEffects {
	n := s.Policy.NetworkSummary
	switch {
	case n.Mode == "offline":
		return apiv1.SideEffects{Network: false, Detail: "the copy had no network (policy mode offline): only its file changes could matter, and they are in the changeset"}
	case n.Mode == "allowlist" && len(n.AllowHosts) == 0:
		return apiv1.SideEffects{Network: false, Detail: "the copy's allowlist is empty: it could reach no destination"}
	case n.Mode == "allowlist":
		return apiv1.SideEffects{Network: true, Detail: fmt.Sprintf("the copy could reach %s (allowlist): calls the command made to them really happened", strings.Join(n.AllowHosts, ", "))}
	case n.Mode == "":
		return apiv1.SideEffects{Network: true, Detail: "the copy's network policy is not known: assume calls the command made really happened"}
	}
	return apiv1.SideEffects{Network: true, Detail: fmt.Sprintf("the copy's network is %s: calls the command made really happened", n.Mode)}
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "cs-" + hex.EncodeToString(b[:])
}

// Speculate runs req.Command in a copy of target id (kind session or
// sandbox) as the caller in ctx, who sees it as tenant does, and keeps
// the changes under req.Paths as a pending changeset.
func (s *Service) Speculate(ctx context.Context, tenant, id, kind string, req Request) (*Changeset, error) {
	t0 := s.m.Now()
	if err := permit(ctx, auth.OpFilesRead, id, "a speculation shows file contents, so it"); err != nil {
		return nil, err
	}
	tgt, err := s.target(ctx, tenant, id, kind)
	if err != nil {
		return nil, err
	}
	paths, err := checkRequest(&req, kind, tgt.Workspace.Path)
	if err != nil {
		return nil, err
	}
	// Refuse before anything runs when there is no room to keep it.
	if err := s.roomFor(ctx, id); err != nil {
		return nil, err
	}
	cs := &Changeset{ID: newID(), Target: id, TargetKind: kind, Command: req.Command, Paths: paths,
		Status: apiv1.ChangesetPending, Files: []File{}, How: HowFork}
	check := session.ProcessCheck{Kind: policy.KindExec, Command: req.Command,
		Params: map[string]any{"timeout_seconds": req.TimeoutSeconds, "speculate": true}, Cwd: req.Cwd}
	judge := session.JudgeCommandStep(check, req.ApprovalID)
	if kind == KindSandbox {
		judge = session.JudgeWithoutApprovalsStep(func(session.Pipe) session.ProcessCheck { return check })
	}
	var (
		ms      int64
		runErr  error
		ranOnce bool
	)
	err = s.m.Walk(ctx, session.CommandExec, tenant, id,
		session.NewStep(session.StepValidate, func(_ context.Context, p session.Pipe) error {
			p.Command().Text = req.Command
			return nil
		}),
		session.LoadCheckedStep(func(ctx context.Context, tenant, id string) error {
			_, err := s.target(ctx, tenant, id, kind)
			return err
		}),
		judge,
		// No gate step: the command never runs in the target, and the
		// fork below takes the target's work slot itself.
		session.AdmitStep(session.StartExec, req.TimeoutSeconds),
		session.SpendApprovalStep(),
		session.NewStep(session.StepRun, func(ctx context.Context, p session.Pipe) error {
			ran, err := s.runInCopy(ctx, tenant, p, req, cs, &ms)
			if ran {
				p.Started()
				ranOnce = true
			}
			runErr = err
			return err
		}),
		session.NewStep(session.StepRecord, func(ctx context.Context, p session.Pipe) error {
			entry := map[string]any{"command": req.Command, "paths": paths, "how": HowFork, "rule": p.Command().Rule,
				"duration_ms": ms, "took_ms": s.m.Now().Sub(t0).Milliseconds()}
			if runErr != nil {
				entry["error"] = session.ClipText(runErr.Error(), 300)
			} else {
				entry["changeset"], entry["exit_code"], entry["files"], entry["complete"] = cs.ID, cs.ExitCode, len(cs.Files), cs.Complete
				entry["network"] = cs.SideEffects.Network
			}
			s.m.LedgerAppend(context.WithoutCancel(ctx), id, "speculate", p.WithNotes(entry))
			return nil
		}),
		session.NewStep(session.StepUsage, func(_ context.Context, p session.Pipe) error {
			if ranOnce {
				p.CountExec(ms)
			}
			return nil
		}),
	)
	if err != nil {
		return nil, err
	}
	cs.TookMS = s.m.Now().Sub(t0).Milliseconds()
	cs.CreatedAt = s.m.Now().UTC()
	if err := s.put(ctx, cs); err != nil {
		return nil, err
	}
	return cs, nil
}

// roomFor refuses (409) when target has MaxChangesetsPerTarget changesets
// and all of them are pending.
func (s *Service) roomFor(ctx context.Context, target string) error {
	rows, err := s.st.ListChangesets(ctx, target)
	if err != nil {
		return err
	}
	if len(rows) < apiv1.MaxChangesetsPerTarget {
		return nil
	}
	for _, r := range rows {
		if r.Status != apiv1.ChangesetPending {
			return nil
		}
	}
	return full(target, len(rows))
}

func full(target string, n int) error {
	return coded(errdefs.CodeChangesetsFull, session.ErrConflict,
		"%s has %d changesets, all pending (at most %d are kept): decide some first", target, n, apiv1.MaxChangesetsPerTarget)
}

func (s *Service) put(ctx context.Context, cs *Changeset) error {
	raw, err := json.Marshal(cs)
	if err != nil {
		return err
	}
	err = s.st.PutChangeset(ctx, store.ChangesetRow{ID: cs.ID, Target: cs.Target, Status: cs.Status, CreatedAt: cs.CreatedAt, Record: raw}, apiv1.MaxChangesetsPerTarget)
	if errors.Is(err, store.ErrTooManyChangesets) {
		return full(cs.Target, apiv1.MaxChangesetsPerTarget)
	}
	return err
}

// runInCopy forks the target into one child, runs the command there and
// records the changes into cs, then deletes the child. ran says the
// command was started in the child; ms is set to how long it ran, which
// the target's usage counts as an exec's time.
func (s *Service) runInCopy(ctx context.Context, tenant string, p session.Pipe, req Request, cs *Changeset, ms *int64) (ran bool, err error) {
	tgt := p.Session()
	fr, err := s.m.ForkDetail(ctx, tenant, tgt.ID, -1, session.ForkRequest{Count: 1})
	if err != nil {
		return false, fmt.Errorf("make the copy: %w", err)
	}
	if len(fr.Children) != 1 {
		return false, fmt.Errorf("%w: the fork made no copy", session.ErrConflict)
	}
	child := fr.Children[0].ID
	defer func() {
		if derr := s.m.Delete(context.WithoutCancel(ctx), tenant, child); derr != nil {
			s.m.Logger().Error("delete a speculation's copy", "target", tgt.ID, "copy", child, "err", derr)
		}
	}()
	mc := s.m.Machine(child)
	if mc == nil {
		return false, fmt.Errorf("%w: the copy %s has no machine", session.ErrConflict, child)
	}
	c := session.Guest(mc)
	before, err := scan(ctx, c, cs.Paths)
	if err != nil {
		return false, err
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = tgt.Workspace.Path
	}
	if cwd == "" {
		cwd = "/"
	}
	adm := p.Admission()
	timeout, outCap := req.TimeoutSeconds, int64(apiv1.MaxChangesetOutputBytes)
	if adm != nil {
		if adm.Timeout > 0 {
			timeout = adm.Timeout
		}
		if adm.OutputCap > 0 {
			outCap = min(outCap, adm.OutputCap)
		}
	}
	started := s.m.Now()
	res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: req.Command, Cwd: cwd, TimeoutSeconds: timeout,
		MaxOutputBytes: outCap, Confine: p.Command().Confine}})
	if err != nil {
		*ms = s.m.Now().Sub(started).Milliseconds()
		return !session.RefusedBeforeStart(err), session.GuestError(err)
	}
	*ms = res.DurationMillis
	cs.ExitCode = res.ExitCode
	cs.Stdout = tail(res.Stdout, apiv1.MaxChangesetOutputBytes)
	cs.Stderr = tail(res.Stderr, apiv1.MaxChangesetOutputBytes)
	after, err := scan(ctx, c, cs.Paths)
	if err != nil {
		return true, err
	}
	if err := diff(ctx, c, before, after, cs); err != nil {
		return true, err
	}
	cs.SideEffects = networkOf(tgt)
	return true, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
