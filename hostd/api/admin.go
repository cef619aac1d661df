package api

import (
	"fmt"
	"net/http"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/policy"
)

// adminRoutes registers the daemon's own routes (the policy's state for
// the admin; the backends for any tenant).
func (s *Server) adminRoutes(bind func(string, handler)) {
	bind("GET /v1/admin/policy", s.policyStatus)
	bind("GET /v1/backends", s.backends)
	bind("POST /v1/policy/compile", s.compilePolicy)
	bind("GET /v1/admin/tenants", s.tenants)
}

// tenants lists the tenants file's tenants with their limits and how many
// sessions each has, for the admin (no token hash is shown).
func (s *Server) tenants(w http.ResponseWriter, r *http.Request) error {
	all, err := s.sessions.List(r.Context(), "", false)
	if err != nil {
		return err
	}
	count := map[string]int{}
	for _, x := range all {
		count[x.Tenant]++
	}
	ts := s.verifier.Tenants()
	out := apiv1.TenantList{Tenants: []apiv1.TenantInfo{}}
	for _, n := range ts.Names() {
		l := ts.LimitsOf(n)
		out.Tenants = append(out.Tenants, apiv1.TenantInfo{Name: n, Sessions: count[n],
			Limits: apiv1.TenantLimits{DiskMB: l.DiskMB, MemoryMB: l.MemoryMB, CPUs: l.CPUs}})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
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
