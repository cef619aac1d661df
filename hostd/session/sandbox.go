package session

// Sandboxes: the lower API (POST /v1/sandboxes). A sandbox is a machine to
// run commands in and move files in and out of, with a TTL and nothing
// else: no checkpoints, children or workspace diff. It is stored as a
// session record of kind KindSandbox, so creating it, running commands,
// files, the ledger, the TTL sweep and adoption across a daemon restart
// are the sessions' own code. What differs lives here: the id prefix, the
// request and answer shapes, and that a sandbox past its TTL is deleted
// (machine stopped, record removed, ledger kept) instead of being kept as
// expired. The session routes never show a sandbox and the sandbox routes
// never show a session.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/egress/rules"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/policy"
)

// KindSandbox marks a session record that is a sandbox.
const KindSandbox = apiv1.KindSandbox

// Sandbox limits and defaults.
const (
	// SandboxIDPrefix starts every sandbox id and no session id.
	SandboxIDPrefix          = apiv1.SandboxIDPrefix
	DefaultSandboxTTLSeconds = apiv1.DefaultSandboxTTLSeconds
	// MaxSandboxFileBytes bounds one fs/read or fs/write.
	MaxSandboxFileBytes = apiv1.MaxSandboxFileBytes
	MaxSandboxEnvVars   = apiv1.MaxSandboxEnvVars
	MaxSandboxEnvBytes  = apiv1.MaxSandboxEnvBytes
	maxSandboxPath      = 4096
	// sandboxExpirySlack is how long after its expiry a sandbox's own
	// timer removes it.
	sandboxExpirySlack = 250 * time.Millisecond
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

// notKindError is a 404 for an id of the other kind: a session id on a
// sandbox route, or a sandbox id on a session route.
type notKindError struct{ id, is, use string }

func (e *notKindError) Error() string {
	return fmt.Sprintf("%v: %s is %s; use %s", ErrNotFound, e.id, e.is, e.use)
}
func (e *notKindError) Unwrap() error { return ErrNotFound }

func notSandboxErr(id string) error {
	return &notKindError{id, "an agent session, not a sandbox", "/v1/agents/sessions/" + id}
}

func notSessionErr(id string) error {
	return &notKindError{id, "a sandbox, not an agent session", "/v1/sandboxes/" + id}
}

// IsSandboxID reports whether id has the form only sandboxes are given, so
// the session routes can answer 404 without reading the record.
func IsSandboxID(id string) bool { return strings.HasPrefix(id, SandboxIDPrefix) }

// NotSession is the error a session route answers for a sandbox's id.
func NotSession(id string) error { return notSessionErr(id) }

// newIDFor mints the id of a new record of kind.
func newIDFor(kind string) string {
	if kind != KindSandbox {
		return newID()
	}
	var b [8]byte
	rand.Read(b[:])
	return SandboxIDPrefix + hex.EncodeToString(b[:])
}

// MaxSandboxAllowHosts bounds a sandbox's allow_hosts.
const MaxSandboxAllowHosts = apiv1.MaxSandboxAllowHosts

func sandboxView(s *Session) *Sandbox {
	return &Sandbox{ID: s.ID, Backend: s.Backend, Status: s.State, Image: s.Runtime.Image,
		CPUs: s.Runtime.CPUs, MemoryMB: s.Runtime.MemoryMB, Offline: true, AllowHosts: s.Policy.AllowHosts, Workdir: s.Workspace.Path,
		TTLSeconds: int(s.ExpiresAt.Sub(s.CreatedAt).Round(time.Second) / time.Second),
		CreatedAt:  s.CreatedAt, ExpiresAt: s.ExpiresAt}
}

// CreateSandbox starts a sandbox and returns once commands can run in it.
func (m *Manager) CreateSandbox(ctx context.Context, tenant string, req SandboxRequest) (*Sandbox, error) {
	if req.Offline != nil && !*req.Offline {
		return nil, bad("offline: false: open networking is not offered; name the hosts the sandbox may reach in allow_hosts (it stays offline, with only loopback, and reaches them through the host's egress proxy)")
	}
	var pol *PolicyRequest
	if len(req.AllowHosts) > 0 {
		if len(req.AllowHosts) > MaxSandboxAllowHosts {
			return nil, bad("allow_hosts: %d hosts, at most %d", len(req.AllowHosts), MaxSandboxAllowHosts)
		}
		n := &rules.Network{Default: "deny"}
		for _, h := range req.AllowHosts {
			n.Allow = append(n.Allow, rules.AllowEntry{Host: h})
		}
		pol = &PolicyRequest{PolicyInput: rules.PolicyInput{Network: n}}
	}
	if len(req.Volumes) > 0 {
		return nil, bad("volumes are not supported yet; move files in and out with fs/write and fs/read")
	}
	if req.TTLSeconds == 0 {
		req.TTLSeconds = DefaultSandboxTTLSeconds
	}
	s, err := m.create(ctx, tenant, CreateRequest{Agent: KindSandbox, TTLSeconds: req.TTLSeconds,
		Runtime: Runtime{Backend: req.Backend, Image: req.Image, CPUs: req.CPUs, MemoryMB: req.MemoryMB}, Policy: pol}, KindSandbox)
	if err != nil {
		return nil, err
	}
	m.removeAtExpiry(s.ID, s.ExpiresAt)
	return sandboxView(s), nil
}

// removeAtExpiry arms a timer that removes the sandbox just after its TTL,
// so the machine does not linger until the next sweep. Reattach arms it
// again for the sandboxes a restarted daemon adopts.
func (m *Manager) removeAtExpiry(id string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done || m.machines[id] == nil {
		return // let go, or deleted already
	}
	if old := m.expiry[id]; old != nil {
		old.Stop()
	}
	if m.expiry == nil {
		m.expiry = map[string]*time.Timer{}
	}
	var t *time.Timer
	t = time.AfterFunc(at.Sub(m.now())+sandboxExpirySlack, func() {
		m.mu.Lock()
		if m.expiry[id] == t {
			delete(m.expiry, id)
		}
		m.mu.Unlock()
		if m.stopped() {
			return // this manager has let go of its sandboxes
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		row, err := m.st.GetSession(ctx, id)
		if err != nil {
			return // deleted already, or the daemon closed its store
		}
		m.sweepSandbox(ctx, row, m.now())
	})
	m.expiry[id] = t
}

// expiryTimers is how many sandboxes have a removal armed (tests).
func (m *Manager) expiryTimers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.expiry)
}

