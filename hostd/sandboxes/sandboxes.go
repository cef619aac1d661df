// Package sandboxes is the lower API (POST /v1/sandboxes): a sandbox is a
// machine to run commands in and move files in and out of, with a TTL
// and nothing else (no checkpoints, children or workspace diff).
//
// It is a sibling of the session core (hostd/session). A sandbox is
// stored as a session record of kind session.KindSandbox, made with the
// core's CreateKind, so its machine, ledger, usage and adoption across a
// daemon restart are the core's own code. What differs lives here: the
// request and answer shapes; a process and a file write walk the core's
// command pipeline (Manager.Walk) with the same judge, gate, admit, hooks,
// record and usage steps as a session's exec and file writes; and a
// sandbox past its TTL is deleted (machine stopped, record removed,
// ledger kept) instead of being kept as expired: by a timer armed at
// create (and again when a restarted daemon adopts it), or by the core's
// sweep, which hands expired sandbox records to this package
// (session.SandboxHooks). The session routes never show a sandbox and the
// sandbox routes never show a session.
package sandboxes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/policy"
)

// Sandbox limits and defaults.
const (
	DefaultSandboxTTLSeconds = apiv1.DefaultSandboxTTLSeconds
	// MaxSandboxFileBytes bounds one fs/read or fs/write.
	MaxSandboxFileBytes = apiv1.MaxSandboxFileBytes
	MaxSandboxEnvVars   = apiv1.MaxSandboxEnvVars
	MaxSandboxEnvBytes  = apiv1.MaxSandboxEnvBytes
	// MaxSandboxAllowHosts bounds a sandbox's allow_hosts.
	MaxSandboxAllowHosts = apiv1.MaxSandboxAllowHosts
	maxSandboxPath       = 4096
	// expirySlack is how long after its expiry a sandbox's own timer
	// removes it.
	expirySlack = 250 * time.Millisecond
)

// The public wire types (package api), kept under these names here.
type (
	SandboxRequest = apiv1.SandboxRequest
	Sandbox        = apiv1.Sandbox
	ProcessRequest = apiv1.ProcessRequest
	ProcessResult  = apiv1.ProcessResult
	SandboxPath    = apiv1.SandboxPath
	SandboxFile    = apiv1.SandboxFile
	SandboxWrite   = apiv1.SandboxWrite
	SandboxWritten = apiv1.SandboxWritten
)

var (
	bad         = session.BadRequest
	ErrNotFound = session.ErrNotFound
	ErrConflict = session.ErrConflict
	ErrTooLarge = session.ErrTooLarge
)

// Service is the daemon's sandboxes: the routes' work, and the removal
// timers of the sandboxes this daemon runs.
type Service struct {
	m *session.Manager

	mu     sync.Mutex
	timers map[string]*time.Timer // sandbox id → its removal at expiry
	closed bool                   // the manager shut down or let go: no more timers
}

var _ session.SandboxHooks = (*Service)(nil)

// New returns the sandboxes of m, and registers them with m: the sweep
// hands this service the sandbox records past their TTL, adoption arms
// their removal again, a delete disarms it, and m's shutdown disarms them
// all.
func New(m *session.Manager) *Service {
	s := &Service{m: m, timers: map[string]*time.Timer{}}
	m.SetSandboxHooks(s)
	m.OnStop(s.stopped)
	m.OnShutdown(s.shutdown)
	return s
}

// notSandboxError is the 404 of a session's id on a sandbox route.
type notSandboxError struct{ id string }

func (e *notSandboxError) Error() string {
	return fmt.Sprintf("%v: %s is an agent session, not a sandbox; use /v1/agents/sessions/%s", ErrNotFound, e.id, e.id)
}
func (e *notSandboxError) Unwrap() error { return ErrNotFound }

func view(s *session.Session) *Sandbox {
	return &Sandbox{ID: s.ID, Backend: s.Backend, Status: s.State, Image: s.Runtime.Image,
		CPUs: s.Runtime.CPUs, MemoryMB: s.Runtime.MemoryMB, Offline: true, AllowHosts: s.Policy.AllowHosts, Workdir: s.Workspace.Path,
		TTLSeconds: int(s.ExpiresAt.Sub(s.CreatedAt).Round(time.Second) / time.Second),
		CreatedAt:  s.CreatedAt, ExpiresAt: s.ExpiresAt}
}

