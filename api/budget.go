package api

import (
	"time"

	guestapi "paddock.dev/paddock/guest/api"
)

// Upper bounds of the budget fields (docs/api/openapi.yaml states them;
// a test compares).
const (
	MaxBudgetExecs          = 1_000_000
	MaxBudgetSeconds        = 30 * 24 * 3600 // max_exec_seconds, max_compute_seconds
	MaxBudgetJobs           = 100_000
	MaxBudgetConcurrentJobs = guestapi.MaxJobs
	MaxBudgetChildren       = 10_000
	MaxBudgetOutputBytes    = guestapi.MaxMaxOutputBytes
	MaxBudgetWorkspaceBytes = 1 << 40
)

// Budget limits what a session may consume. Every field is optional: nil
// is no limit, and zero allows none of it.
type Budget struct {
	MaxExecs          *int64 `json:"max_execs,omitempty"`
	MaxExecSeconds    *int64 `json:"max_exec_seconds,omitempty"`
	MaxJobs           *int64 `json:"max_jobs,omitempty"`
	MaxConcurrentJobs *int64 `json:"max_concurrent_jobs,omitempty"`
	MaxChildren       *int64 `json:"max_children,omitempty"`
	MaxComputeSeconds *int64 `json:"max_compute_seconds,omitempty"`
	MaxOutputBytes    *int64 `json:"max_output_bytes,omitempty"`
	MaxWorkspaceBytes *int64 `json:"max_workspace_bytes,omitempty"`
}

// InterruptedOp is a lifecycle operation that a daemon started and did
// not finish (it died mid-way); shown until another one completes.
type InterruptedOp struct {
	Op        string    `json:"op"`
	StartedAt time.Time `json:"started_at"`
}
