// Package session is the domain of agent sessions: one handle for a
// sandbox, its workspace, its checkpoints and children, and its ledger.
// HTTP handlers (hostd/api) are thin; the rules live here. State is in the
// SQLite store (hostd/store); every action is ledgered (hostd/ledger).
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/policy"
)

// errNotRunning aborts a state change of a session that stopped running
// meanwhile.
var errNotRunning = errors.New("session is not running")

// The session's sentinel errors are errdefs' kinds under the names the
// package has always used; hostd/api answers each with its kind's status
// and code (errdefs.HTTPStatus, errdefs.Code).
var (
	ErrBadRequest = errdefs.ErrInvalidArgument // 400
	ErrNotFound   = errdefs.ErrNotFound        // 404
	ErrConflict   = errdefs.ErrConflict        // 409
	ErrRevision   = errdefs.ErrRevision        // 412
	ErrBadGateway = errdefs.ErrBadGateway      // 502: the sandbox could not be made ready
)

// Limits on what callers send.
const (
	MaxTTLSeconds      = apiv1.MaxTTLSeconds
	DefaultTTLSeconds  = apiv1.DefaultTTLSeconds
	MaxAgentName       = apiv1.MaxAgentName
	MaxCommandBytes    = apiv1.MaxCommandBytes
	MaxExecTimeout     = apiv1.MaxExecTimeout
	DefaultExecTimeout = apiv1.DefaultExecTimeout
	MaxTagLen          = apiv1.MaxTagLen
)

// States of a session.
const (
	StateRunning = apiv1.StateRunning
	StateExpired = apiv1.StateExpired
	StateDeleted = apiv1.StateDeleted
	StateGone    = apiv1.StateGone
)

// The public wire types (package api), kept under these names here.
type (
	Runtime       = apiv1.Runtime
	Workspace     = apiv1.Workspace
	Checkpoint    = apiv1.Checkpoint
	Usage         = apiv1.Usage
	Session       = apiv1.Session
	CreateRequest = apiv1.CreateRequest
	ExecRequest   = apiv1.ExecRequest
	ExecResult    = apiv1.ExecResult
)

// Manager runs sessions on the daemon's backends: a default one and any
// others a create may name in runtime.backend.
type Manager struct {
	st       *store.Store
	ledger   *ledger.Ledger
	backend  hypervisor.Backend            // the default
	backends map[string]hypervisor.Backend // every enabled one, the default included
	image    string
	log      *slog.Logger
	now      func() time.Time
	// images is the images directory, where the built-in image is
	// built on first use (firstimage.go); "" builds nothing.
	images string

	egress     Egress
	egressRoot string
	trustPEM   []byte

	// stops are the siblings' hooks for a session that stops running
	// (core.go).
	stops  hookList[StopHook]
	adopts hookList[AdoptHook]
	// sib are the siblings' busy checks and shutdown hooks (walk.go).
	sib siblingHooks

	// policy decides commands and approvals (nil: sessions with process
	// rules are refused); appr is the approvals service (judge.go).
	policy Decider
	appr   approvalsSlot
	// budgets is the budgets service (budget.go).
	budgets budgetsSlot
	// cmds are the command hooks every command passes (pipeline.go).
	cmds commandHooks
	// sbx are the sandboxes sibling's hooks (sandbox.go).
	sbx sandboxHooksSlot

	mu        sync.Mutex
	machines  map[string]hypervisor.Machine // session id → running sandbox
	gate      map[string]string             // session id → lifecycle op in flight
	done      bool                          // Shutdown or Detach ran: no more background work
	egressLog egressLogSlot                 // where egress decisions go (egress.go)
	life      lifecycleState                // execs in flight, markers, test hooks (gate.go)
	verifies  verifyGate                    // ledger verifies in flight (verifygate.go)

	// admission settings, and what live machines and checkpoints hold
	// (admission.go); under mu.
	admission AdmissionConfig
	held      map[string]*holding
	heldSeq   int
}

// Config configures a Manager.
type Config struct {
	Store  *store.Store
	Ledger *ledger.Ledger
	// Backend is the default backend; Backends are the others a create
	// may ask for by name (runtime.backend).
	Backend      hypervisor.Backend
	Backends     []hypervisor.Backend
	DefaultImage string
	// ImagesDir is the backends' images directory: a create that needs
	// the built-in image (image.DefaultName) builds it there if it is not
	// built yet. Empty: nothing is built.
	ImagesDir string
	Logger    *slog.Logger
	// Egress serves sandboxes' network; nil allows offline policies only.
	// EgressRoot is the directory for the per-sandbox socket directories.
	Egress     Egress
	EgressRoot string
	// TrustPEM is extra CA certificates every sandbox trusts (the egress
	// interception CA, an operator's own).
	TrustPEM []byte
	// Policy is the policy engine; nil refuses process rules.
	Policy Decider
	// Now is the clock (nil: time.Now); tests move it.
	Now func() time.Time
}