// Create starts a sandbox and returns once commands can run in it.
func (s *Service) Create(ctx context.Context, tenant string, req SandboxRequest) (*Sandbox, error) {
	if req.Offline != nil && !*req.Offline {
		return nil, bad("offline: false: open networking is not offered; name the hosts the sandbox may reach in allow_hosts (it stays offline, with only loopback, and reaches them through the host's egress proxy)")
	}
	var pol *session.PolicyRequest
	if len(req.AllowHosts) > 0 {
		if len(req.AllowHosts) > MaxSandboxAllowHosts {
			return nil, bad("allow_hosts: %d hosts, at most %d", len(req.AllowHosts), MaxSandboxAllowHosts)
		}
		n := &rules.Network{Default: "deny"}
		for _, h := range req.AllowHosts {
			n.Allow = append(n.Allow, rules.AllowEntry{Host: h})
		}
		pol = &session.PolicyRequest{PolicyInput: rules.PolicyInput{Network: n}}
	}
	if len(req.Volumes) > 0 {
		return nil, bad("volumes are not supported yet; move files in and out with fs/write and fs/read")
	}
	if req.TTLSeconds == 0 {
		req.TTLSeconds = DefaultSandboxTTLSeconds
	}
	sb, err := s.m.CreateKind(ctx, tenant, session.CreateRequest{Agent: session.KindSandbox, TTLSeconds: req.TTLSeconds,
		Runtime: session.Runtime{Backend: req.Backend, Image: req.Image, CPUs: req.CPUs, MemoryMB: req.MemoryMB}, Policy: pol}, session.KindSandbox)
	if err != nil {
		return nil, err
	}
	s.removeAtExpiry(sb.ID, sb.ExpiresAt)
	return view(sb), nil
}

// removeAtExpiry arms a timer that removes the sandbox just after its TTL,
// so the machine does not linger until the next sweep. Adopted arms it
// again for the sandboxes a restarted daemon adopts.
func (s *Service) removeAtExpiry(id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Checked under s.mu: a delete takes the machine away before its
	// stop hook (stopped) takes s.mu, so either the machine is gone here
	// or the hook disarms what is armed now.
	if s.closed || s.m.Machine(id) == nil {
		return // let go, or deleted already
	}
	if old := s.timers[id]; old != nil {
		old.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(at.Sub(s.m.Now())+expirySlack, func() {
		s.mu.Lock()
		if s.timers[id] == t {
			delete(s.timers, id)
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return // the manager has let go of its sandboxes
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		row, err := s.m.Store().GetSession(ctx, id)
		if err != nil {
			return // deleted already, or the daemon closed its store
		}
		if s.m.Now().After(row.ExpiresAt) {
			s.expire(ctx, row)
		}
	})
	s.timers[id] = t
}

// Expired removes sandbox record r, which the core's sweep found past its
// TTL (session.SandboxHooks).
func (s *Service) Expired(ctx context.Context, r store.SessionRow) { s.expire(ctx, r) }

// Adopted arms again the removal of a sandbox a restarted daemon adopted
// (session.SandboxHooks).
func (s *Service) Adopted(id string, expiresAt time.Time) { s.removeAtExpiry(id, expiresAt) }

// expire removes sandbox record r, past its TTL: it is marked expired
// (ledgered as sandbox.expire), then deleted like any session (machine
// stopped, record removed; the ledger stays).
func (s *Service) expire(ctx context.Context, r store.SessionRow) {
	if r.State == session.StateRunning {
		// Compare-and-set on the revision listed: of two removals that
		// race (the timer, a read, the sweeper), one goes on.
		if err := s.m.MarkExpired(ctx, r.ID, r.Revision); err != nil {
			return
		}
		s.m.LedgerAppend(ctx, r.ID, "sandbox.expire", map[string]any{"expires_at": r.ExpiresAt})
	}
	// Delete finds the record expired, so it does not sweep again.
	if err := s.m.Delete(ctx, "", r.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.m.Logger().Warn("sweep: remove expired sandbox", "sandbox", r.ID, "err", err)
	}
}

// stopped disarms a deleted sandbox's removal (a session.StopHook). A
// sandbox whose machine was lost keeps it: its record still goes at its
// TTL.
func (s *Service) stopped(_ context.Context, id string, why session.StopReason) {
	if why != session.StopDeleted && why != session.StopExpired {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.timers[id]; t != nil {
		t.Stop()
		delete(s.timers, id)
	}
}

// shutdown disarms every removal: the manager stops its sandboxes or
// lets them go for the next daemon, which arms them again on adoption.
func (s *Service) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for id, t := range s.timers {
		t.Stop()
		delete(s.timers, id)
	}
}

// expiryTimers is how many sandboxes have a removal armed (tests).
func (s *Service) expiryTimers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.timers)
}

