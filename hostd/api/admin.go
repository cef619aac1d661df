package api

import (
	"fmt"
	"net/http"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/policy"
)

// adminRoutes registers the daemon's own routes (the policy's state for
// the admin; the backends for any tenant).
func (s *Server) adminRoutes(bind func(string, handler)) {
	bind("GET /v1/admin/policy", s.policyStatus)
	bind("GET /v1/backends", s.backends)
	bind("POST /v1/policy/compile", s.compilePolicy)
}

// compilePolicy answers what a create with the body's policy would
// record and why it would be refused, creating nothing (the console's
// policy editor). A body that is not a policy is a 400 like a create's.
func (s *Server) compilePolicy(w http.ResponseWriter, r *http.Request) error {
	var req session.PolicyCompileRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.sessions.CompilePolicy(req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// backends lists the backends a create may name in runtime.backend, with
// what each can do on this host.
func (s *Server) backends(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, session.BackendList{Backends: s.sessions.Backends()})
	return nil
}

// policyStatuser is the policy engine as the admin route sees it.
type policyStatuser interface{ Status() policy.Status }

// SetPolicy gives the server the policy engine whose state GET
// /v1/admin/policy shows: the modules in force, and why the last load of
// the operator's modules was refused, if it was.
func (s *Server) SetPolicy(p policyStatuser) { s.policy.Store(&p) }

func (s *Server) policyStatus(w http.ResponseWriter, r *http.Request) error {
	p := s.policy.Load()
	if p == nil || *p == nil {
		return fmt.Errorf("%w: this daemon runs without a policy engine", session.ErrConflict)
	}
	writeJSON(w, http.StatusOK, (*p).Status())
	return nil
}
