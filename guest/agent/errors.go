package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"

	"paddock.dev/paddock/guest/api"
)

// Sentinel errors. Handlers wrap them with %w and a message that says what
// to fix; httpStatus maps them (and the os errors below) to a status.
var (
	ErrBadRequest = errors.New("bad request")
	ErrNotFound   = errors.New("not found")
	ErrConflict   = errors.New("conflict")
	ErrTooLarge   = errors.New("too large")
	ErrForbidden  = errors.New("forbidden")
)

// codedError gives a refusal a more precise code than its sentinel's
// (api.CodeSystemPath and the like); the status still comes from the
// sentinel it wraps.
type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// withCode wraps err (already carrying its sentinel) with code.
func withCode(code string, err error) error { return &codedError{code: code, err: err} }

// httpStatus is the one place errors become HTTP statuses and the stable
// codes of api.Error.
func httpStatus(err error) (int, string) {
	status, code := sentinelStatus(err)
	var coded *codedError
	if status < 500 && errors.As(err, &coded) {
		code = coded.code
	}
	return status, code
}

func sentinelStatus(err error) (int, string) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, ErrConflict), errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return http.StatusConflict, "conflict"
	case errors.Is(err, ErrTooLarge), errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, ErrForbidden), errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG):
		return http.StatusBadRequest, "bad_request"
	}
	return http.StatusInternalServerError, "internal"
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