// sandbox loads a sandbox record; a session's id, and a sandbox removed
// at its expiry, are not found.
func (s *Service) sandbox(ctx context.Context, tenant, id string) (*session.Session, error) {
	sb, err := s.m.Load(ctx, tenant, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: no sandbox %s (never created, deleted, or removed at its TTL)", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	if sb.Kind != session.KindSandbox {
		return nil, &notSandboxError{id}
	}
	if sb.State == session.StateExpired {
		return nil, fmt.Errorf("%w: sandbox %s expired at %s and was removed", ErrNotFound, id, sb.ExpiresAt.Format(time.RFC3339))
	}
	return sb, nil
}

// checkRunning refuses what is not a running sandbox: the load step's
// own check before the core loads the machine.
func (s *Service) checkRunning(ctx context.Context, tenant, id string) error {
	sb, err := s.sandbox(ctx, tenant, id)
	if err != nil {
		return err
	}
	if sb.State != session.StateRunning {
		return fmt.Errorf("%w: sandbox %s is %s (its machine did not survive a daemon restart); delete it and create another", ErrConflict, id, sb.State)
	}
	return nil
}

// guest returns a running sandbox's guest client, for a read.
func (s *Service) guest(ctx context.Context, tenant, id string) (*client.Client, error) {
	if err := s.checkRunning(ctx, tenant, id); err != nil {
		return nil, err
	}
	_, mc, err := s.m.Running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return session.Guest(mc), nil
}

// Get returns one sandbox.
func (s *Service) Get(ctx context.Context, tenant, id string) (*Sandbox, error) {
	sb, err := s.sandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return view(sb), nil
}

