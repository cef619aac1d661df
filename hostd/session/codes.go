package session

import "paddock.dev/paddock/errdefs"

// CodedError is a refusal with a stable, machine-readable code finer than
// its kind's (errdefs.CodedError: the status comes from the kind Err
// wraps, the code is sent beside the message).
type CodedError = errdefs.CodedError

// Error codes this package sends; errdefs lists them all.
const (
	CodeSecretRefAdminOnly      = errdefs.CodeSecretRefAdminOnly
	CodeGrantNeedsAdminOrTenant = errdefs.CodeGrantNeedsAdminOrTenant
	CodeComputeBudgetUnmetered  = errdefs.CodeComputeBudgetUnmetered
	CodeDiskExhausted           = errdefs.CodeDiskExhausted
	CodeTenantDiskLimit         = errdefs.CodeTenantDiskLimit
	CodeTenantMemoryLimit       = errdefs.CodeTenantMemoryLimit
	CodeTenantCPUsLimit         = errdefs.CodeTenantCPUsLimit
	CodeMemoryAboveHost         = errdefs.CodeMemoryAboveHost
	CodeCPUsAboveHost           = errdefs.CodeCPUsAboveHost
)