// stopExpiryLocked disarms every removal at expiry; m.mu is held.
func (m *Manager) stopExpiryLocked() {
	for id, t := range m.expiry {
		t.Stop()
		delete(m.expiry, id)
	}
}

// recordKind reads the kind out of a stored record.
func recordKind(raw []byte) string {
	var k struct {
		Session struct {
			Kind string `json:"kind"`
		} `json:"session"`
	}
	json.Unmarshal(raw, &k)
	return k.Session.Kind
}

// sweepSandbox removes r if it is a sandbox past its TTL: it is marked
// expired (ledgered as sandbox.expire), then deleted like any session
// (machine stopped, record removed; the ledger stays). It reports whether
// r was such a sandbox, so Sweep leaves it alone.
func (m *Manager) sweepSandbox(ctx context.Context, r store.SessionRow, now time.Time) bool {
	// The id prefix saves decoding every expired session's record.
	if !IsSandboxID(r.ID) || !now.After(r.ExpiresAt) || recordKind(r.Record) != KindSandbox {
		return false
	}
	if r.State == StateRunning {
		// Compare-and-set on the revision listed: of two sweeps that race
		// (the timer, a read, the sweeper), one goes on.
		if _, err := m.update(ctx, r.ID, r.Revision, func(s *Session) error { s.State = StateExpired; return nil }); err != nil {
			return true
		}
		m.ledgerAppend(ctx, r.ID, "sandbox.expire", map[string]any{"expires_at": r.ExpiresAt})
	}
	// Delete finds the record expired, so it does not sweep again.
	if err := m.Delete(ctx, "", r.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Warn("sweep: remove expired sandbox", "sandbox", r.ID, "err", err)
	}
	return true
}

