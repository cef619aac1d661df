package proxy

import (
	"errors"
	"net/http"
	"strconv"
)

// Why the proxy refuses something. Each is mapped to an HTTP status in one
// place (statusOf); check them with errors.Is.
var (
	ErrBadRequest        = errors.New("malformed request")
	ErrHeaderTooLarge    = errors.New("request head too large")
	ErrMethodRefused     = errors.New("method refused")
	ErrUnsupported       = errors.New("not supported")
	ErrDenied            = errors.New("denied by policy")
	ErrAddressRefused    = errors.New("address refused")
	ErrNeedsInterception = errors.New("needs TLS interception")
	ErrUnresolvable      = errors.New("cannot resolve")
	ErrTooManyTunnels    = errors.New("too many open tunnels")
	ErrUpstream          = errors.New("cannot reach upstream")
)

// statusOf is the HTTP status the sandbox sees for err.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrHeaderTooLarge):
		return http.StatusRequestHeaderFieldsTooLarge
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrMethodRefused):
		return http.StatusMethodNotAllowed
	case errors.Is(err, ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, ErrDenied), errors.Is(err, ErrAddressRefused), errors.Is(err, ErrNeedsInterception):
		return http.StatusForbidden
	case errors.Is(err, ErrTooManyTunnels):
		return http.StatusTooManyRequests
	case errors.Is(err, ErrUnresolvable), errors.Is(err, ErrUpstream):
		return http.StatusBadGateway
	default:
		return http.StatusInternalServerError
	}
}

// A refusal is something the proxy will not carry, in words for the
// sandbox and the ledger.
type refusal struct {
	err    error  // one of the sentinels above
	target string // host:port as far as it is known, or ""
	reason string // what happened, and where possible what to do
}

func (r *refusal) Error() string {
	if r.target == "" {
		return r.err.Error() + ": " + r.reason
	}
	return r.target + ": " + r.err.Error() + ": " + r.reason
}

func (r *refusal) Unwrap() error { return r.err }

// refusalBody is the short text/plain body the sandbox gets.
func refusalBody(err error) string {
	return "paddock egress: " + err.Error() + "\n"
}

// refusalHead is a complete HTTP/1.1 response head for err, with its body.
func refusalResponse(err error, close bool) []byte {
	status := statusOf(err)
	body := refusalBody(err)
	b := make([]byte, 0, 160+len(body))
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	if close {
		b = append(b, "\r\nConnection: close"...)
	}
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}
