package session

// CodedError is a refusal with a stable, machine-readable code. The API
// sends the code beside the message (`"code": "…"` in the error body), so
// a client can act on the refusal without parsing text; the status still
// comes from the sentinel error Err wraps.
type CodedError struct {
	Code string
	Err  error
}

func (e *CodedError) Error() string { return e.Err.Error() }
func (e *CodedError) Unwrap() error { return e.Err }

// Error codes the API sends.
const (
	// CodeSecretRefAdminOnly: a grant naming one of the daemon's
	// PADDOCK_SECRET_ variables asked for by anyone but the admin.
	CodeSecretRefAdminOnly = "secret_ref_admin_only"
	// CodeGrantNeedsAdminOrTenant: a grant route called by a session
	// token (or a caller that is neither the admin nor a tenant).
	CodeGrantNeedsAdminOrTenant = "grant_needs_admin_or_tenant"
	// CodeComputeBudgetUnmetered: a create with max_compute_seconds on a
	// backend that does not measure its machines' CPU time (qemu), where
	// a process left in the background would escape the budget.
	CodeComputeBudgetUnmetered = "compute_budget_unmetered"
)
