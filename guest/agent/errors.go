package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
)

// Sentinel errors: errdefs' kinds under the names the agent has always
// used. Handlers wrap them with %w and a message that says what to fix;
// httpStatus answers each with its kind's status and code.
var (
	ErrBadRequest = errdefs.ErrInvalidArgument
	ErrNotFound   = errdefs.ErrNotFound
	ErrConflict   = errdefs.ErrConflict
	ErrTooLarge   = errdefs.ErrTooLarge
	ErrForbidden  = errdefs.ErrForbidden
)

// withCode wraps err (already carrying its sentinel) with a code finer
// than its kind's (api.CodeSystemPath and the like).
func withCode(code string, err error) error { return errdefs.WithCode(code, err) }

// httpStatus is the one place errors become HTTP statuses and the stable
// codes of api.Error: the kind of err (errdefs' status and code), or a
// finer code a refusal carries (errdefs.CodedError).
func httpStatus(err error) (int, string) {
	kind := kindOf(err)
	status, code := errdefs.HTTPStatus(kind), errdefs.Code(kind)
	var coded *errdefs.CodedError
	if status < 500 && errors.As(err, &coded) {
		code = coded.Code
	}
	return status, code
}

// kindOf is the kind err answers with: a sentinel it wraps or the kind of
// an os error it wraps (a missing file, a full directory), tried in this
// order, else internal.
func kindOf(err error) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, ErrBadRequest):
		return ErrBadRequest
	case errors.Is(err, ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case errors.Is(err, ErrConflict), errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return ErrConflict
	case errors.Is(err, ErrTooLarge), errors.As(err, &tooBig):
		return ErrTooLarge
	case errors.Is(err, ErrForbidden), errors.Is(err, fs.ErrPermission):
		return ErrForbidden
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG):
		return ErrBadRequest
	}
	return errdefs.ErrInternal
}

// writeError answers with an api.Error.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := httpStatus(err)
	if status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	writeJSON(w, status, api.Error{Error: err.Error(), Code: code})
}

// rootErr turns an error from an os.Root operation on path p into one that
// says what went wrong in the caller's terms.
func rootErr(p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s does not exist", ErrNotFound, p)
	case isEscape(err):
		return fmt.Errorf("%w: %s leads outside the root through a symbolic link (absolute or climbing link)", ErrForbidden, p)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: a parent of %s is not a directory", ErrBadRequest, p)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// isEscape reports whether err is os.Root refusing a path that leaves the
// root. The os package does not export that error; it is the only
// *PathError it returns whose cause is not an errno.
func isEscape(err error) bool {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return false
	}
	var errno syscall.Errno
	return !errors.As(pe.Err, &errno) && !errors.Is(pe.Err, fs.ErrNotExist)
}
