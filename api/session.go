package api

import (
	"encoding/json"
	"time"
)

// Limits on what callers send to the session routes.
const (
	MaxTTLSeconds      = 7 * 24 * 3600
	DefaultTTLSeconds  = 3600
	MaxAgentName       = 64
	MaxCommandBytes    = 64 << 10
	MaxExecTimeout     = 3600
	DefaultExecTimeout = 300
	MaxTagLen          = 64
)

// States of a session.
const (
	StateRunning = "running"
	StateExpired = "expired"
	StateDeleted = "deleted" // the record and ledger kept after DELETE
	StateGone    = "gone"    // shown, never saved: the daemon has no sandbox for it
	// StateLost is a session whose sandbox did not survive a daemon
	// restart.
	StateLost = "lost"
)

// KindSandbox marks a session record that is a sandbox (Session.Kind).
const KindSandbox = "sandbox"

// Workspace modes.
const (
	// ModeWritable is the default: the agent reads and writes the
	// workspace.
	ModeWritable = "writable"
	// ModeReadOnly lets the agent read the workspace and nothing it runs
	// write to it (Landlock in the guest), and the files routes refuse
	// writes there.
	ModeReadOnly = "readonly"
	// ModeOverlay shows Lower, a directory of the image, at the
	// workspace path copy-on-write: the agent writes freely, Lower stays
	// as it was, and the baseline (taken after the mount) makes
	// artifacts show only the agent's changes.
	ModeOverlay = "overlay"
	// ModeClone is accepted at create for writable: a workspace cloned
	// from git.
	ModeClone = "clone"
)

// Workspace limits.
const (
	MaxWorkspacePath = 256
	MaxGitURL        = 2048
)

// Runtime is what the sandbox is made of.
type Runtime struct {
	// Backend names the backend the sandbox runs on ("procbox", "qemu");
	// empty at create means the daemon's default.
	Backend  string  `json:"backend,omitempty"`
	Image    string  `json:"image"`
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	DiskMB   int64   `json:"disk_mb,omitempty"`
}

// Workspace is the agent's working directory in the sandbox.
type Workspace struct {
	Path string `json:"path"`
	// Mode is ModeWritable or ModeReadOnly (records from before modes
	// existed have "", which means writable).
	Mode string `json:"mode"`
	// Git is the URL cloned at create, with any credential taken out.
	Git string `json:"git,omitempty"`
	// Lower is the image directory an overlay workspace shows.
	Lower string `json:"lower,omitempty"`
	Note  string `json:"note,omitempty"`
	// BaselineFiles counts the files in the baseline artifacts diff against.
	BaselineFiles int `json:"baseline_files"`
}

// Checkpoint is one checkpoint the session took.
type Checkpoint struct {
	Tag       string    `json:"tag"`
	Snapshot  string    `json:"snapshot_id"`
	Memory    bool      `json:"memory"`
	CreatedAt time.Time `json:"created_at"`
}

// Usage counts what the session did; kept beside the record.
type Usage struct {
	Execs  int64 `json:"execs"`
	ExecMS int64 `json:"exec_ms"`
	Jobs   int64 `json:"jobs"`
	// JobMS is the wall time of jobs: finished ones by their start and
	// end, running ones up to now. CPUMS is the CPU time the sandbox
	// used (on backends that measure it: hostd/session/compute.go). ComputeMS is the
	// larger of ExecMS plus JobMS and CPUMS.
	JobMS     int64 `json:"job_ms"`
	CPUMS     int64 `json:"cpu_ms"`
	ComputeMS int64 `json:"compute_ms"`
	Children  int64 `json:"children"`
	// WorkspaceBytes is the last measure of the workspace (taken only
	// under budget.max_workspace_bytes).
	WorkspaceBytes int64 `json:"workspace_bytes"`
}