// New returns a Manager. It starts nothing.
func New(c Config) *Manager {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	backends := map[string]hypervisor.Backend{}
	for _, b := range append([]hypervisor.Backend{c.Backend}, c.Backends...) {
		if b != nil {
			if _, dup := backends[b.Name()]; !dup {
				backends[b.Name()] = b
			}
		}
	}
	now := c.Now
	if now == nil {
		now = time.Now
	}
	return &Manager{st: c.Store, ledger: c.Ledger, backend: c.Backend, backends: backends, image: c.DefaultImage,
		egress: c.Egress, egressRoot: c.EgressRoot, trustPEM: c.TrustPEM, policy: c.Policy, images: c.ImagesDir,
		log: log, now: now, machines: map[string]hypervisor.Machine{}, gate: map[string]string{}}
}

var agentRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "ses-" + hex.EncodeToString(b[:])
}

func bad(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(f, a...)) }

// Create makes a sandbox, its workspace and the workspace baseline, and
// records the session.
func (m *Manager) Create(ctx context.Context, tenant string, req CreateRequest) (*Session, error) {
	return m.create(ctx, tenant, req, "")
}

// create is Create for a record of the given kind ("" or KindSandbox).
func (m *Manager) create(ctx context.Context, tenant string, req CreateRequest, kind string) (*Session, error) {
	if req.Agent == "" {
		req.Agent = "agent"
	}
	if !agentRE.MatchString(req.Agent) {
		return nil, bad("agent %q: use letters, digits, '.', '_' and '-', at most 64", req.Agent)
	}
	if req.TTLSeconds == 0 {
		req.TTLSeconds = DefaultTTLSeconds
	}
	if req.TTLSeconds < 1 || req.TTLSeconds > MaxTTLSeconds {
		return nil, bad("ttl_seconds %d must be from 1 to %d", req.TTLSeconds, MaxTTLSeconds)
	}
	ws, mode, src, err := checkWorkspace(req.Workspace)
	if err != nil {
		return nil, err
	}
	budget, err := checkBudget(req.Budget)
	if err != nil {
		return nil, err
	}
	backend, err := m.backendFor(req.Runtime.Backend)
	if err != nil {
		return nil, err
	}
	// Compute is charged as the sandbox's CPU time only where the backend
	// measures it (compute.go); elsewhere a process left in the
	// background would burn past max_compute_seconds unseen.
	if budget != nil && budget.MaxComputeSeconds != nil && !backend.Capabilities().CPUMeter {
		return nil, coded(CodeComputeBudgetUnmetered, fmt.Errorf("%w: the %s backend does not measure a sandbox's CPU time, so it cannot hold max_compute_seconds (a process left running in the background would escape it); leave budget.max_compute_seconds out or use a backend that meters CPU (procbox)", ErrConflict, backend.Name()))
	}
	// What the sandbox asks for must fit the host, the tenant's limits
	// and the backend's disk; held from here until it runs or fails.
	adm, err := m.admitMachines(backend, tenant, req.Runtime, 1, "")
	if err != nil {
		return nil, err
	}
	defer adm.release()
	res := effective(req.Runtime, adm.cap)
	caps := m.capabilitiesOn(backend)
	if mode == ModeReadOnly && !caps.Confinement {
		return nil, fmt.Errorf("%w: this backend cannot enforce a read-only workspace (it has no Landlock confinement here); use workspace.mode %q", ErrConflict, ModeWritable)
	}
	proc := policyProcess(req.Policy)
	if err := m.checkProcess(proc, caps); err != nil {
		return nil, err
	}
	rt := req.Runtime
	rt.Backend = backend.Name()
	if rt.Image == "" {
		rt.Image = m.image
	}
	if err := m.ensureImage(ctx, rt.Image); err != nil {
		return nil, err
	}
	id := newIDFor(kind)
	pol, err := m.compilePolicy(policyNetwork(req.Policy))
	if err != nil {
		return nil, err
	}
	network, egressDir, err := m.networkFor(id, pol)
	if err != nil {
		return nil, err
	}
	// The sockets are served before the sandbox boots, so its first
	// command can already go out.
	if err := m.openEgress(id, pol); err != nil {
		return nil, fmt.Errorf("serve the sandbox's egress: %w", err)
	}
	spec := hypervisor.MachineSpec{
		ID: id, Image: rt.Image, CPUs: rt.CPUs, MemoryMB: rt.MemoryMB, DiskMB: rt.DiskMB,
		Network: network, EgressDir: egressDir, TrustPEM: m.trustPEM,
	}
	if mode == ModeOverlay {
		spec.Overlays = []hypervisor.Overlay{{Lower: req.Workspace.Lower, Target: ws}}
	}
	mc, err := backend.Create(ctx, spec)
	if err != nil {
		m.closeEgress(id)
	}
	if errors.Is(err, hypervisor.ErrNotFound) {
		return nil, bad("runtime.image %q: %v", rt.Image, err)
	}
	if err != nil && mode == ModeOverlay && (errors.Is(err, hypervisor.ErrInvalidSpec) || strings.Contains(err.Error(), "overlay")) {
		// The sandbox could not mount it (the backend removed it).
		return nil, bad("workspace overlay of %q: %v", req.Workspace.Lower, err)
	}
	if err != nil {
		return nil, err
	}
	cleanup := func() { mc.Stop(context.Background()); forgetClient(mc); m.closeEgress(id) }
	now := m.now().UTC()
	s := &Session{
		ID: id, Kind: kind, Agent: req.Agent, Tenant: tenant, State: StateRunning, Backend: backend.Name(),
		SandboxID: mc.ID(), Capabilities: caps, Runtime: rt, Policy: Policy{NetworkSummary: pol.Summary(), Process: policyProcess(req.Policy)},
		Workspace: Workspace{Path: ws, Mode: mode, Lower: req.Workspace.Lower}, Checkpoints: []Checkpoint{}, Children: []string{},
		Budget: budget, CreatedAt: now, ExpiresAt: now.Add(time.Duration(req.TTLSeconds) * time.Second),
	}
	cl := clientFor(mc)
	// The workspace exists and the guest user can write in it: the agent
	// makes it and its missing parents as root, handed to the guest user
	// (the files API itself acts as the guest user), then a file is
	// written there the way the files API writes.
	if _, err := cl.SetupWorkspace(ctx, ws); err != nil {
		s.Workspace.Note = workspaceNotCreated + err.Error()
	} else if _, err := cl.WriteFile(ctx, api.FileContent{Path: ws + "/.paddock-keep", Content: nil}); err != nil {
		s.Workspace.Note = workspaceNotCreated + err.Error()
	} else {
		cl.DeleteFile(ctx, ws+"/.paddock-keep", false)
	}
	// The clone runs unconfined: the read-only policy starts with the
	// agent's first command.
	var clone *cloneResult
	if src != nil {
		s.Workspace.Git = src.Redacted
		clone = &cloneResult{note: s.Workspace.Note}
		if clone.note == "" {
			clone = m.cloneWorkspace(ctx, cl, ws, src)
			s.Workspace.Note = clone.note
		}
	}
	if err := checkBudgetWorkspace(budget, s.Workspace); err != nil {
		cleanup()
		return nil, err
	}
	if req.Workspace.RequireReady && s.Workspace.Note != "" {
		cleanup()
		m.log.Warn("workspace not ready; sandbox removed", "sandbox", id, "note", s.Workspace.Note)
		return nil, fmt.Errorf("%w: the workspace did not initialize and require_ready is set, so the sandbox was removed: %s", ErrBadGateway, s.Workspace.Note)
	}
	if mode == ModeReadOnly {
		if err := probeReadOnly(ctx, cl, ws); err != nil {
			cleanup()
			return nil, err
		}
	}
	if proc != nil && proc.Enforce == "exec" {
		// The clone ran before the list applies; from here on only the
		// named programs start.
		progs, err := resolvePrograms(ctx, cl, proc)
		if err == nil {
			s.Policy.ExecPrograms = progs
			err = probeExecList(ctx, cl, s)
		}
		if err != nil {
			cleanup()
			// The session's own 400 (a program not in the image) goes
			// as it is; anything the agent said (of its kind too, now)
			// is a conflict of this sandbox.
			var ge *client.Error
			if errors.Is(err, ErrBadRequest) && !errors.As(err, &ge) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: process.enforce \"exec\": %v; the sandbox was removed", ErrConflict, err)
		}
		s.Capabilities.ExecAllowlist = true
	}
	base, err := cl.Manifest(ctx, api.ManifestRequest{Path: ws})
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("workspace baseline: %w", err)
	}
	s.Workspace.BaselineFiles = len(base.Entries)
	if err := m.saveHeld(ctx, s, base, policyNetwork(req.Policy), &res); err != nil {
		cleanup()
		return nil, err
	}
	m.track(id, mc)
	adm.commit([]string{id}, res)
	m.ledgerAppend(ctx, id, "session.create", map[string]any{"agent": s.Agent, "image": rt.Image, "workspace": ws, "workspace_mode": mode, "sandbox_id": mc.ID(), "ttl_seconds": req.TTLSeconds})
	m.vmEvent(id, apiv1.VMEventBoot, map[string]any{"sandbox_id": mc.ID(), "backend": s.Backend, "image": rt.Image})
	if clone != nil {
		m.ledgerAppend(ctx, id, "workspace.clone", map[string]any{"url": src.Redacted, "ok": clone.note == "", "duration_ms": clone.took.Milliseconds(), "note": clone.note})
	}
	return s, nil
}

