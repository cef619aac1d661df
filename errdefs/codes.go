package errdefs

// Finer codes. Each rides on a *CodedError (or a refusal body of its own)
// whose status comes from the kind named beside it. The list is the one
// catalogue of codes a client may see besides the kind codes; docs/errors.md
// says what each one means and what to do about it.
const (
	// 403, forbidden: a grant naming one of the daemon's PADDOCK_SECRET_
	// variables asked for by anyone but the admin.
	CodeSecretRefAdminOnly = "secret_ref_admin_only"
	// 403, forbidden: a grant route called by a session token (or a
	// caller that is neither the admin nor a tenant).
	CodeGrantNeedsAdminOrTenant = "grant_needs_admin_or_tenant"
	// 409, conflict: a create with max_compute_seconds on a backend that
	// does not measure its machines' CPU time (qemu), where a process
	// left in the background would escape the budget.
	CodeComputeBudgetUnmetered = "compute_budget_unmetered"

	// 409, conflict: the backend's disk cannot hold the sandbox on top of
	// what is promised already.
	CodeDiskExhausted = "disk_exhausted"
	// 409, conflict: a request with an Idempotency-Key whose first
	// request still runs after the retry waited for it; retry later for
	// its answer.
	CodeIdempotencyInFlight = "idempotency_in_flight"
	// 403, forbidden: the tenant's live sessions and sandboxes would pass
	// one of its limits.
	CodeTenantDiskLimit   = "tenant_disk_limit"
	CodeTenantMemoryLimit = "tenant_memory_limit"
	CodeTenantCPUsLimit   = "tenant_cpus_limit"
	// 400, invalid_argument: more memory or CPUs than the host has.
	CodeMemoryAboveHost = "memory_above_host"
	CodeCPUsAboveHost   = "cpus_above_host"

	// 403, forbidden: the process policy refuses the command (the body
	// carries the rule, pattern and piece).
	CodePolicyRefused = "policy_refused"
	// 403, forbidden: a budget limit is reached (the body carries the
	// budget, its limit and what was used).
	CodeBudgetExceeded = "budget_exceeded"
	// 503, unavailable: the session has a budget, and the daemon has no
	// budgets service to hold its commands and writes to it (a daemon
	// wired without hostd/budgets).
	CodeBudgetsUnavailable = "budgets_unavailable"

	// 409, conflict: a command that needs approval is longer than an
	// approval request keeps, so an approver could not see all of it.
	CodeApprovalCommandTooLong = "approval_command_too_long"

	// 429, too_many_requests: a stream cap is reached (the body carries
	// the cap's value).
	CodeJobStreamsDaemon    = "job_streams_daemon"
	CodeJobStreamsTenant    = "job_streams_tenant"
	CodeJobStreamsSession   = "job_streams_session"
	CodeEventStreamsDaemon  = "event_streams_daemon"
	CodeEventStreamsTenant  = "event_streams_tenant"
	CodeEventStreamsSession = "event_streams_session"
	// Server-Sent Event "error" only: the stream reached its longest
	// life; resume from the last event id.
	CodeStreamMaxAge = "stream_max_age"
	// Server-Sent Event "error" only: the session stopped running, so
	// its event stream ends.
	CodeSessionEnded = "session_ended"

	// 400, invalid_argument: a fork (or branch) names an identity other
	// than best-effort, unique or preserve.
	CodeForkIdentityUnknown = "fork_identity_unknown"
	// 409, conflict: a fork asked for unique identities and a child's
	// host name or machine id was not its own; no child was kept.
	CodeForkIdentityNotUnique = "fork_identity_not_unique"

	// 403, forbidden, from the files routes (the guest agent's own
	// refusals, passed on): the path lies under a system directory of the
	// image, is a program of the session's execute list, may not be
	// touched with the guest user's rights, or is the agent's own /proc
	// entry.
	CodeSystemPath       = "system_path"
	CodeExecProgram      = "exec_program"
	CodePermissionDenied = "permission_denied"
	CodeAgentProcess     = "agent_process"

	// Promotion of a fork child (POST .../promote). 409, conflict: the
	// session is no fork child; the child has no baseline from its fork;
	// the plan differs from the plan_id given; a path both sides changed
	// (without skip_conflicts); the plan moves more than the limits.
	CodeNotForkChild     = "not_fork_child"
	CodeNoBaseline       = "no_baseline"
	CodePlanChanged      = "plan_changed"
	CodePromoteConflicts = "promote_conflicts"
	CodePromoteTooLarge  = "promote_too_large"
	// 502, bad_gateway: the transfer stopped midway; the message says
	// how many paths were applied and names the checkpoint that undoes
	// them.
	CodePromoteIncomplete = "promote_incomplete"

	// Changesets of a speculation (POST .../speculate, .../changesets).
	// 409, conflict: every kept changeset of the target is still pending;
	// a decision on a changeset already decided; an apply of one not
	// approved (or applied already), of one that is incomplete, or of one
	// whose files changed on the target since (the message names them).
	CodeChangesetsFull       = "changesets_full"
	CodeChangesetDecided     = "changeset_decided"
	CodeChangesetNotApproved = "changeset_not_approved"
	CodeChangesetIncomplete  = "changeset_incomplete"
	CodeChangesetConflict    = "changeset_conflict"
)

