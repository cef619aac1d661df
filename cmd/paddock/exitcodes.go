package main

import (
	"errors"

	"paddock.dev/paddock/errdefs"
)

// kindExit is the exit code of each errdefs kind that means something to
// a script; any other kind (internal, bad_gateway, too_many_requests,
// idempotency_mismatch, ...) exits with exitError. An API answer
// (client.Error), a backend's refusal (hypervisor.ErrNotFound and the
// like) and the CLI's own refusals below are all of a kind, so the exit
// code never depends on a message's text or on a raw status.
var kindExit = map[error]int{
	errdefs.ErrInvalidArgument:  exitUsage,
	errdefs.ErrTooLarge:         exitUsage,
	errdefs.ErrNotFound:         exitNotFound,
	errdefs.ErrConflict:         exitConflict,
	errdefs.ErrRevision:         exitConflict,
	errdefs.ErrForbidden:        exitForbidden,
	errdefs.ErrApprovalRequired: exitHeld,
	errdefs.ErrUnauthenticated:  exitUnauthorized,
}

// exitCode is the process's exit status for what a command returned: the
// command's own status (`sandbox run`), 2 for a usage error, else its
// errdefs kind's code (errdefs decides which kind an error of two is).
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ec exitCodeError
	if errors.As(err, &ec) {
		return int(ec)
	}
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	if k, ok := errdefs.KindOf(err); ok {
		if code, ok := kindExit[k.Err]; ok {
			return code
		}
	}
	return exitError
}

// notFoundError and conflictError are the CLI's own refusals (a tenant
// or orphan that is not there, or not in the needed state), of the kind
// their names say.
type notFoundError struct{ error }
type conflictError struct{ error }

func (e notFoundError) Unwrap() []error { return []error{e.error, errdefs.ErrNotFound} }
func (e conflictError) Unwrap() []error { return []error{e.error, errdefs.ErrConflict} }