// clients holds one guest client per machine, so requests reuse the
// client's connections instead of leaving one idle per request.
var clients sync.Map // hypervisor.Machine → *client.Client

func clientFor(mc hypervisor.Machine) *client.Client {
	if c, ok := clients.Load(mc); ok {
		return c.(*client.Client)
	}
	c, _ := clients.LoadOrStore(mc, client.New(func(ctx context.Context) (net.Conn, error) { return mc.Dial(ctx) }))
	return c.(*client.Client)
}

// forgetClient drops a stopped machine's client and its connections.
func forgetClient(mc hypervisor.Machine) {
	if c, ok := clients.LoadAndDelete(mc); ok {
		c.(*client.Client).Close()
	}
}

// baselineKey names the stored baseline manifest in the session record
// companion table.
type stored struct {
	Session  *Session      `json:"session"`
	Baseline *api.Manifest `json:"baseline,omitempty"`
	// PolicyInput is the policy as asked, compiled again when a restarted
	// daemon adopts the sandbox or a fork child needs its own egress.
	PolicyInput *rules.PolicyInput `json:"policy_input,omitempty"`
	// Snapshots are the backend's records of this session's checkpoints,
	// by tag.
	Snapshots map[string]hypervisor.Snapshot `json:"snapshots,omitempty"`
	// Resources are what the machine was given, the backend's defaults
	// filled in: what admission counts (admission.go).
	Resources *Resources `json:"resources,omitempty"`
}