// sandbox loads a sandbox record; a session's id, and a sandbox removed
// at its expiry, are not found.
func (m *Manager) sandbox(ctx context.Context, tenant, id string) (*Session, error) {
	s, _, err := m.load(ctx, tenant, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: no sandbox %s (never created, deleted, or removed at its TTL)", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	if s.Kind != KindSandbox {
		return nil, notSandboxErr(id)
	}
	if s.State == StateExpired {
		return nil, fmt.Errorf("%w: sandbox %s expired at %s and was removed", ErrNotFound, id, s.ExpiresAt.Format(time.RFC3339))
	}
	return s, nil
}

// sandboxGuest returns a running sandbox and its guest client; write
// refuses while a lifecycle operation holds it.
func (m *Manager) sandboxGuest(ctx context.Context, tenant, id string, write bool) (*Session, *client.Client, error) {
	s, err := m.sandbox(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	if s.State != StateRunning {
		return nil, nil, fmt.Errorf("%w: sandbox %s is %s (its machine did not survive a daemon restart); delete it and create another", ErrConflict, id, s.State)
	}
	if write {
		if err := m.busy(id); err != nil {
			return nil, nil, err
		}
	}
	c, err := m.machineFor(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	return s, c, nil
}

// GetSandbox returns one sandbox.
func (m *Manager) GetSandbox(ctx context.Context, tenant, id string) (*Sandbox, error) {
	s, err := m.sandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return sandboxView(s), nil
}

// ListSandboxes returns the tenant's sandboxes, oldest first.
func (m *Manager) ListSandboxes(ctx context.Context, tenant string) ([]*Sandbox, error) {
	rows, err := m.st.ListSessions(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := []*Sandbox{}
	for _, r := range rows {
		if !IsSandboxID(r.ID) {
			continue
		}
		if s, err := m.sandbox(ctx, tenant, r.ID); err == nil {
			out = append(out, sandboxView(s))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// DeleteSandbox stops and removes a sandbox. Idempotent: a sandbox that
// is already gone is not an error, but a session's id is refused (404)
// and the session is left alone.
func (m *Manager) DeleteSandbox(ctx context.Context, tenant, id string) error {
	if _, err := m.sandbox(ctx, tenant, id); err != nil {
		var nk *notKindError
		if errors.As(err, &nk) || !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	}
	if err := m.Delete(ctx, tenant, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkSandboxPath refuses what a sandbox path may not be.
func checkSandboxPath(field, p string) error {
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

// SandboxProcess runs a shell line in the sandbox and ledgers it. It
// walks the command pipeline as a session's exec does: the process
// policy judges it (the operator's modules; a sandbox has no process
// rules of its own, and no approvals, so a command the policy would hold
// is refused), and it is counted in, and limited by, the record's budget.
func (m *Manager) SandboxProcess(ctx context.Context, tenant, id string, req ProcessRequest) (*ProcessResult, error) {
	p := m.newPipe(ctx, CommandProcess, tenant, id)
	var (
		cwd     string
		env     []string
		res     *api.ExecResult
		out     *ProcessResult
		started time.Time
		lostMS  int64
		lostErr string
	)
	err := p.walk(ctx,
		step(StepValidate, func(context.Context) error {
			p.cmd.Text = req.Command
			if strings.TrimSpace(req.Command) == "" {
				return bad("command is empty")
			}
			if len(req.Command) > MaxCommandBytes || strings.ContainsRune(req.Command, 0) {
				return bad("command must be at most %d bytes without NUL", MaxCommandBytes)
			}
			if req.TimeoutSeconds == 0 {
				req.TimeoutSeconds = DefaultExecTimeout
			}
			if req.TimeoutSeconds < 1 || req.TimeoutSeconds > MaxExecTimeout {
				return bad("timeout_seconds %d must be from 1 to %d", req.TimeoutSeconds, MaxExecTimeout)
			}
			if req.Cwd != "" {
				if err := checkSandboxPath("cwd", req.Cwd); err != nil {
					return err
				}
			}
			var err error
			env, err = sandboxEnv(req.Env)
			return err
		}),
		pipeStep{StepLoad, func(ctx context.Context, p *pipe) error {
			s, c, err := m.sandboxGuest(ctx, tenant, id, false)
			if err != nil {
				return err
			}
			p.s, p.cl = s, c
			if cwd = req.Cwd; cwd == "" {
				cwd = s.Workspace.Path
			}
			return nil
		}},
		judgeWithoutApprovals(commandCheck{kind: policy.KindExec, command: req.Command,
			params: map[string]any{"timeout_seconds": req.TimeoutSeconds}}),
		gateCommand(false),
		admitStep(StartExec, req.TimeoutSeconds),
		runHooks("exec"),
		step(StepRun, func(ctx context.Context) error {
			started = m.now()
			var err error
			res, err = p.cl.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: req.Command, Cwd: cwd, Env: env, TimeoutSeconds: p.adm.Timeout, MaxOutputBytes: p.adm.OutputCap}})
			if err != nil && refusedBeforeStart(err) {
				return guestErr(err)
			}
			p.ran, p.kept = true, true
			if err != nil {
				lostMS, lostErr, p.err = m.now().Sub(started).Milliseconds(), clipText(err.Error(), 300), guestErr(err)
				return p.err
			}
			out = &ProcessResult{Result: "exec", ExecResult: *execResult(res, p.adm.OutputCap)}
			return nil
		}),
		step(StepRecord, func(ctx context.Context) error {
			// Variable names are ledgered, never their values.
			names := make([]string, 0, len(req.Env))
			for k := range req.Env {
				names = append(names, k)
			}
			sort.Strings(names)
			if p.err != nil {
				m.ledgerAppend(context.WithoutCancel(ctx), id, "exec", p.withNotes(map[string]any{"command": req.Command, "cwd": cwd, "env": names, "interrupted": true, "error": lostErr, "duration_ms": lostMS, "policy": p.cmd.Rule}))
				return nil
			}
			entry := map[string]any{"command": req.Command, "cwd": cwd, "env": names, "exit_code": res.ExitCode, "duration_ms": res.DurationMillis, "timed_out": res.TimedOut, "policy": p.cmd.Rule}
			if p.adm.OutputCap > 0 || p.adm.Capped {
				for k, v := range execLedger(req.Command, &out.ExecResult, p.adm) {
					if _, ok := entry[k]; !ok {
						entry[k] = v
					}
				}
			}
			m.ledgerAppend(ctx, id, "exec", p.withNotes(entry))
			return nil
		}),
		step(StepUsage, func(context.Context) error {
			ms := lostMS
			if p.err == nil {
				ms = res.DurationMillis
				if res.TimedOut && p.adm.Capped {
					ms = max(ms, int64(p.adm.Timeout)*1000)
				}
			}
			m.addUsage(id, store.UsageRow{Execs: p.adm.Untaken(), ExecMS: ms})
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

// SandboxReadFile returns a whole file of at most MaxSandboxFileBytes: in
// one guest read when it is small, in ranged reads when it is larger.
func (m *Manager) SandboxReadFile(ctx context.Context, tenant, id, p string) (*SandboxFile, error) {
	if _, _, err := m.sandboxGuest(ctx, tenant, id, false); err != nil {
		return nil, err
	}
	if err := checkSandboxPath("path", p); err != nil {
		return nil, err
	}
	f, err := m.ReadFile(ctx, tenant, id, p)
	switch {
	case err == nil:
		return &SandboxFile{Path: f.Path, ContentBase64: f.ContentBase64, Size: int64(f.Size), Mode: f.Mode}, nil
	case errors.Is(err, ErrNotFound):
		return nil, fileMissing(id, p)
	case !errors.Is(err, ErrTooLarge):
		return nil, err
	}
	_, c, err := m.sandboxGuest(ctx, tenant, id, false)
	if err != nil {
		return nil, err
	}
	var data []byte
	var size int64 = -1
	for {
		r, err := c.ReadRange(ctx, p, int64(len(data)), api.MaxRangeBytes, false)
		if err != nil {
			if err = guestErr(err); errors.Is(err, ErrNotFound) {
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

// SandboxWriteFile writes a whole file of at most MaxSandboxFileBytes,
// creating its parents: in one guest write when it is small, as a
// verified guest upload when it is larger. The ledger gets the path and
// size, never the content.
func (m *Manager) SandboxWriteFile(ctx context.Context, tenant, id string, req SandboxWrite) (*SandboxWritten, error) {
	if _, _, err := m.sandboxGuest(ctx, tenant, id, true); err != nil {
		return nil, err
	}
	if err := checkSandboxPath("path", req.Path); err != nil {
		return nil, err
	}
	if req.ContentBase64 != "" && req.Content != "" {
		return nil, bad("give content_base64 or content, not both")
	}
	var data []byte
	if req.Content != "" {
		data = []byte(req.Content)
	} else {
		if base64.StdEncoding.DecodedLen(len(req.ContentBase64)) > MaxSandboxFileBytes+3 {
			return nil, fmt.Errorf("%w: content is larger than the %d bytes fs/write takes", ErrTooLarge, MaxSandboxFileBytes)
		}
		var err error
		if data, err = base64.StdEncoding.DecodeString(req.ContentBase64); err != nil {
			return nil, bad("content_base64 is not valid base64: %v", err)
		}
	}
	if len(data) > MaxSandboxFileBytes {
		return nil, fmt.Errorf("%w: content is %d bytes, more than the %d fs/write takes", ErrTooLarge, len(data), MaxSandboxFileBytes)
	}
	if len(data) <= MaxFileWriteBytes {
		fi, err := m.WriteFile(ctx, tenant, id, FileWrite{Path: req.Path, ContentBase64: base64.StdEncoding.EncodeToString(data), Mode: req.Mode})
		if err != nil {
			return nil, err
		}
		return &SandboxWritten{Path: fi.Path, Size: fi.Size, Mode: fi.Mode}, nil
	}
	s, c, err := m.sandboxGuest(ctx, tenant, id, true)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	rand.Read(b[:])
	up := "sbxw-" + hex.EncodeToString(b[:])
	sum := sha256.Sum256(data)
	res, err := func() (*api.UploadResult, error) {
		for off := 0; off < len(data); off += api.MaxPartBytes {
			if _, err := c.UploadPart(ctx, up, int64(off), data[off:min(off+api.MaxPartBytes, len(data))]); err != nil {
				return nil, err
			}
		}
		return c.CompleteUpload(ctx, up, api.UploadComplete{Path: req.Path, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Mode: req.Mode, Deny: denyFor(s), Exec: execFor(s)})
	}()
	if err != nil {
		c.AbortUpload(context.WithoutCancel(ctx), up)
		return nil, guestErr(err)
	}
	m.ledgerAppend(ctx, id, "file.write", map[string]any{"path": res.Path, "size": res.Size})
	return &SandboxWritten{Path: res.Path, Size: res.Size, Mode: followedMode(ctx, c, res.Path)}, nil
}
