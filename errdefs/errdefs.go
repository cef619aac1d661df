// Package errdefs is Paddock's one set of error kinds. Every layer (the
// guest agent and its client, hostd, the Go SDK in client/) wraps one of
// these sentinels, so a caller anywhere asks errors.Is(err, ErrConflict)
// instead of parsing text, and the HTTP layer turns a kind into a status
// and a stable code in one place.
//
// The wire form of an error is a JSON object whose "error" is the message
// (a string, as clients of the spec read it) and whose "code" is a stable
// string a client can branch on. A refusal may carry more fields beside
// them (the policy rule, the approval hold, the budget), named per code in
// docs/api/openapi.yaml. FromHTTP turns a status and code back into an
// error that wraps the kind's sentinel.
//
// A finer code (disk_exhausted, secret_ref_admin_only, …) rides on a
// *CodedError that wraps the sentinel of its kind: the status comes from
// the kind, the code from the CodedError.
//
// This package imports nothing of the server and must stay that way:
// client/ and the guest import it.
package errdefs

import (
	"errors"
	"net/http"
)

// The kinds. Their messages are short; the error that wraps one says what
// went wrong and what to do.
var (
	ErrInvalidArgument     = errors.New("bad request")            // 400 invalid_argument
	ErrUnauthenticated     = errors.New("unauthenticated")        // 401 unauthenticated
	ErrForbidden           = errors.New("forbidden")              // 403 forbidden
	ErrNotFound            = errors.New("not found")              // 404 not_found
	ErrConflict            = errors.New("conflict")               // 409 conflict
	ErrRevision            = errors.New("revision mismatch")      // 412 revision_mismatch
	ErrTooLarge            = errors.New("too large")              // 413 too_large
	ErrIdempotencyMismatch = errors.New("idempotency key reused") // 422 idempotency_mismatch
	ErrApprovalRequired    = errors.New("approval required")      // 428 approval_required
	ErrTooManyRequests     = errors.New("too many requests")      // 429 too_many_requests
	ErrInternal            = errors.New("internal error")         // 500 internal
	ErrNotImplemented      = errors.New("not implemented")        // 501 not_implemented
	ErrBadGateway          = errors.New("bad gateway")            // 502 bad_gateway
	ErrUnavailable         = errors.New("unavailable")            // 503 unavailable
)

// Kind codes: the code sent when nothing finer applies.
const (
	CodeInvalidArgument     = "invalid_argument"
	CodeUnauthenticated     = "unauthenticated"
	CodeForbidden           = "forbidden"
	CodeNotFound            = "not_found"
	CodeConflict            = "conflict"
	CodeRevision            = "revision_mismatch"
	CodeTooLarge            = "too_large"
	CodeIdempotencyMismatch = "idempotency_mismatch"
	CodeApprovalRequired    = "approval_required"
	CodeTooManyRequests     = "too_many_requests"
	CodeInternal            = "internal"
	CodeNotImplemented      = "not_implemented"
	CodeBadGateway          = "bad_gateway"
	CodeUnavailable         = "unavailable"
)

// Kind is one row of the table: a sentinel, its status and its code.
type Kind struct {
	Err    error
	Status int
	Code   string
}

// kinds is the table, in the order HTTPStatus tries them: an error that
// wraps two kinds (a 404 inside a conflict's message chain) gets the
// first listed.
var kinds = []Kind{
	{ErrUnauthenticated, http.StatusUnauthorized, CodeUnauthenticated},
	{ErrIdempotencyMismatch, http.StatusUnprocessableEntity, CodeIdempotencyMismatch},
	{ErrApprovalRequired, http.StatusPreconditionRequired, CodeApprovalRequired},
	{ErrTooManyRequests, http.StatusTooManyRequests, CodeTooManyRequests},
	{ErrInvalidArgument, http.StatusBadRequest, CodeInvalidArgument},
	{ErrNotFound, http.StatusNotFound, CodeNotFound},
	{ErrConflict, http.StatusConflict, CodeConflict},
	{ErrRevision, http.StatusPreconditionFailed, CodeRevision},
	{ErrForbidden, http.StatusForbidden, CodeForbidden},
	{ErrTooLarge, http.StatusRequestEntityTooLarge, CodeTooLarge},
	{ErrNotImplemented, http.StatusNotImplemented, CodeNotImplemented},
	{ErrBadGateway, http.StatusBadGateway, CodeBadGateway},
	{ErrUnavailable, http.StatusServiceUnavailable, CodeUnavailable},
	{ErrInternal, http.StatusInternalServerError, CodeInternal},
}