// List returns the tenant's sandboxes, oldest first.
func (s *Service) List(ctx context.Context, tenant string) ([]*Sandbox, error) {
	rows, err := s.m.Store().ListSessions(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := []*Sandbox{}
	for _, r := range rows {
		if !session.IsSandboxID(r.ID) {
			continue
		}
		if sb, err := s.sandbox(ctx, tenant, r.ID); err == nil {
			out = append(out, view(sb))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// Delete stops and removes a sandbox. Idempotent: a sandbox that is
// already gone is not an error, but a session's id is refused (404) and
// the session is left alone.
func (s *Service) Delete(ctx context.Context, tenant, id string) error {
	if _, err := s.sandbox(ctx, tenant, id); err != nil {
		var ns *notSandboxError
		if errors.As(err, &ns) || !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	}
	if err := s.m.Delete(ctx, tenant, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkPath refuses what a sandbox path may not be.
func checkPath(field, p string) error {
	switch {
	case p == "":
		return bad("%s is empty; give an absolute path such as /workspace/notes.txt", field)
	case len(p) > maxSandboxPath:
		return bad("%s is %d bytes long, more than %d", field, len(p), maxSandboxPath)
	case strings.ContainsAny(p, "\x00\n\r"):
		return bad("%s %q contains a NUL or newline character", field, p)
	case !strings.HasPrefix(p, "/"):
		return bad("%s %q is relative; give an absolute path", field, p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return bad("%s %q has a .. component; give the path without it", field, p)
		}
	}
	return nil
}

// Process runs a shell line in the sandbox and ledgers it. It walks the
// command pipeline as a session's exec does: the process policy judges
// it, seeing its environment and directory as well as its text (the
// operator's modules; a sandbox has no process rules of its own, and no
// approvals, so a command the policy would hold is refused), and it is
// counted in, and limited by, the record's budget.
func (s *Service) Process(ctx context.Context, tenant, id string, req ProcessRequest) (*ProcessResult, error) {
	var (
		cwd     string
		env     []string
		res     *api.ExecResult
		out     *ProcessResult
		runErr  error
		started time.Time
		lostMS  int64
		lostErr string
	)
	m := s.m
	err := m.Walk(ctx, session.CommandProcess, tenant, id,
		session.NewStep(session.StepValidate, func(_ context.Context, p session.Pipe) error {
			p.Command().Text = req.Command
			if strings.TrimSpace(req.Command) == "" {
				return bad("command is empty")
			}
			if len(req.Command) > session.MaxCommandBytes || strings.ContainsRune(req.Command, 0) {
				return bad("command must be at most %d bytes without NUL", session.MaxCommandBytes)
			}
			if req.TimeoutSeconds == 0 {
				req.TimeoutSeconds = session.DefaultExecTimeout
			}
			if req.TimeoutSeconds < 1 || req.TimeoutSeconds > session.MaxExecTimeout {
				return bad("timeout_seconds %d must be from 1 to %d", req.TimeoutSeconds, session.MaxExecTimeout)
			}
			if req.Cwd != "" {
				if err := checkPath("cwd", req.Cwd); err != nil {
					return err
				}
				// The policy judges the directory the guest will use, so
				// it gets it in one spelling: "/./secrets" and
				// "//secrets/" are "/secrets" to a rule as to the kernel.
				req.Cwd = path.Clean(req.Cwd)
			}
			var err error
			env, err = sandboxEnv(req.Env)
			return err
		}),
		session.LoadCheckedStep(s.checkRunning),
		session.JudgeWithoutApprovalsStep(func(p session.Pipe) session.ProcessCheck {
			// The directory it runs in, once the record is loaded: the
			// policy judges it, and run and record use it.
			if cwd = req.Cwd; cwd == "" {
				cwd = p.Session().Workspace.Path
			}
			return session.ProcessCheck{Kind: policy.KindExec, Command: req.Command,
				Params: map[string]any{"timeout_seconds": req.TimeoutSeconds}, Env: req.Env, Cwd: cwd}
		}),
		session.GateCommandStep(),
		session.AdmitStep(session.StartExec, req.TimeoutSeconds),
		session.HooksStep("exec"),
		session.NewStep(session.StepRun, func(ctx context.Context, p session.Pipe) error {
			adm := p.Admission()
			started = m.Now()
			var err error
			res, err = p.Guest().Exec(ctx, api.ExecRequest{Command: api.Command{Shell: req.Command, Cwd: cwd, Env: env,
				TimeoutSeconds: adm.Timeout, MaxOutputBytes: adm.OutputCap, Confine: p.Command().Confine}})
			if err != nil && session.RefusedBeforeStart(err) {
				return session.GuestError(err)
			}
			p.Started()
			if err != nil {
				lostMS, lostErr, runErr = m.Now().Sub(started).Milliseconds(), session.ClipText(err.Error(), 300), session.GuestError(err)
				return runErr
			}
			out = &ProcessResult{Result: "exec", ExecResult: *p.ExecResult(res)}
			return nil
		}),
		session.NewStep(session.StepRecord, func(ctx context.Context, p session.Pipe) error {
			rule := p.Command().Rule
			// Variable names are ledgered, never their values.
			names := make([]string, 0, len(req.Env))
			for k := range req.Env {
				names = append(names, k)
			}
			sort.Strings(names)
			if runErr != nil {
				m.LedgerAppend(ctx, id, "exec", p.WithNotes(map[string]any{"command": req.Command, "cwd": cwd, "env": names, "interrupted": true, "error": lostErr, "duration_ms": lostMS, "policy": rule}))
				return nil
			}
			entry := map[string]any{"command": req.Command, "cwd": cwd, "env": names, "exit_code": res.ExitCode, "duration_ms": res.DurationMillis, "timed_out": res.TimedOut, "policy": rule}
			if adm := p.Admission(); adm.OutputCap > 0 || adm.Capped {
				for k, v := range p.ExecLedger(req.Command, &out.ExecResult) {
					if _, ok := entry[k]; !ok {
						entry[k] = v
					}
				}
			}
			m.LedgerAppend(ctx, id, "exec", p.WithNotes(entry))
			return nil
		}),
		session.NewStep(session.StepUsage, func(_ context.Context, p session.Pipe) error {
			ms := lostMS
			if runErr == nil {
				ms = res.DurationMillis
				if adm := p.Admission(); res.TimedOut && adm.Capped {
					ms = max(ms, int64(adm.Timeout)*1000)
				}
			}
			p.CountExec(ms)
			return nil
		}),
	)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sandboxEnv turns env into sorted KEY=VALUE entries.
func sandboxEnv(env map[string]string) ([]string, error) {
	if len(env) > MaxSandboxEnvVars {
		return nil, bad("env has %d variables, more than %d", len(env), MaxSandboxEnvVars)
	}
	out := make([]string, 0, len(env))
	total := 0
	for k, v := range env {
		if !envKeyRE.MatchString(k) {
			return nil, bad("env name %q must be letters, digits and '_', not starting with a digit", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, bad("env %s contains a NUL byte", k)
		}
		total += len(k) + 1 + len(v)
		out = append(out, k+"="+v)
	}
	if total > MaxSandboxEnvBytes {
		return nil, bad("env is %d bytes, more than %d", total, MaxSandboxEnvBytes)
	}
	sort.Strings(out)
	return out, nil
}

func fileMissing(id, p string) error {
	return fmt.Errorf("%w: %s does not exist in sandbox %s", ErrNotFound, p, id)
}

// ReadFile returns a whole file of at most MaxSandboxFileBytes: in one
// guest read when it is small, in ranged reads when it is larger.
func (s *Service) ReadFile(ctx context.Context, tenant, id, p string) (*SandboxFile, error) {
	c, err := s.guest(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if err := checkPath("path", p); err != nil {
		return nil, err
	}
	f, err := c.ReadFile(ctx, p)
	if err == nil {
		return &SandboxFile{Path: f.Path, ContentBase64: base64.StdEncoding.EncodeToString(f.Content), Size: int64(len(f.Content)), Mode: f.Mode}, nil
	}
	switch err = session.GuestError(err); {
	case errors.Is(err, ErrNotFound):
		return nil, fileMissing(id, p)
	case !errors.Is(err, ErrTooLarge):
		return nil, err
	}
	var data []byte
	var size int64 = -1
	for {
		r, err := c.ReadRange(ctx, p, int64(len(data)), api.MaxRangeBytes, false)
		if err != nil {
			if err = session.GuestError(err); errors.Is(err, ErrNotFound) {
				return nil, fileMissing(id, p)
			}
			return nil, err
		}
		if size < 0 {
			if r.Size > MaxSandboxFileBytes {
				return nil, fmt.Errorf("%w: %s is %d bytes, more than the %d fs/read returns; read it in parts with a command (for example split or tail -c)", ErrTooLarge, p, r.Size, MaxSandboxFileBytes)
			}
			size, data = r.Size, make([]byte, 0, r.Size)
		}
		if r.Size != size {
			return nil, fmt.Errorf("%w: %s changed size while it was read (%d, then %d bytes); read it again", ErrConflict, p, size, r.Size)
		}
		data = append(data, r.Data...)
		if r.EOF || len(r.Data) == 0 {
			break
		}
	}
	return &SandboxFile{Path: path.Clean(p), ContentBase64: base64.StdEncoding.EncodeToString(data), Size: int64(len(data)), Mode: followedMode(ctx, c, p)}, nil
}

// followedMode is the permission bits of what p leads to, following up
// to 8 symbolic links ("" when that fails).
func followedMode(ctx context.Context, c *client.Client, p string) string {
	for range 8 {
		fi, err := c.Stat(ctx, p)
		if err != nil {
			return ""
		}
		if fi.Type != api.TypeSymlink {
			return fi.Mode
		}
		if strings.HasPrefix(fi.Target, "/") {
			p = fi.Target
		} else {
			p = path.Join(path.Dir(p), fi.Target)
		}
	}
	return ""
}

// WriteFile writes a whole file of at most MaxSandboxFileBytes, creating
// its parents: in one guest write when it fits one agent call
// (api.MaxFileWriteBytes), as a verified guest upload in parts when it is
// larger. Either way the write walks the command pipeline once, as a
// session's file write does (the work slot, the budget's workspace
// bytes, the command hooks, one ledger entry), however many parts it
// takes. The ledger gets the path and size, never the content.
func (s *Service) WriteFile(ctx context.Context, tenant, id string, req SandboxWrite) (*SandboxWritten, error) {
	var (
		data []byte
		out  *SandboxWritten
	)
	m := s.m
	err := m.Walk(ctx, session.CommandFile, tenant, id,
		session.NewStep(session.StepValidate, func(_ context.Context, p session.Pipe) error {
			p.Command().Verb, p.Command().Text = "write", req.Path
			if err := checkPath("path", req.Path); err != nil {
				return err
			}
			if req.ContentBase64 != "" && req.Content != "" {
				return bad("give content_base64 or content, not both")
			}
			if req.Content != "" {
				data = []byte(req.Content)
			} else {
				if base64.StdEncoding.DecodedLen(len(req.ContentBase64)) > MaxSandboxFileBytes+3 {
					return fmt.Errorf("%w: content is larger than the %d bytes fs/write takes", ErrTooLarge, MaxSandboxFileBytes)
				}
				var err error
				if data, err = base64.StdEncoding.DecodeString(req.ContentBase64); err != nil {
					return bad("content_base64 is not valid base64: %v", err)
				}
			}
			if len(data) > MaxSandboxFileBytes {
				return fmt.Errorf("%w: content is %d bytes, more than the %d fs/write takes", ErrTooLarge, len(data), MaxSandboxFileBytes)
			}
			return nil
		}),
		session.LoadCheckedStep(s.checkRunning),
		session.GateWriteStep(req.Path),
		session.AdmitWriteStep(func() int64 { return int64(len(data)) }, "file write"),
		session.HooksStep("file"),
		session.NewStep(session.StepRun, func(ctx context.Context, p session.Pipe) error {
			deny, exec := session.WriteGuard(p.Session())
			c := p.Guest()
			// A call cut off on the way (the caller hung up, the agent
			// went away) may have written the file: it is ledgered as
			// interrupted (Pipe.RunCutOff), as an exec is, so no write
			// escapes the ledger. Only the agent's refusal (4xx) wrote
			// nothing.
			if len(data) <= api.MaxFileWriteBytes {
				fi, err := c.WriteFile(ctx, api.FileContent{Path: req.Path, Content: data, Mode: req.Mode, Deny: deny, Exec: exec})
				if err != nil {
					return p.RunCutOff(err)
				}
				p.Started()
				out = &SandboxWritten{Path: fi.Path, Size: fi.Size, Mode: fi.Mode}
				return nil
			}
			res, completing, err := uploadFile(ctx, c, req, data, deny, exec)
			if err != nil {
				if !completing {
					// Failed in the parts: aborted, nothing renamed.
					return session.GuestError(err)
				}
				return p.RunCutOff(err)
			}
			p.Started()
			out = &SandboxWritten{Path: res.Path, Size: res.Size, Mode: followedMode(ctx, c, res.Path)}
			return nil
		}),
		session.NewStep(session.StepRecord, func(ctx context.Context, p session.Pipe) error {
			if p.CutOff() {
				m.LedgerAppend(ctx, id, "file.write", p.WithNotes(p.WithCutOff(map[string]any{"path": path.Clean(req.Path), "size": len(data)})))
				return nil
			}
			m.LedgerAppend(ctx, id, "file.write", p.WithNotes(map[string]any{"path": out.Path, "size": out.Size}))
			return nil
		}),
	)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// uploadFile writes data, larger than one agent call takes, as a verified
// upload: its parts, then the completion, which checks size and SHA-256
// and renames the file into place. A failed upload is aborted. The error
// is the guest client's; completing says it came from the completion
// (which may have renamed the file into place before it was cut off).
func uploadFile(ctx context.Context, c *client.Client, req SandboxWrite, data []byte, deny, exec []string) (res *api.UploadResult, completing bool, err error) {
	var b [8]byte
	rand.Read(b[:])
	up := "sbxw-" + hex.EncodeToString(b[:])
	sum := sha256.Sum256(data)
	res, err = func() (*api.UploadResult, error) {
		for off := 0; off < len(data); off += api.MaxPartBytes {
			if _, err := c.UploadPart(ctx, up, int64(off), data[off:min(off+api.MaxPartBytes, len(data))]); err != nil {
				return nil, err
			}
		}
		completing = true
		return c.CompleteUpload(ctx, up, api.UploadComplete{Path: req.Path, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Mode: req.Mode, Deny: deny, Exec: exec})
	}()
	if err != nil {
		c.AbortUpload(context.WithoutCancel(ctx), up)
		return nil, completing, err
	}
	return res, false, nil
}
