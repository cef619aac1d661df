package api

import (
	"net/http"

	"paddock.dev/paddock/hostd/grants"
)

// maxGrantBody bounds POST .../grants: a value of at most 8 KiB (JSON
// escaping can grow it sixfold) and the hosts, methods and paths.
const maxGrantBody = 6*grants.MaxGrantValueBytes + 64<<10

// grantRoutes registers the credential grants of a session
// (hostd/grants).
func (s *Server) grantRoutes(bind func(string, handler)) {
	bind("POST /v1/agents/sessions/{id}/grants", s.createGrant)
	bind("GET /v1/agents/sessions/{id}/grants", s.listGrants)
	bind("DELETE /v1/agents/sessions/{id}/grants", s.revokeGrants)
	bind("DELETE /v1/agents/sessions/{id}/grants/{grant}", s.revokeGrant)
}

func (s *Server) createGrant(w http.ResponseWriter, r *http.Request) error {
	var req grants.GrantRequest
	if err := decodeLimit(r, &req, maxGrantBody); err != nil {
		return err
	}
	out, err := s.svc.Grants.Grant(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Grants.Grants(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": out})
	return nil
}

func (s *Server) revokeGrants(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Grants.Ungrant(r.Context(), tenant(r), r.PathValue("id"), ""); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Grants.Ungrant(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("grant")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