func (m *Manager) save(ctx context.Context, s *Session, base *api.Manifest, pol *rules.PolicyInput) error {
	return m.saveHeld(ctx, s, base, pol, nil)
}

// saveHeld is save that records what the machine was given.
func (m *Manager) saveHeld(ctx context.Context, s *Session, base *api.Manifest, pol *rules.PolicyInput, res *Resources) error {
	raw, err := json.Marshal(stored{Session: s, Baseline: base, PolicyInput: pol, Resources: res})
	if err != nil {
		return err
	}
	s.Revision = 1
	return m.st.CreateSession(ctx, store.SessionRow{ID: s.ID, Tenant: s.Tenant, Revision: 1, State: s.State, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt, Record: raw})
}

func (m *Manager) load(ctx context.Context, tenant, id string) (*Session, *api.Manifest, error) {
	row, err := m.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && tenant != "" && row.Tenant != tenant) {
		// Another tenant's session answers as if it did not exist.
		return nil, nil, fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, nil, err
	}
	var st stored
	if err := json.Unmarshal(row.Record, &st); err != nil || st.Session == nil {
		return nil, nil, fmt.Errorf("session %s: corrupt record: %v", id, err)
	}
	s := st.Session
	s.Revision, s.State = row.Revision, row.State
	if s.State == StateRunning && m.now().After(s.ExpiresAt) {
		// Expired: persisted the first time anything reads it, and read
		// again as the sweep left it.
		m.Sweep(ctx)
		if row2, err := m.st.GetSession(ctx, id); err == nil && row2.State != StateRunning {
			var st2 stored
			if json.Unmarshal(row2.Record, &st2) == nil && st2.Session != nil {
				st, s = st2, st2.Session
				s.Revision, s.State = row2.Revision, row2.State
			}
		}
		if s.State == StateRunning {
			s.State = StateExpired
		}
	}
	m.mu.Lock()
	_, live := m.machines[id]
	m.mu.Unlock()
	s.Usage = m.usage(ctx, id)
	m.interrupted(ctx, s)
	if s.State == StateRunning && !live {
		s.State = StateGone
	}
	return s, st.Baseline, nil
}

