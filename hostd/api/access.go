package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"paddock.dev/paddock/hostd/api/routes"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
)

// RouteAccess returns what each route asks of its caller, "METHOD
// /pattern" → access, from the route table (hostd/api/routes, where the
// decisions are explained). Tests and tools read it; the server itself
// reads the rows.
func RouteAccess() map[string]auth.Access {
	out := map[string]auth.Access{}
	for _, rt := range routes.All() {
		out[rt.Pattern] = rt.Access
	}
	return out
}

// accessOf is a route's access; a pattern with no row (none is served:
// New refuses a handler without one) is the admin's only.
func accessOf(pattern string) auth.Access {
	if rt, ok := routes.Lookup(pattern); ok {
		return rt.Access
	}
	return auth.AccessAdmin
}

// Verifier returns the verifier of the server's bearer tokens (the daemon
// gives it the tenants, and new ones on SIGHUP).
func (s *Server) Verifier() *auth.Verifier { return s.verifier }

// recheckEvery is how often a call made with a session token checks,
// while it runs, that the token is still live.
const recheckEvery = time.Second

// authError makes an auth refusal answer with the status of the API's own
// sentinel while keeping auth's message.
type authError struct {
	status error // errUnauthorized or session.ErrForbidden
	err    error
}

func (e *authError) Error() string   { return e.err.Error() }
func (e *authError) Unwrap() []error { return []error{e.status, e.err} }

// authorize verifies the caller of a route and checks its access. It
// returns the request with the caller in its context, and a stop function
// to call when the handler returns.
func (s *Server) authorize(pattern string, r *http.Request) (*http.Request, func(), error) {
	id, err := s.verifyCaller(pattern, r)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return r, func() {}, &authError{errUnauthorized, err}
	}
	if err != nil {
		return r, func() {}, err
	}
	if err := id.Permit(accessOf(pattern), r.PathValue("id")); err != nil {
		return r, func() {}, &authError{session.ErrForbidden, err}
	}
	ctx, err := auth.WithToolFrom(auth.WithIdentity(r.Context(), id), r)
	if err != nil {
		return r, func() {}, err
	}
	if id.Kind != auth.KindSession {
		return r.WithContext(ctx), func() {}, nil
	}
	// A session token is checked again while the call runs (a stream, a
	// long poll, a long exec): revoking it ends the call.
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(recheckEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := s.verifier.Recheck(ctx, id); errors.Is(err, auth.ErrUnauthenticated) {
					cancel(err)
					return
				}
			}
		}
	}()
	return r.WithContext(ctx), func() { close(done); cancel(nil) }, nil
}

// revokedDuring turns what a handler returned into 401 when the call was
// cut short because its token was revoked or expired meanwhile.
func revokedDuring(r *http.Request, err error) error {
	if err == nil || r.Context().Err() == nil {
		return err
	}
	if cause := context.Cause(r.Context()); errors.Is(cause, auth.ErrUnauthenticated) {
		return &authError{errUnauthorized, cause}
	}
	return err
}
