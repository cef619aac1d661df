package api

import (
	"fmt"
	"time"

	"paddock.dev/paddock/errdefs"
)

// MaxApprovalWaitSeconds bounds approval_wait_seconds on exec and job
// starts.
const MaxApprovalWaitSeconds = 120

// Hold answers a command that matched an ask rule: it did not run, and
// ApprovalID names the request an operator decides.
type Hold struct {
	ApprovalID string    `json:"approval_id"`
	Summary    string    `json:"summary"`
	Matched    string    `json:"matched"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Error says what the operator must do: a Hold is also the error a
// command held for approval returns (server and client alike).
func (h *Hold) Error() string {
	return fmt.Sprintf("%s: %s matched %s; an operator must approve request %s (POST .../approvals/%s/approve), then retry with approval_id, before %s",
		errdefs.ErrApprovalRequired, h.Summary, h.Matched, h.ApprovalID, h.ApprovalID, h.ExpiresAt.Format(time.RFC3339))
}

// Unwrap makes a Hold an errdefs.ErrApprovalRequired (428).
func (h *Hold) Unwrap() error { return errdefs.ErrApprovalRequired }

// Approval is an approval request as the API shows it.
type Approval struct {
	ID         string     `json:"id"`
	Session    string     `json:"session"`
	Kind       string     `json:"kind"`
	Command    string     `json:"command"`
	Summary    string     `json:"summary"`
	Matched    string     `json:"matched"`
	State      string     `json:"state"` // pending, approved, denied, consumed, expired
	Requester  string     `json:"requester"`
	Decider    string     `json:"decider,omitempty"`
	Note       string     `json:"note,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	DecidedAt  *time.Time `json:"decided_at,omitempty"`
	ConsumedAt *time.Time `json:"consumed_at,omitempty"`
}

// Decision is the body of POST .../approvals/{approval}/approve and /deny.
type Decision struct {
	Note string `json:"note,omitempty"`
}