// Kinds returns the table (a copy), for tests and docs.
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// KindOf is the first kind (in the table's order) err wraps, and whether
// it wraps one at all.
func KindOf(err error) (Kind, bool) {
	for _, k := range kinds {
		if errors.Is(err, k.Err) {
			return k, true
		}
	}
	return Kind{}, false
}

// kindOf is the first kind err wraps, or the internal kind.
func kindOf(err error) Kind {
	for _, k := range kinds {
		if errors.Is(err, k.Err) {
			return k
		}
	}
	return kinds[len(kinds)-1]
}

// HTTPStatus is the status an error is answered with: its kind's, 500 for
// an error of no kind, 200 for nil.
func HTTPStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	return kindOf(err).Status
}

// Code is the stable code of err: a CodedError's own code if it carries
// one, else its kind's ("internal" for an error of no kind, "" for nil).
func Code(err error) string {
	if err == nil {
		return ""
	}
	var c *CodedError
	if errors.As(err, &c) && c.Code != "" {
		return c.Code
	}
	return kindOf(err).Code
}

// CodedError is an error with a code finer than its kind's. Err must wrap
// one of the kinds (the status comes from it).
type CodedError struct {
	Code string
	Err  error
}

func (e *CodedError) Error() string { return e.Err.Error() }
func (e *CodedError) Unwrap() error { return e.Err }

// WithCode wraps err with a finer code.
func WithCode(code string, err error) error { return &CodedError{Code: code, Err: err} }

// New returns a sentinel of a package's own that is of kind: errors.Is
// tells it apart from the kind's other errors (store.ErrNotFound is not
// hypervisor.ErrNotFound), its message is msg alone, and it answers with
// the kind's status and code.
func New(kind error, msg string) error { return &kindError{msg: msg, kind: kind} }

type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// StatusError is an error read off the wire: the status, the code and the
// message the other side sent. It wraps the sentinel of the code's kind
// (a kind code, or a finer code listed in FinerCodes), else of the
// status's kind, so errors.Is works on it.
type StatusError struct {
	Status  int
	Code    string
	Message string
	kind    error
}

func (e *StatusError) Error() string { return e.Message }
func (e *StatusError) Unwrap() error { return e.kind }

// FromHTTP builds the error a client returns for an answer with status,
// code (may be empty: older servers, or a proxy's own page) and message.
// A status of 0 (a Server-Sent Event's error, which has none) goes by the
// code alone.
func FromHTTP(status int, code, message string) *StatusError {
	if message == "" {
		message = http.StatusText(status)
	}
	return &StatusError{Status: status, Code: code, Message: message, kind: FromCode(status, code)}
}

// FromCode is the kind of an answer with status and code: the code's
// kind when the code is known, else the status's.
func FromCode(status int, code string) error {
	kind := ErrInternal
	found := false
	for _, k := range kinds {
		if k.Code == code && code != "" {
			kind, found = k.Err, true
			break
		}
	}
	if k, ok := FinerCodes()[code]; ok && !found {
		kind, found = k, true
	}
	if !found {
		for _, k := range kinds {
			if k.Status == status {
				kind, found = k.Err, true
				break
			}
		}
	}
	if !found {
		switch {
		case status >= 500:
			kind = ErrInternal
		case status >= 400:
			kind = ErrInvalidArgument
		}
	}
	return kind
}
