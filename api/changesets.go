package api

import "time"

// Speculation and changesets: a command run in an isolated copy of a
// session or sandbox, whose file changes are kept as a changeset to
// review, decide and apply (POST /v1/agents/sessions/{id}/speculate and
// POST /v1/sandboxes/{id}/speculate, then .../changesets...).

// Speculation limits.
const (
	// MaxSpeculatePaths bounds the paths one speculation watches.
	MaxSpeculatePaths = 32
	// MaxSpeculateCommandBytes bounds the command.
	MaxSpeculateCommandBytes = 64 << 10
	// DefaultSpeculateTimeoutSeconds and MaxSpeculateTimeoutSeconds bound
	// the command's run in the copy.
	DefaultSpeculateTimeoutSeconds = 60
	MaxSpeculateTimeoutSeconds     = 3600
	// MaxChangesetFiles bounds the files one changeset lists; past it the
	// changeset is incomplete.
	MaxChangesetFiles = 2000
	// MaxChangesetFileBytes is the largest file whose content a changeset
	// keeps; MaxChangesetBytes bounds the contents of one changeset. A
	// file past either is listed with content_omitted and the changeset
	// is incomplete.
	MaxChangesetFileBytes = 1 << 20
	MaxChangesetBytes     = 16 << 20
	// MaxChangesetsPerTarget bounds the changesets kept for one session or
	// sandbox; the oldest decided ones go first, and a speculation is
	// refused (409) when all of them are still pending.
	MaxChangesetsPerTarget = 50
	// MaxChangesetOutputBytes bounds the stdout and stderr tails kept.
	MaxChangesetOutputBytes = 64 << 10
)

// Changeset states.
const (
	ChangesetPending  = "pending"
	ChangesetApproved = "approved"
	ChangesetRejected = "rejected"
	ChangesetApplied  = "applied"
)

// SpeculateRequest is the body of POST .../speculate.
type SpeculateRequest struct {
	// Command runs in the copy through a shell, as exec does.
	Command string `json:"command"`
	// Paths are the files or directories whose changes are recorded
	// (required, 1 to MaxSpeculatePaths). On a session they are absolute
	// or relative to the workspace; on a sandbox, absolute.
	Paths []string `json:"paths"`
	// Cwd is the command's working directory (default as exec's).
	Cwd string `json:"cwd,omitempty"`
	// TimeoutSeconds bounds the command (default 60, at most 3600).
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// ApprovalID spends an approved request for this command, as exec's
	// approval_id does (sessions only: a sandbox has no approvals).
	ApprovalID string `json:"approval_id,omitempty"`
}

// ChangesetFile is one path the command added, modified or deleted.
type ChangesetFile struct {
	// Path is absolute inside the machine.
	Path string `json:"path"`
	// Op is added, modified or deleted (PromoteAdded, ...).
	Op string `json:"op"`
	// Mode, Size and SHA256 describe the file the command left (empty
	// for deleted).
	Mode   string `json:"mode,omitempty"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// BaseSHA256 is the file's digest before the command (empty for
	// added): apply refuses when the machine's file no longer has it.
	BaseSHA256 string `json:"base_sha256,omitempty"`
	// Content is the new file's bytes (base64 on the wire); empty for
	// deleted files and in lists.
	Content []byte `json:"content,omitempty"`
	// ContentOmitted says the content was too large to keep.
	ContentOmitted bool `json:"content_omitted,omitempty"`
}

// SideEffects says what the command may have done outside the files the
// changeset records.
type SideEffects struct {
	// Network is true when the copy could reach beyond its machine (its
	// egress allowed some destination): calls it made really happened.
	Network bool `json:"network"`
	// Detail says why, in words.
	Detail string `json:"detail"`
}

// Changeset is the result of a speculation.
type Changeset struct {
	ID string `json:"id"`
	// Target is the session or sandbox the command was speculated on;
	// TargetKind says which ("session" or "sandbox").
	Target     string   `json:"target"`
	TargetKind string   `json:"target_kind"`
	Command    string   `json:"command"`
	Paths      []string `json:"paths"`
	// Status is pending, approved, rejected or applied.
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
	// Stdout and Stderr are the command's output tails.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// Files are the changes under Paths, sorted by path.
	Files []ChangesetFile `json:"files"`
	// Complete is false when some file is listed without its content or
	// files past MaxChangesetFiles were left out: such a changeset can be
	// read but not applied.
	Complete    bool        `json:"complete"`
	SideEffects SideEffects `json:"side_effects"`
	// How is the way the copy was made (for example "fork" or
	// "checkpoint"); TookMS the speculation's wall time.
	How       string     `json:"how"`
	TookMS    int64      `json:"took_ms"`
	CreatedAt time.Time  `json:"created_at"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	DecidedBy string     `json:"decided_by,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	AppliedAt *time.Time `json:"applied_at,omitempty"`
}

// ChangesetList answers GET .../changesets (files without content).
type ChangesetList struct {
	Changesets []Changeset `json:"changesets"`
}

// ChangesetDecision is the body of POST .../changesets/{cid}/decide.
type ChangesetDecision struct {
	// Decision is "approve" or "reject".
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

// ApplyResult answers POST .../changesets/{cid}/apply.
type ApplyResult struct {
	Changeset Changeset `json:"changeset"`
	// Applied are the paths written or removed.
	Applied []string `json:"applied"`
}
