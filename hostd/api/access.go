package api

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"time"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
)

// routeAccess is what each route asks of its caller: a grantable op
// (admin and tenant tokens have every op; a session token only those it
// was minted with, and only on its own session), or a class no op opens.
// Every route the router serves has an entry (TestRouteAccess); a route
// registered without one is served to the admin token only.
//
// Decisions worth knowing: git status, diff and log need git, not read,
// because a diff shows file contents; read shows what the session is and
// did (record, ledger, trajectory, artifact paths, probe), never content.
// Listing jobs needs jobs, since job records carry commands and the
// read routes carry output. Every upload route, the listings included,
// needs files.write. An agent may see its own approval requests (read),
// never decide one. Restore, fork, delete, grants and tokens are never
// grantable: a session token cannot widen or outlive its own session.
// Making and deleting a preview URL needs preview (it opens a port to
// whoever holds the URL); listing them needs read, since the list shows
// only what the ledger (read) shows already: ids, ports and expiries,
// never a token.
var routeAccess = map[string]auth.Access{
	"POST /v1/agents/sessions":                                   auth.AccessTenant,
	"GET /v1/agents/sessions":                                    auth.AccessTenant,
	"GET /v1/agents/sessions/{id}":                               auth.OpRead,
	"DELETE /v1/agents/sessions/{id}":                            auth.AccessTenant,
	"POST /v1/agents/sessions/{id}/exec":                         auth.OpExec,
	"POST /v1/agents/sessions/{id}/exec/stream":                  auth.OpExec,
	"POST /v1/agents/sessions/{id}/checkpoint":                   auth.OpCheckpoint,
	"POST /v1/agents/sessions/{id}/restore":                      auth.AccessTenant,
	"POST /v1/agents/sessions/{id}/fork":                         auth.AccessTenant,
	"GET /v1/agents/sessions/{id}/artifacts":                     auth.OpRead,
	"GET /v1/agents/sessions/{id}/events":                        auth.OpRead,
	"GET /v1/agents/sessions/{id}/events/stream":                 auth.OpRead,
	"GET /v1/agents/sessions/{id}/trajectory":                    auth.OpRead,
	"GET /v1/agents/sessions/{id}/probe":                         auth.OpRead,
	"GET /v1/agents/sessions/{id}/git/status":                    auth.OpGit,
	"GET /v1/agents/sessions/{id}/git/diff":                      auth.OpGit,
	"GET /v1/agents/sessions/{id}/git/log":                       auth.OpGit,
	"POST /v1/agents/sessions/{id}/git/commit":                   auth.OpGit,
	"POST /v1/agents/sessions/{id}/git/branch":                   auth.OpGit,
	"GET /v1/agents/sessions/{id}/files":                         auth.OpFilesRead,
	"GET /v1/agents/sessions/{id}/files/content":                 auth.OpFilesRead,
	"GET /v1/agents/sessions/{id}/files/range":                   auth.OpFilesRead,
	"PUT /v1/agents/sessions/{id}/files/content":                 auth.OpFilesWrite,
	"DELETE /v1/agents/sessions/{id}/files":                      auth.OpFilesWrite,
	"POST /v1/agents/sessions/{id}/uploads":                      auth.OpFilesWrite,
	"GET /v1/agents/sessions/{id}/uploads":                       auth.OpFilesWrite,
	"GET /v1/agents/sessions/{id}/uploads/{upload}":              auth.OpFilesWrite,
	"PUT /v1/agents/sessions/{id}/uploads/{upload}":              auth.OpFilesWrite,
	"POST /v1/agents/sessions/{id}/uploads/{upload}/complete":    auth.OpFilesWrite,
	"DELETE /v1/agents/sessions/{id}/uploads/{upload}":           auth.OpFilesWrite,
	"POST /v1/agents/sessions/{id}/jobs":                         auth.OpJobs,
	"GET /v1/agents/sessions/{id}/jobs":                          auth.OpJobs,
	"GET /v1/agents/sessions/{id}/jobs/{job}":                    auth.OpJobs,
	"POST /v1/agents/sessions/{id}/jobs/{job}/stdin":             auth.OpJobs,
	"DELETE /v1/agents/sessions/{id}/jobs/{job}":                 auth.OpJobs,
	"GET /v1/agents/sessions/{id}/jobs/{job}/stream":             auth.OpJobs,
	"POST /v1/agents/sessions/{id}/grants":                       auth.AccessTenant,
	"GET /v1/agents/sessions/{id}/grants":                        auth.AccessTenant,
	"DELETE /v1/agents/sessions/{id}/grants":                     auth.AccessTenant,
	"DELETE /v1/agents/sessions/{id}/grants/{grant}":             auth.AccessTenant,
	"GET /v1/agents/sessions/{id}/approvals":                     auth.OpRead,
	"POST /v1/agents/sessions/{id}/approvals/{approval}/approve": auth.AccessTenant,
	"POST /v1/agents/sessions/{id}/approvals/{approval}/deny":    auth.AccessTenant,
	"POST /v1/agents/sessions/{id}/tokens":                       auth.AccessTenant,
	"GET /v1/agents/sessions/{id}/tokens":                        auth.AccessTenant,
	"DELETE /v1/agents/sessions/{id}/tokens/{token}":             auth.AccessTenant,
	"POST /v1/agents/sessions/{id}/preview":                      auth.OpPreview,
	"GET /v1/agents/sessions/{id}/previews":                      auth.OpRead,
	"DELETE /v1/agents/sessions/{id}/preview/{preview}":          auth.OpPreview,
	"GET /v1/agents/sessions/{id}/pty":                           auth.AccessTenant,
	"POST /v1/agents/sessions/{id}/pty-ticket":                   auth.AccessTenant,
	"POST /v1/sandboxes":                                         auth.AccessTenant,
	"GET /v1/sandboxes":                                          auth.AccessTenant,
	"GET /v1/sandboxes/{id}":                                     auth.AccessTenant,
	"DELETE /v1/sandboxes/{id}":                                  auth.AccessTenant,
	"POST /v1/sandboxes/{id}/process":                            auth.AccessTenant,
	"POST /v1/sandboxes/{id}/fs/read":                            auth.AccessTenant,
	"POST /v1/sandboxes/{id}/fs/write":                           auth.AccessTenant,
	"GET /v1/admin/policy":                                       auth.AccessAdmin,
	"GET /v1/backends":                                           auth.AccessTenant,
	"GET /v1/whoami":                                             auth.AccessAny,
	"GET /healthz":                                               auth.AccessPublic,
}

// ticketRoutes take a terminal ticket (?ticket=, from POST .../pty-ticket)
// in place of the bearer token, because a browser's WebSocket cannot send
// Authorization. The ticket stands for the admin or tenant who asked for
// it, so the route's access is checked as for them (pty.go).
var ticketRoutes = map[string]bool{ptyRoute: true}

// RouteAccess returns the route table: "METHOD /pattern" → access.
func RouteAccess() map[string]auth.Access { return maps.Clone(routeAccess) }

// accessOf is a route's access; a route missing from the table is the
// admin's only.
func accessOf(pattern string) auth.Access {
	if a, ok := routeAccess[pattern]; ok {
		return a
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
	ctx := auth.WithIdentity(r.Context(), id)
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