// update is a compare-and-set on the session record.
func (m *Manager) update(ctx context.Context, id string, rev int64, fn func(*Session) error) (*Session, error) {
	return m.updateStored(ctx, id, rev, func(st *stored) error { return fn(st.Session) })
}

type storeRow = store.SessionRow

func revisionErr(err error, id string, rev int64) error {
	if errors.Is(err, store.ErrRevision) {
		return fmt.Errorf("%w: session %s changed since revision %d", ErrRevision, id, rev)
	}
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	return err
}

// Get returns one session. A sandbox's id is not found here (hostd/sandboxes).
func (m *Manager) Get(ctx context.Context, tenant, id string) (*Session, error) {
	s, _, err := m.load(ctx, tenant, id)
	if err == nil && s.Kind == KindSandbox {
		return nil, notSessionErr(id)
	}
	if err == nil {
		m.freshUsage(ctx, s)
	}
	return s, err
}

// List returns the tenant's sessions, oldest first.
func (m *Manager) List(ctx context.Context, tenant string, includeDeleted bool) ([]*Session, error) {
	rows, err := m.st.ListSessions(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]*Session, 0, len(rows))
	for _, r := range rows {
		if r.State == StateDeleted && !includeDeleted {
			continue
		}
		s, _, err := m.load(ctx, tenant, r.ID)
		if err != nil || s.Kind == KindSandbox {
			continue
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// running returns the session and its machine, refusing sessions that are
// expired or gone.
func (m *Manager) running(ctx context.Context, tenant, id string) (*Session, *api.Manifest, hypervisor.Machine, error) {
	s, base, err := m.load(ctx, tenant, id)
	if err != nil {
		return nil, nil, nil, err
	}
	if s.State != StateRunning {
		return nil, nil, nil, fmt.Errorf("%w: session %s is %s", ErrConflict, id, s.State)
	}
	m.mu.Lock()
	mc := m.machines[id]
	m.mu.Unlock()
	if mc == nil {
		// Deleted (or lost) between the read and now.
		return nil, nil, nil, fmt.Errorf("%w: session %s has no running sandbox any more", ErrConflict, id)
	}
	return s, base, mc, nil
}

// enter takes the session's lifecycle slot for op; a second lifecycle op
// (or any exec while one runs) is refused with 409 naming what is in
// flight.
func (m *Manager) enter(id, op string) (func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, busy := m.gate[id]; busy {
		return nil, fmt.Errorf("%w: %s is in progress on session %s", ErrConflict, cur, id)
	}
	m.gate[id] = op
	return func() { m.mu.Lock(); delete(m.gate, id); m.mu.Unlock() }, nil
}

func (m *Manager) busy(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, busy := m.gate[id]; busy {
		return fmt.Errorf("%w: %s is in progress on session %s", ErrConflict, cur, id)
	}
	return nil
}

// Exec runs one command through the guest and ledgers it.
// CheckExec validates an exec body and fills its default timeout (exec and
// exec/stream share it).
func CheckExec(req *ExecRequest) error {
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
	return checkApprovalFields(req.ApprovalID, req.ApprovalWaitSeconds)
}

var approvalIDRE = regexp.MustCompile(`^apr-[0-9a-f]{16}$`)

func checkApprovalFields(id string, wait int) error {
	if id != "" && !approvalIDRE.MatchString(id) {
		return bad("approval_id %q is not an approval id (apr- and 16 hex digits)", clipText(id, 40))
	}
	if wait < 0 || wait > MaxApprovalWaitSeconds {
		return bad("approval_wait_seconds %d must be from 0 to %d", wait, MaxApprovalWaitSeconds)
	}
	if id != "" && wait > 0 {
		return bad("give approval_id or approval_wait_seconds, not both")
	}
	return nil
}

func (m *Manager) Exec(ctx context.Context, tenant, id string, req ExecRequest) (*ExecResult, error) {
	p := m.newPipe(ctx, CommandExec, tenant, id)
	var (
		res     *api.ExecResult
		out     *ExecResult
		started time.Time
		lostMS  int64  // an interrupted call's time
		lostErr string // and what cut it off
	)
	err := p.walk(ctx,
		step(StepValidate, func(context.Context) error {
			p.cmd.Text = req.Command
			return CheckExec(&req)
		}),
		loadRunning(),
		judgeCommand(commandCheck{kind: policy.KindExec, command: req.Command,
			params:     map[string]any{"timeout_seconds": req.TimeoutSeconds},
			approvalID: req.ApprovalID, wait: time.Duration(req.ApprovalWaitSeconds) * time.Second}),
		// In flight from here, so a restore or fork refuses; the budget
		// takes this exec's unit and caps its timeout and output.
		gateCommand(req.ApprovalWaitSeconds > 0),
		admitStep(StartExec, req.TimeoutSeconds),
		spendApproval(),
		runHooks("exec"),
		step(StepRun, func(ctx context.Context) error {
			started = m.now()
			var err error
			res, err = p.cl.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: req.Command, Cwd: p.s.Workspace.Path, TimeoutSeconds: p.adm.Timeout, MaxOutputBytes: p.adm.OutputCap, Confine: p.cmd.Confine}})
			if err != nil && refusedBeforeStart(err) {
				return guestErr(err)
			}
			// The command ran, or may have (the caller left, the agent
			// went away): it keeps its unit, its time counts, and the
			// ledger says so.
			p.ran, p.kept = true, true
			if err != nil {
				lostMS, lostErr, p.err = m.now().Sub(started).Milliseconds(), clipText(err.Error(), 300), guestErr(err)
				return p.err
			}
			out = execResult(res, p.adm.OutputCap)
			return nil
		}),
		step(StepRecord, func(ctx context.Context) error {
			if p.err != nil {
				m.ledgerAppend(context.WithoutCancel(ctx), id, "exec", p.withNotes(map[string]any{"command": req.Command, "interrupted": true, "error": lostErr, "duration_ms": lostMS, "policy": p.v.decision.Rule}))
				return nil
			}
			entry := execLedger(req.Command, out, p.adm)
			entry["policy"] = p.v.decision.Rule
			m.ledgerAppend(ctx, id, "exec", p.withNotes(entry))
			return nil
		}),
		step(StepUsage, func(context.Context) error {
			if p.err != nil {
				m.addUsage(id, store.UsageRow{Execs: p.adm.Untaken(), ExecMS: lostMS})
				return nil
			}
			ms := res.DurationMillis
			if res.TimedOut && p.adm.Capped {
				// Killed at the timeout the budget cut it to: it spent all
				// of that (the agent's own clock may read a hair less).
				ms = max(ms, int64(p.adm.Timeout)*1000)
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

// Delete stops the sandbox, removes its checkpoints and what the session
// kept on the host (jobs, uploads, usage rows), and keeps the record, in
// state deleted, beside its ledger: GET still answers, with deleted_at,
// and every other route refuses with 409. A sandbox (kind sandbox) goes
// entirely; its ledger stays. Idempotent.
func (m *Manager) Delete(ctx context.Context, tenant, id string) error {
	return m.DeleteIfMatch(ctx, tenant, id, -1)
}

// DeleteIfMatch is Delete with If-Match: rev ≥ 0 must be the session's
// revision (412 otherwise). The delete takes the lifecycle slot (409 while
// a checkpoint, restore or fork runs) and leaves a marker while it runs.
func (m *Manager) DeleteIfMatch(ctx context.Context, tenant, id string, rev int64) error {
	s, _, err := m.load(ctx, tenant, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.State == StateDeleted {
		return nil
	}
	end, err := m.beginOp(ctx, id, "delete", rev, nil)
	if err != nil {
		return err
	}
	defer end()
	m.mu.Lock()
	mc := m.machines[id]
	delete(m.machines, id)
	m.mu.Unlock()
	if mc != nil {
		if err := mc.Stop(ctx); err != nil {
			m.log.Warn("stop sandbox", "session", id, "err", err)
		}
	}
	m.closeEgress(id)
	m.runStopHooks(ctx, id, StopDeleted)
	if snaps, err := m.snapshots(ctx, id); err == nil {
		for _, snap := range snaps {
			m.deleteSnapshot(snap)
		}
	}
	m.releaseHolding(id)
	m.ledgerAppend(ctx, id, "session.delete", map[string]any{"sandbox_id": s.SandboxID, "state": s.State, "usage": s.Usage})
	if s.Kind == KindSandbox {
		return m.st.DeleteSession(ctx, id)
	}
	if err := m.st.CleanupSession(ctx, id); err != nil {
		return err
	}
	now := m.now().UTC()
	_, err = m.updateStored(ctx, id, -1, func(st *stored) error {
		st.Session.State, st.Session.DeletedAt = StateDeleted, &now
		st.Session.Checkpoints, st.Snapshots, st.Baseline = []Checkpoint{}, nil, nil
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return nil // a concurrent delete of a sandbox record
	}
	return err
}

func (m *Manager) ledgerAppend(ctx context.Context, id, kind string, data any) {
	if m.ledger == nil {
		return
	}
	// The actor is the caller the API put in ctx (auth.WithIdentity), or
	// the daemon itself.
	if _, err := m.ledger.Append(ctx, id, kind, auth.ActorOf(ctx), withTool(ctx, data)); err != nil {
		m.log.Error("ledger append", "session", id, "kind", kind, "err", err)
	}
}

// withTool adds the tool note of the request in ctx (auth.ToolOf: the MCP
// tool a client made the request for) to an entry's data as "mcp_tool".
// Data that is not a JSON object is left as it is.
func withTool(ctx context.Context, data any) any {
	tool := auth.ToolOf(ctx)
	if tool == "" {
		return data
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return data
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return data
	}
	obj["mcp_tool"], _ = json.Marshal(tool)
	return obj
}

// Events returns the session's ledger.
func (m *Manager) Events(ctx context.Context, tenant, id string) ([]ledger.Entry, error) {
	if _, _, err := m.load(ctx, tenant, id); err != nil {
		return nil, err
	}
	m.settleEgressLog()
	return m.ledger.List(ctx, id, 0, 10000)
}

// Shutdown stops every sandbox this manager runs. Their sessions show as
// gone afterwards; Detach is the shutdown that keeps them for the next
// daemon.
func (m *Manager) Shutdown(ctx context.Context) {
	defer m.flushEgressLog()
	m.runShutdownHooks()
	m.mu.Lock()
	m.done = true
	machines := m.machines
	m.machines = map[string]hypervisor.Machine{}
	m.mu.Unlock()
	for id, mc := range machines {
		m.stopMachine(ctx, id, mc)
	}
}

// stopForShutdown stops one session's sandbox as Shutdown does (the
// record stays running, for the next start to find lost).
func (m *Manager) stopForShutdown(ctx context.Context, id string) {
	m.mu.Lock()
	mc := m.machines[id]
	delete(m.machines, id)
	m.mu.Unlock()
	if mc != nil {
		m.stopMachine(ctx, id, mc)
	}
}

func (m *Manager) stopMachine(ctx context.Context, id string, mc hypervisor.Machine) {
	if err := mc.Stop(ctx); err != nil {
		m.log.Warn("stop sandbox at shutdown", "session", id, "err", err)
	}
	m.closeEgress(id)
	m.runStopHooks(ctx, id, StopShutdown)
}

// Probe reports which tools the sandbox has and what that makes ready.
func (m *Manager) Probe(ctx context.Context, tenant, id string) (*api.Probe, error) {
	c, err := m.machineFor(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	p, err := c.Probe(ctx)
	if err != nil {
		return nil, guestErr(err)
	}
	return p, nil
}

// Sweep marks sessions past their expiry expired and stops their
// sandboxes (the record and ledger stay until DELETE), and prunes the
// egress log past its retention. Records of kind sandbox are handed to
// the sandboxes sibling instead, which removes them (sweepSandbox).
// hostd runs it 30 s after start and then every minute.
func (m *Manager) Sweep(ctx context.Context) (expired int) {
	// Expiry is the daemon's doing, whichever call noticed it.
	ctx = auth.WithoutIdentity(ctx)
	rows, err := m.st.ListSessions(ctx, "")
	if err != nil {
		m.log.Warn("sweep: list sessions", "err", err)
		return 0
	}
	now := m.now()
	m.pruneEgressLog(ctx)
	for _, r := range rows {
		if m.sweepSandbox(ctx, r, now) {
			expired++
			continue
		}
		if r.State != StateRunning || !now.After(r.ExpiresAt) {
			continue
		}
		// An expired session can neither run, restore nor fork: its
		// sandbox and checkpoints go; the record, usage and ledger stay.
		var snaps map[string]hypervisor.Snapshot
		if _, err := m.updateStored(ctx, r.ID, -1, func(st *stored) error {
			if st.Session.State != StateRunning {
				return errNotRunning // changed meanwhile (deleted, lost)
			}
			snaps = st.Snapshots
			st.Session.State, st.Session.Checkpoints, st.Snapshots = StateExpired, []Checkpoint{}, nil
			return nil
		}); err != nil {
			if !errors.Is(err, errNotRunning) {
				m.log.Warn("sweep: mark expired", "session", r.ID, "err", err)
			}
			continue
		}
		m.mu.Lock()
		mc := m.machines[r.ID]
		delete(m.machines, r.ID)
		m.mu.Unlock()
		if mc != nil {
			if err := mc.Stop(ctx); err != nil {
				m.log.Warn("sweep: stop sandbox", "session", r.ID, "err", err)
			}
		}
		m.closeEgress(r.ID)
		m.runStopHooks(ctx, r.ID, StopExpired)
		for _, snap := range snaps {
			m.deleteSnapshot(snap)
		}
		m.releaseHolding(r.ID)
		m.ledgerAppend(ctx, r.ID, "session.expire", map[string]any{"expires_at": r.ExpiresAt, "checkpoints_removed": len(snaps)})
		expired++
	}
	return expired
}

// RunSweeper runs Sweep on the schedule above until ctx ends.
func (m *Manager) RunSweeper(ctx context.Context) {
	m.tellBudgetsRunning(ctx)
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := m.Sweep(ctx); n > 0 {
				m.log.Info("sweeper expired sessions", "count", n)
			}
			t.Reset(time.Minute)
		}
	}
}

// EventsAfter returns ledger entries after seq (for the events stream).
// Deleted sessions keep their ledger but are no longer served. Like
// Events, it lets the egress decisions recorded so far reach the ledger
// first.
func (m *Manager) EventsAfter(ctx context.Context, tenant, id string, after int64) ([]ledger.Entry, error) {
	if _, _, err := m.load(ctx, tenant, id); err != nil {
		return nil, err
	}
	m.settleEgressLog()
	return m.ledger.List(ctx, id, after, 1000)
}

// VerifyLedger checks session id's ledger chain (hostd/ledger.Verify) for
// a caller who may see the session: another tenant's id is ErrNotFound,
// like a made-up one. The egress decisions recorded so far reach the
// ledger first, so the answer covers what Events would show.
func (m *Manager) VerifyLedger(ctx context.Context, tenant, id string) (*apiv1.LedgerVerification, error) {
	s, _, err := m.load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	m.settleEgressLog()
	// One verify per session at a time, and few per tenant and daemon
	// (verifygate.go): a verify reads the whole ledger.
	return m.verifies.shared(ctx, s.Tenant, id, func(ctx context.Context) (*apiv1.LedgerVerification, error) {
		r, err := m.ledger.Verify(ctx, id)
		if err != nil {
			return nil, err
		}
		return &apiv1.LedgerVerification{
			OK: r.OK, Entries: r.Entries, Head: r.Head,
			BrokenSeq: r.BrokenSeq, Reason: string(r.Reason), Detail: r.Detail,
			Recorded: r.Recorded, RecordedHead: r.RecordedHead,
		}, nil
	})
}

// The public wire types (package api), kept under these names here.
type (
	Step       = apiv1.Step
	Trajectory = apiv1.Trajectory
)

// Trajectory merges what the session recorded into numbered steps.
func (m *Manager) Trajectory(ctx context.Context, tenant, id string) (*Trajectory, error) {
	s, _, err := m.load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	m.settleEgressLog()
	es, err := m.ledger.List(ctx, id, 0, 10000)
	if err != nil {
		return nil, err
	}
	t := &Trajectory{Session: s, Steps: make([]Step, 0, len(es))}
	for i, e := range es {
		t.Steps = append(t.Steps, Step{Step: i + 1, Time: e.Time, Source: "ledger", Kind: e.Kind, Data: e.Data})
	}
	evs, err := m.vmEvents(ctx, id, time.Time{})
	if err != nil {
		return nil, err
	}
	t.Steps = mergeVMEvents(t.Steps, evs)
	return t, nil
}

// Store returns the state store (hostd/api keeps idempotency keys in it).
func (m *Manager) Store() *store.Store { return m.st }

// count adds an exec to the session's usage. Counters live in their own
// table, not in the record, so counting never changes the revision
// (If-Match keeps meaning "nobody checkpointed, restored or forked
// since").
func (m *Manager) count(id string, ms int64) {
	m.addUsage(id, store.UsageRow{Execs: 1, ExecMS: ms})
}

func (m *Manager) addUsage(id string, u store.UsageRow) {
	if err := m.st.AddUsage(context.Background(), id, u); err != nil {
		m.log.Warn("count usage", "session", id, "err", err)
	}
}