// Session is the record GET /v1/agents/sessions/{id} returns.
type Session struct {
	ID           string       `json:"id"`
	Kind         string       `json:"kind,omitempty"` // "" for a session, KindSandbox for a sandbox
	Agent        string       `json:"agent"`
	Tenant       string       `json:"tenant,omitempty"`
	State        string       `json:"state"`
	Note         string       `json:"note,omitempty"` // why the state is what it is (a sandbox lost in a restart)
	Revision     int64        `json:"revision"`
	Backend      string       `json:"backend"`
	SandboxID    string       `json:"sandbox_id"`
	Capabilities Capabilities `json:"capabilities"`
	Policy       Policy       `json:"policy"`
	Runtime      Runtime      `json:"runtime"`
	Workspace    Workspace    `json:"workspace"`
	Checkpoints  []Checkpoint `json:"checkpoints"`
	Children     []string     `json:"children"`
	Parent       string       `json:"parent,omitempty"`
	Usage        Usage        `json:"usage"`
	CreatedAt    time.Time    `json:"created_at"`
	ExpiresAt    time.Time    `json:"expires_at"`
	DeletedAt    *time.Time   `json:"deleted_at,omitempty"`

	// Budget is what the session may consume.
	Budget *Budget `json:"budget,omitempty"`
	// InterruptedOp is a lifecycle operation a daemon died in.
	InterruptedOp *InterruptedOp `json:"interrupted_op,omitempty"`
}

// CreateRequest is the body of POST /v1/agents/sessions.
type CreateRequest struct {
	Agent      string           `json:"agent"`
	Workspace  WorkspaceRequest `json:"workspace"`
	Runtime    Runtime          `json:"runtime"`
	TTLSeconds int              `json:"ttl_seconds"`
	// Policy is the network and process policy; no network policy means
	// offline.
	Policy *PolicyRequest `json:"policy,omitempty"`
	// Budget limits what the session may consume.
	Budget *Budget `json:"budget,omitempty"`
}

// ExecRequest is the body of POST .../exec.
type ExecRequest struct {
	Command        string `json:"command"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
	// ApprovalID spends an approved request for this exact command;
	// ApprovalWaitSeconds (≤ 120) holds a command that needs approval
	// open until an operator decides.
	ApprovalID          string `json:"approval_id,omitempty"`
	ApprovalWaitSeconds int    `json:"approval_wait_seconds,omitempty"`
}

// ExecResult answers POST .../exec.
type ExecResult struct {
	ExitCode   int    `json:"exit_code"`
	Signal     string `json:"signal,omitempty"`
	TimedOut   bool   `json:"timed_out"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	// What a cap cut off each stream (set when truncated).
	StdoutDropped int64 `json:"stdout_dropped_bytes,omitempty"`
	StderrDropped int64 `json:"stderr_dropped_bytes,omitempty"`
	// OutputTruncated says the cut was the session's
	// budget.max_output_bytes, which MaxOutputBytes repeats.
	OutputTruncated bool  `json:"output_truncated,omitempty"`
	MaxOutputBytes  int64 `json:"max_output_bytes,omitempty"`
}

// Step is one numbered step of a trajectory.
type Step struct {
	Step   int             `json:"step"`
	Time   time.Time       `json:"time"`
	Source string          `json:"source"` // "ledger" or "vm"
	Kind   string          `json:"kind"`
	Data   json.RawMessage `json:"data"`
}