// FinerCodes lists the finer codes with the kind each one is of, for
// tests and docs.
func FinerCodes() map[string]error {
	return map[string]error{
		CodeSecretRefAdminOnly:      ErrForbidden,
		CodeGrantNeedsAdminOrTenant: ErrForbidden,
		CodeComputeBudgetUnmetered:  ErrConflict,
		CodeDiskExhausted:           ErrConflict,
		CodeForkIdentityUnknown:     ErrInvalidArgument,
		CodeForkIdentityNotUnique:   ErrConflict,
		CodeIdempotencyInFlight:     ErrConflict,
		CodeTenantDiskLimit:         ErrForbidden,
		CodeTenantMemoryLimit:       ErrForbidden,
		CodeTenantCPUsLimit:         ErrForbidden,
		CodeMemoryAboveHost:         ErrInvalidArgument,
		CodeCPUsAboveHost:           ErrInvalidArgument,
		CodePolicyRefused:           ErrForbidden,
		CodeBudgetExceeded:          ErrForbidden,
		CodeBudgetsUnavailable:      ErrUnavailable,
		CodeApprovalCommandTooLong:  ErrConflict,
		CodeJobStreamsDaemon:        ErrTooManyRequests,
		CodeJobStreamsTenant:        ErrTooManyRequests,
		CodeJobStreamsSession:       ErrTooManyRequests,
		CodeEventStreamsDaemon:      ErrTooManyRequests,
		CodeEventStreamsTenant:      ErrTooManyRequests,
		CodeEventStreamsSession:     ErrTooManyRequests,
		CodeStreamMaxAge:            ErrUnavailable,
		CodeSessionEnded:            ErrConflict,
		CodeSystemPath:              ErrForbidden,
		CodeExecProgram:             ErrForbidden,
		CodePermissionDenied:        ErrForbidden,
		CodeAgentProcess:            ErrForbidden,
		CodeNotForkChild:            ErrConflict,
		CodeNoBaseline:              ErrConflict,
		CodePlanChanged:             ErrConflict,
		CodePromoteConflicts:        ErrConflict,
		CodePromoteTooLarge:         ErrConflict,
		CodePromoteIncomplete:       ErrBadGateway,
		CodeChangesetsFull:          ErrConflict,
		CodeChangesetDecided:        ErrConflict,
		CodeChangesetNotApproved:    ErrConflict,
		CodeChangesetIncomplete:     ErrConflict,
		CodeChangesetConflict:       ErrConflict,
	}
}
