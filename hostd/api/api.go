// Package api is hostd's HTTP surface: the /v1/agents/sessions and
// /v1/sandboxes routes, thin handlers over hostd/session. Errors are
// mapped to status codes in one place (writeError); bodies are
// size-limited and unknown fields are refused.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/api/routes"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
)

// MaxBodyBytes bounds every JSON request body but file writes (each
// route's own limit is its row's BodyLimit in hostd/api/routes).
const MaxBodyBytes = routes.JSONBody

// Server serves the API.
type Server struct {
	routeList []string

	streamMu     sync.Mutex // guards the three below
	streamLimits StreamLimits
	jobStreams   streamCount
	eventStreams streamCount

	idem  idemFlights // Idempotency-Key requests running (idempotency.go)
	reads readFolder  // mcp.read entries of repeated reads (toolaudit.go)

	sessions *session.Manager
	svc      Services // the core's siblings (services.go)
	policy   atomic.Pointer[policyStatuser]
	verifier *auth.Verifier
	log      *slog.Logger
	mux      *http.ServeMux
}

// New returns the API handler. adminTokenHash is the SHA-256 of the admin
// token: the token itself is never kept, and what callers send is hashed
// and compared in constant time. Session tokens are looked up through the
// tokens service (SetServices); tenants are set on Verifier().
func New(m *session.Manager, adminTokenHash [32]byte, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{sessions: m, verifier: auth.NewVerifier(adminTokenHash, nil), log: log, mux: http.NewServeMux(), streamLimits: DefaultStreamLimits}
	s.routes()
	return s
}

// Routes lists the "METHOD /path" patterns served (docs/api/openapi.yaml
// must describe exactly these; a test checks it).
func (s *Server) Routes() []string { return append([]string(nil), s.routeList...) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

type handler func(w http.ResponseWriter, r *http.Request) error

// routes registers every row of the route table (hostd/api/routes) on the
// mux with its handler. A row without a handler, or a handler without a
// row, is a programming error that New panics on, as http.ServeMux does
// on a pattern registered twice (TestRouteTableBound).
func (s *Server) routes() {
	bound, err := bindRoutes(routes.All(), s.handlers())
	if err != nil {
		panic(err)
	}
	for _, rt := range routes.All() {
		s.routeList = append(s.routeList, rt.Pattern)
		s.serve(rt.Pattern, s.routeHandler(rt, bound[rt.Pattern]))
	}
	// Preview URLs (/preview/) are served by the previews service, put
	// on the mux by SetServices: the token in the path is the credential
	// (hostd/previews/proxy.go), so /preview/ is no row of the table.
	s.serve("/", func(w http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("%w: no route %s %s", errNoRoute, r.Method, r.URL.Path)
	})
}

// serve puts h on the mux at pattern, turning what it returns into the
// error answer.
func (s *Server) serve(pattern string, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// handlers are the handlers of the route table's rows, by pattern. Each
// file of this package adds its own.
func (s *Server) handlers() map[string]handler {
	hs := map[string]handler{}
	bind := func(pattern string, h handler) {
		if _, dup := hs[pattern]; dup {
			panic("api: two handlers for " + pattern)
		}
		hs[pattern] = h
	}
	bind("GET /healthz", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
		return nil
	})
	bind("POST /v1/agents/sessions", s.create)
	bind("GET /v1/agents/sessions", s.list)
	bind("GET /v1/agents/sessions/{id}", s.get)
	bind("DELETE /v1/agents/sessions/{id}", s.delete)
	bind("POST /v1/agents/sessions/{id}/exec", s.exec)
	bind("POST /v1/agents/sessions/{id}/exec/stream", s.execStream)
	bind("GET /v1/agents/sessions/{id}/jobs/{job}/stream", s.jobStream)
	bind("POST /v1/agents/sessions/{id}/checkpoint", s.checkpoint)
	bind("POST /v1/agents/sessions/{id}/restore", s.restore)
	bind("POST /v1/agents/sessions/{id}/fork", s.fork)
	bind("GET /v1/agents/sessions/{id}/artifacts", s.artifacts)
	bind("GET /v1/agents/sessions/{id}/events", s.events)
	bind("GET /v1/agents/sessions/{id}/events/stream", s.eventsStream)
	bind("GET /v1/agents/sessions/{id}/trajectory", s.trajectory)
	bind("GET /v1/agents/sessions/{id}/probe", s.probe)
	bind("POST /v1/agents/sessions/{id}/jobs", s.startJob)
	bind("GET /v1/agents/sessions/{id}/jobs", s.listJobs)
	bind("GET /v1/agents/sessions/{id}/jobs/{job}", s.readJob)
	bind("POST /v1/agents/sessions/{id}/jobs/{job}/stdin", s.jobStdin)
	bind("DELETE /v1/agents/sessions/{id}/jobs/{job}", s.killJob)
	s.workspaceRoutes(bind)
	s.grantRoutes(bind)
	s.tokenRoutes(bind)
	s.approvalRoutes(bind)
	s.replayRoutes(bind)
	s.speculateRoutes(bind)
	s.adminRoutes(bind)
	s.sandboxRoutes(bind)
	s.previewRoutes(bind)
	bind("POST /v1/agents/sessions/{id}/promote", s.promote)
	s.ptyRoutes(bind)
	s.rewindRoutes(bind)
	return hs
}

// bindRoutes pairs every row with its handler, and fails on a row without
// one or a handler without a row.
func bindRoutes(rows []routes.Route, hs map[string]handler) (map[string]handler, error) {
	out := make(map[string]handler, len(rows))
	var errs []error
	for _, rt := range rows {
		h, ok := hs[rt.Pattern]
		if !ok || h == nil {
			errs = append(errs, fmt.Errorf("api: route %s (hostd/api/routes) has no handler", rt.Pattern))
			continue
		}
		out[rt.Pattern] = h
	}
	for p := range hs {
		if !slices.ContainsFunc(rows, func(rt routes.Route) bool { return rt.Pattern == p }) {
			errs = append(errs, fmt.Errorf("api: handler for %s has no row in the route table (hostd/api/routes)", p))
		}
	}
	return out, errors.Join(errs...)
}

// routeHandler is what serves a row: for a public route its handler as
// it is; for every other, the caller check of the row's access
// (authorized) in front of the wrapped handler (guarded).
func (s *Server) routeHandler(rt routes.Route, h handler) handler {
	if rt.Access == auth.AccessPublic {
		return h
	}
	return s.authorized(rt.Pattern, s.guarded(rt, h))
}

// guarded wraps a row's handler as the row says: Idempotency-Key replay
// for an idempotent row, sandboxes kept out of the session routes, and a
// call without a caller refused.
func (s *Server) guarded(rt routes.Route, h handler) handler {
	if rt.Idempotent {
		h = s.idempotent(h)
	}
	if strings.HasPrefix(rt.Path(), "/v1/agents/sessions/{id}") {
		h = sessionsOnly(h)
	}
	return requireCaller(h)
}

// authorized verifies the caller and checks it against the route's
// access before h runs, and logs the call.
func (s *Server) authorized(pattern string, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		r, done, err := s.authorize(pattern, r)
		defer done()
		if err != nil {
			return err
		}
		start := time.Now()
		err = revokedDuring(r, h(w, r))
		s.auditToolRead(r, pattern, err)
		s.log.Info("request", append(gatewayIdentity(s.log, r), "method", r.Method, "path", logPath(r), "actor", auth.ActorOf(r.Context()), "duration_ms", time.Since(start).Milliseconds(), "err", errString(err))...)
		return err
	}
}

