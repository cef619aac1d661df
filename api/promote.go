package api

// Promotion: a fork child's workspace changes carried back to its parent
// (POST /v1/agents/sessions/{child}/promote).

// Promotion limits.
const (
	// MaxPromoteChanges bounds the paths one promotion moves (its apply
	// list); a larger plan is refused: name some with paths.
	MaxPromoteChanges = 2000
	// MaxPromotePaths bounds the paths a request names.
	MaxPromotePaths = 100
	// MaxPromoteBytes bounds the bytes one promotion copies.
	MaxPromoteBytes int64 = 2 << 30
)

// Promotion change kinds (PromoteChange.Op).
const (
	PromoteAdded    = "added"
	PromoteModified = "modified"
	PromoteDeleted  = "deleted"
)

// PromoteRequest is the body of POST .../promote.
type PromoteRequest struct {
	// DryRun returns the plan and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// PlanID, when given, must be the plan_id of the plan as it is now
	// (409 plan_changed otherwise).
	PlanID string `json:"plan_id,omitempty"`
	// SkipConflicts applies the clean paths and leaves the conflicts;
	// without it any conflict refuses the whole promotion.
	SkipConflicts bool `json:"skip_conflicts,omitempty"`
	// Paths limits the promotion to these files or directories inside
	// the workspace (absolute, or relative to the workspace).
	Paths []string `json:"paths,omitempty"`
}

// PromoteChange is one path of a plan, relative to the workspace.
type PromoteChange struct {
	Path string `json:"path"`
	// Op is added, modified or deleted: what the child did to the path.
	Op string `json:"op"`
	// Size, Mode and SHA256 are the child's file (empty for deleted).
	Size   int64  `json:"size,omitempty"`
	Mode   string `json:"mode,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// PromoteConflict is a path both sides changed since the fork.
type PromoteConflict struct {
	Path string `json:"path"`
	// Op is what the child did to it; Reason says what the parent did.
	Op     string `json:"op"`
	Reason string `json:"reason"`
}

// NotCarried is something of the child a promotion does not move.
type NotCarried struct {
	// What is memory, processes, volume, outside_workspace or
	// not_regular_file.
	What string `json:"what"`
	// Path names the volume's mount or the entry (relative to the
	// workspace) when there is one.
	Path string `json:"path,omitempty"`
	Note string `json:"note"`
}

// PromotePlan is the three-way comparison of the child's baseline (the
// parent's workspace at the fork), the child now and the parent now.
type PromotePlan struct {
	// Apply are the child's changes the parent does not have yet.
	Apply []PromoteChange `json:"apply"`
	// AlreadyApplied are the child's changes the parent has already.
	AlreadyApplied []PromoteChange `json:"already_applied"`
	// Conflicts are paths the parent changed too.
	Conflicts []PromoteConflict `json:"conflicts"`
	// Untouched counts the workspace files the child did not change.
	Untouched int `json:"untouched"`
	// Bytes is what applying copies.
	Bytes int64 `json:"bytes"`
}

// PromoteResult answers POST .../promote.
type PromoteResult struct {
	Child     string `json:"child"`
	Parent    string `json:"parent"`
	Workspace string `json:"workspace"`
	DryRun    bool   `json:"dry_run"`
	// PlanID is a digest of the plan: give it back to apply exactly this
	// plan.
	PlanID string      `json:"plan_id"`
	Plan   PromotePlan `json:"plan"`
	// Applied are the paths written or removed on the parent (none on a
	// dry run); Skipped the conflicts skip_conflicts left.
	Applied []string `json:"applied"`
	Skipped []string `json:"skipped"`
	// Checkpoint is the parent's disk checkpoint taken before the first
	// write (restore it to undo the promotion); empty when nothing was
	// written.
	Checkpoint string       `json:"checkpoint,omitempty"`
	NotCarried []NotCarried `json:"not_carried"`
}
