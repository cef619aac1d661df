package api

import (
	"fmt"
	"net/http"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/tokens"
)

// tokenRoutes registers session tokens (hostd/tokens) and
// whoami. Minting, listing and revoking need the admin token or the
// session's tenant's (the route table, hostd/api/routes); a session token cannot mint another.
func (s *Server) tokenRoutes(bind func(string, handler)) {
	bind("POST /v1/agents/sessions/{id}/tokens", s.mintToken)
	bind("GET /v1/agents/sessions/{id}/tokens", s.listTokens)
	bind("DELETE /v1/agents/sessions/{id}/tokens/{token}", s.revokeToken)
	bind("GET /v1/whoami", s.whoami)
}

func (s *Server) mintToken(w http.ResponseWriter, r *http.Request) error {
	var req tokens.TokenRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Tokens.Mint(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// tokenList is the answer of GET .../tokens.
type tokenList struct {
	Tokens []tokens.SessionToken `json:"tokens"`
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Tokens.List(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tokenList{Tokens: out})
	return nil
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Tokens.Revoke(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("token")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) error {
	id, ok := auth.FromContext(r.Context())
	if !ok {
		return fmt.Errorf("%w: this call carries no verified caller", errUnauthorized)
	}
	writeJSON(w, http.StatusOK, id.WhoAmI())
	return nil
}