// requireCaller refuses, with 401, a call whose context carries no
// caller. authorize always puts one there; this holds even if a handler
// is reached some other way, so no handler ever acts for nobody (or, as
// the manager's policy checks once did, for the admin).
func requireCaller(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, ok := auth.FromContext(r.Context()); !ok {
			return fmt.Errorf("%w: this call carries no verified caller", errUnauthorized)
		}
		return h(w, r)
	}
}

var (
	errUnauthorized = auth.ErrUnauthenticated
	errNoRoute      = errdefs.New(errdefs.ErrNotFound, "not found")
	errTooLarge     = errdefs.New(errdefs.ErrTooLarge, "request body too large")
)

// errString is err's text for a log line, without preview tokens or
// terminal tickets.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return session.RedactSecrets(err.Error())
}

// logPath is r's path for a log line, without preview tokens or terminal
// tickets: DELETE .../preview/{preview} may be given a live token. (The
// query, where GET .../pty takes its ticket, is not logged.)
func logPath(r *http.Request) string {
	return session.RedactSecrets(r.URL.Path)
}

// errorBody is the body of every error answer: what went wrong and what
// to fix, and the stable code a client branches on (docs/errors.md).
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// writeError is the one place errors become status codes: the status of
// err's errdefs kind and its code. Refusals that carry more (a held or
// refused command, a budget, a stream cap) add their fields beside them.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if policyError(w, err) || budgetError(w, err) || streamLimitError(w, err) {
		return
	}
	status := errdefs.HTTPStatus(err)
	if status == http.StatusInternalServerError {
		s.log.Error("request failed", "method", r.Method, "path", logPath(r), "err", errString(err))
	}
	writeJSON(w, status, errorBody{Error: err.Error(), Code: errdefs.Code(err)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// decode reads a JSON body (empty means {}), refusing unknown fields and
// bodies over the route's limit (bodyLimit).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeLimit(r, v, bodyLimit(r))
}

// bodyLimit is the largest body the route r came in on takes: its row's
// BodyLimit, or MaxBodyBytes for a request that matched no row.
func bodyLimit(r *http.Request) int64 {
	if rt, ok := routes.Lookup(r.Pattern); ok {
		return rt.BodyLimit
	}
	return MaxBodyBytes
}

func decodeLimit(r *http.Request, v any, limit int64) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return fmt.Errorf("%w: reading the body: %v", session.ErrBadRequest, err)
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("%w: more than %d bytes", errTooLarge, limit)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: invalid JSON body: %v", session.ErrBadRequest, err)
	}
	return nil
}

