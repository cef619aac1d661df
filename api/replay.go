package api

import "encoding/json"

// Limits of POST /v1/agents/sessions/{id}/replay.
const (
	// MaxReplayCommands is the most commands one replay runs (or, dry,
	// lists); the answer's next_since says where the next one goes on.
	MaxReplayCommands = 500
	// MaxReplaySkipped is the most skipped entries one answer lists; the
	// rest are counted in skipped_omitted.
	MaxReplaySkipped = 500
	// MaxReplayScan is the most ledger entries of the source one replay
	// reads, whatever they are.
	MaxReplayScan = 50000
	// MaxReplaySeconds bounds a whole replay: no step starts after it.
	MaxReplaySeconds = 3600
	// MaxReplayOutputBytes is how much of each stream a step's answer
	// keeps (the target's exec answers the whole of it).
	MaxReplayOutputBytes = 2048
)

// Why a replay stopped before the end of its range (ReplayStop.Reason).
const (
	ReplayStopFailure  = "failure"           // a step exited non-zero and stop_on_failure held
	ReplayStopRefused  = "refused"           // the target refused a step (policy, budget, a hook)
	ReplayStopApproval = "approval_required" // the target holds a step for an operator
	ReplayStopError    = "error"             // the step could not run (the target stopped, the guest failed)
	ReplayStopLimit    = "limit"             // MaxReplayCommands, MaxReplayScan or MaxReplaySeconds
)

// What became of one step (ReplayStep.Status).
const (
	ReplayPlanned = "planned" // a dry run: listed, not run
	ReplayOK      = "ok"      // ran and exited 0
	ReplayFailed  = "failed"  // ran and exited non-zero (or timed out)
	ReplayNotRun  = "not_run" // refused, held, or could not start
	ReplayUnsure  = "unsure"  // cut off while it ran: it may have run
)

// ReplayRequest is the body of POST .../replay: run the exec commands of
// this session's ledger, in order, in Target.
type ReplayRequest struct {
	// Target is the session the commands run in; without it DryRun is
	// required.
	Target string `json:"target,omitempty"`
	// DryRun lists the steps and what is skipped, and runs nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Since and Until bound the source's ledger entries replayed, by seq,
	// both included (0: from the first, to the last).
	Since int64 `json:"since,omitempty"`
	Until int64 `json:"until,omitempty"`
	// StopOnFailure (default true) stops at the first step that exits
	// non-zero; false goes on. A refusal or an approval request always
	// stops.
	StopOnFailure *bool `json:"stop_on_failure,omitempty"`
	// TimeoutSeconds is each command's timeout, as on exec (default 300,
	// at most 3600).
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// ApprovalID spends an approved request for the first step run: a
	// replay that stopped at an approval goes on from its next_since with
	// the approval the operator granted.
	ApprovalID string `json:"approval_id,omitempty"`
}

// ReplayStep is one exec command of the source and what it did in the
// target.
type ReplayStep struct {
	// Seq is the source's ledger entry the command came from.
	Seq     int64  `json:"seq"`
	Command string `json:"command"`
	// RecordedExitCode is the exit code the source recorded (absent when
	// its exec was cut off and recorded none).
	RecordedExitCode *int   `json:"recorded_exit_code,omitempty"`
	Status           string `json:"status"`
	// ExitCode is the target's (absent when the step did not run).
	ExitCode *int `json:"exit_code,omitempty"`
	// SameExitCode compares the two (absent unless both are known).
	SameExitCode *bool `json:"same_exit_code,omitempty"`
	TimedOut     bool  `json:"timed_out,omitempty"`
	DurationMS   int64 `json:"duration_ms,omitempty"`
	// Stdout and Stderr are the first MaxReplayOutputBytes of each.
	Stdout    string `json:"stdout,omitempty"`
	Stderr    string `json:"stderr,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// ReplaySkipped is a ledger entry of the source that a replay cannot
// redo: the ledger says what was done, not with what content.
type ReplaySkipped struct {
	Seq    int64  `json:"seq"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// ReplayStop says why a replay ended before its range did.
type ReplayStop struct {
	Reason string `json:"reason"`
	// Seq is the source entry it stopped at (0 for a limit reached
	// between steps).
	Seq int64 `json:"seq,omitempty"`
	// Status and Body are the target's exec answer for a step it did not
	// run (a 403 refusal, a 428 hold, ...), as that route would have
	// answered it.
	Status int             `json:"status,omitempty"`
	Code   string          `json:"code,omitempty"`
	Error  string          `json:"error,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	// ApprovalID is the request an operator must decide (a hold).
	ApprovalID string `json:"approval_id,omitempty"`
}

// ReplayResult answers POST .../replay.
type ReplayResult struct {
	Source string `json:"source"`
	Target string `json:"target,omitempty"`
	DryRun bool   `json:"dry_run"`
	Since  int64  `json:"since"`
	Until  int64  `json:"until,omitempty"`
	// Steps are the exec commands in the range, in order: run, or (dry)
	// planned; a stop leaves the rest out.
	Steps          []ReplayStep    `json:"steps"`
	Skipped        []ReplaySkipped `json:"skipped"`
	SkippedOmitted int             `json:"skipped_omitted,omitempty"`
	// Ran counts the steps run, Failed those that exited non-zero.
	Ran    int `json:"ran"`
	Failed int `json:"failed"`
	// Stopped is why the replay ended early; absent when it reached the
	// end of its range.
	Stopped *ReplayStop `json:"stopped,omitempty"`
	// NextSince is where a following replay goes on (the since to send):
	// the step a stop did not run, the one after a failed step, or the
	// first one past a limit. 0 when the range is done.
	NextSince int64 `json:"next_since,omitempty"`
}

// MarshalJSON keeps steps and skipped lists, never null.
func (r ReplayResult) MarshalJSON() ([]byte, error) {
	type plain ReplayResult
	if r.Steps == nil {
		r.Steps = []ReplayStep{}
	}
	if r.Skipped == nil {
		r.Skipped = []ReplaySkipped{}
	}
	return json.Marshal(plain(r))
}