// VMEvent is one thing that happened to the session's machine: boot,
// checkpoint, restore, fork, stop, oom or death (VMEvent* kinds).
type VMEvent struct {
	ID   int64           `json:"id"`
	Time time.Time       `json:"time"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// The kinds of VMEvent.
const (
	VMEventBoot       = "boot"       // the machine started (create, restore, a fork child)
	VMEventCheckpoint = "checkpoint" // a snapshot of it was taken
	VMEventRestore    = "restore"    // it was put back to a snapshot
	VMEventFork       = "fork"       // children started from a snapshot of it
	VMEventStop       = "stop"       // the daemon stopped it (delete, expiry)
	VMEventOOM        = "oom"        // the kernel killed processes in it for want of memory
	VMEventDeath      = "death"      // it ended on its own
)

// Events answers GET .../events.
type Events struct {
	Ledger   []LedgerEntry `json:"ledger"`
	VMEvents []VMEvent     `json:"vm_events"`
	// LedgerMore says more ledger entries follow this page: ask again
	// with after= the last entry's seq.
	LedgerMore bool `json:"ledger_more,omitempty"`
}

// Trajectory is the session's history as one numbered, time-ordered list.
type Trajectory struct {
	Session *Session `json:"session"`
	Steps   []Step   `json:"steps"`
}

// WorkspaceRequest is the workspace part of CreateRequest.
type WorkspaceRequest struct {
	// Path is the workspace directory (default /workspace).
	Path string `json:"path"`
	// Git is an https:// URL cloned into the workspace at create. A
	// user:password in it is used for the clone and never recorded.
	Git string `json:"git,omitempty"`
	// Mode is "" or ModeWritable ("clone" is the same), ModeReadOnly or
	// ModeOverlay.
	Mode string `json:"mode,omitempty"`
	// Lower is the image directory an overlay workspace shows.
	Lower string `json:"lower,omitempty"`
	// RequireReady turns a workspace that did not initialize (not
	// created, clone failed) into a failed create (502) that removes the
	// sandbox, instead of a session with workspace.note set.
	RequireReady bool `json:"require_ready,omitempty"`
}

// CheckpointRequest is the body of POST .../checkpoint.
type CheckpointRequest struct {
	Tag    string `json:"tag"`
	Memory *bool  `json:"memory,omitempty"`
}

// RestoreRequest is the body of POST .../restore.
type RestoreRequest struct {
	Tag string `json:"tag"`
}

// ForkRequest is the body of POST .../fork.
type ForkRequest struct {
	Count int `json:"count"`
	// Identity is what the children's host names and machine ids are:
	// IdentityBestEffort (the default, ""), IdentityUnique or
	// IdentityPreserve.
	Identity string `json:"identity,omitempty"`
	// From is one of the session's checkpoint tags to start the children
	// from; empty, the session's state now.
	From string `json:"from,omitempty"`
}

// The fork identities (ForkRequest.Identity).
const (
	// IdentityBestEffort: each child gets a host name and machine id of
	// its own where the backend can give them; a child that ends up
	// sharing one is kept, and ForkResult.IdentityNote says so.
	IdentityBestEffort = "best-effort"
	// IdentityUnique: every child's host name and machine id differ from
	// the parent's and from each other's, checked inside each child after
	// it starts; when they do not, the fork fails and nothing is kept.
	IdentityUnique = "unique"
	// IdentityPreserve: every child keeps the parent's host name and
	// machine id (software keyed to them goes on working; the children
	// then look alike on a network).
	IdentityPreserve = "preserve"
)

// ForkResult answers POST .../fork.
type ForkResult struct {
	Children []*Session `json:"children"`
	// Identity is the identity mode the fork used.
	Identity string `json:"identity"`
	// From is the checkpoint tag the children started from ("" for the
	// state at the fork).
	From string `json:"from,omitempty"`
	// Memory says the children started from a memory snapshot: the
	// processes running in it (jobs among them) go on in each child, and
	// each child has the parent's job records.
	Memory bool `json:"memory"`
	// NotCarried lists the parent's running jobs the children do not have
	// (a disk fork starts the children from the files alone). The jobs
	// keep running in the parent.
	NotCarried []ForkNotCarried `json:"not_carried"`
	// Identities is each child's host name and machine id as read inside
	// it after the fork, in the order of Children.
	Identities []ChildIdentity `json:"identities"`
	// IdentityNote says why a best-effort fork's children do not all
	// have an identity of their own.
	IdentityNote string `json:"identity_note,omitempty"`
}

// ForkNotCarried is a job of the parent that a fork did not carry.
type ForkNotCarried struct {
	Job     string `json:"job"`
	Command string `json:"command"`
	Reason  string `json:"reason"`
}

// ChildIdentity is a fork child's identity as read inside it.
type ChildIdentity struct {
	Session   string `json:"session"`
	Hostname  string `json:"hostname"`
	MachineID string `json:"machine_id"`
}

// Artifacts answers GET .../artifacts: workspace changes since the
// baseline.
type Artifacts struct {
	Workspace   string       `json:"workspace"`
	Added       []string     `json:"added"`
	Modified    []string     `json:"modified"`
	Deleted     []string     `json:"deleted"`
	Checkpoints []Checkpoint `json:"checkpoints"`
	Children    []string     `json:"children"`
	Usage       Usage        `json:"usage"`
}