// revision reads If-Match: a revision number, or * / absent for any.
func revision(r *http.Request) (int64, error) {
	v := strings.Trim(r.Header.Get("If-Match"), `" `)
	if v == "" || v == "*" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: If-Match %q must be a revision number or *", session.ErrBadRequest, v)
	}
	return n, nil
}

// tenant is the tenant the caller sees sessions as: "" (all of them) for
// the admin, its own for a tenant token, the session's for a session
// token (auth.Identity.Scope).
func tenant(r *http.Request) string {
	id, ok := auth.FromContext(r.Context())
	if !ok {
		return noTenant
	}
	return id.Scope()
}

// noTenant is no tenant's name: a call that somehow carries no caller sees
// no session rather than every one.
const noTenant = "-"

func (s *Server) create(w http.ResponseWriter, r *http.Request) error {
	var req session.CreateRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.sessions.Create(r.Context(), tenant(r), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) error {
	all, err := queryBool(r, "include_deleted")
	if err != nil {
		return err
	}
	out, err := s.sessions.List(r.Context(), tenant(r), all)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
	return nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) error {
	out, err := s.sessions.Get(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) error {
	rev, err := revision(r)
	if err != nil {
		return err
	}
	if err := s.sessions.DeleteIfMatch(r.Context(), tenant(r), r.PathValue("id"), rev); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) error {
	var req session.ExecRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.sessions.Exec(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) error {
	var req session.CheckpointRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	rev, err := revision(r)
	if err != nil {
		return err
	}
	out, err := s.sessions.Checkpoint(r.Context(), tenant(r), r.PathValue("id"), rev, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) restore(w http.ResponseWriter, r *http.Request) error {
	var req session.RestoreRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	rev, err := revision(r)
	if err != nil {
		return err
	}
	out, err := s.sessions.Restore(r.Context(), tenant(r), r.PathValue("id"), rev, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) error {
	var req session.ForkRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	rev, err := revision(r)
	if err != nil {
		return err
	}
	out, err := s.sessions.ForkDetail(r.Context(), tenant(r), r.PathValue("id"), rev, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) artifacts(w http.ResponseWriter, r *http.Request) error {
	out, err := s.sessions.Artifacts(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	since, err := querySince(r)
	if err != nil {
		return err
	}
	q := session.EventsQuery{Since: since}
	var n int64
	if n, err = queryInt(r, "tail", 0, 1, session.MaxEventsPage); err != nil {
		return err
	}
	q.Tail = int(n)
	if n, err = queryInt(r, "limit", 0, 1, session.MaxEventsPage); err != nil {
		return err
	}
	q.Limit = int(n)
	if q.After, err = queryInt(r, "after", 0, 0, math.MaxInt64); err != nil {
		return err
	}
	out, err := s.sessions.EventsPage(r.Context(), tenant(r), r.PathValue("id"), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// querySince reads ?since= (RFC 3339; absent: the zero time).
func querySince(r *http.Request) (time.Time, error) {
	v := r.URL.Query().Get("since")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || len(v) > 64 {
		return time.Time{}, fmt.Errorf("%w: since=%q must be an RFC 3339 time, such as 2026-01-02T15:04:05Z", session.ErrBadRequest, session.ClipText(v, 64))
	}
	return t, nil
}

func queryInt(r *http.Request, name string, def, min, max int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		return 0, fmt.Errorf("%w: %s=%q must be a number from %d to %d", session.ErrBadRequest, name, v, min, max)
	}
	return n, nil
}

func queryBool(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, fmt.Errorf("%w: %s=%q must be true or false", session.ErrBadRequest, name, v)
	}
}

func (s *Server) startJob(w http.ResponseWriter, r *http.Request) error {
	var req session.JobStart
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.sessions.StartJob(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	out, err := s.sessions.Jobs(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out})
	return nil
}

func (s *Server) readJob(w http.ResponseWriter, r *http.Request) error {
	off, err := queryInt(r, "offset", 0, 0, 1<<40)
	if err != nil {
		return err
	}
	eoff, err := queryInt(r, "stderr_offset", 0, 0, 1<<40)
	if err != nil {
		return err
	}
	wait, err := queryInt(r, "wait_ms", 0, 0, 25000)
	if err != nil {
		return err
	}
	out, err := s.sessions.ReadJob(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("job"), off, eoff, time.Duration(wait)*time.Millisecond)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) jobStdin(w http.ResponseWriter, r *http.Request) error {
	var req session.JobStdin
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.sessions.WriteJobStdin(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("job"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) killJob(w http.ResponseWriter, r *http.Request) error {
	sig := r.URL.Query().Get("signal")
	if sig == "" {
		sig = "TERM"
	}
	out, err := s.sessions.SignalJob(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("job"), sig)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) probe(w http.ResponseWriter, r *http.Request) error {
	out, err := s.sessions.Probe(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) trajectory(w http.ResponseWriter, r *http.Request) error {
	out, err := s.sessions.Trajectory(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
