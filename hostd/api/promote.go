package api

import (
	"net/http"

	apiv1 "paddock.dev/paddock/api"
)

// promote serves POST .../promote: a fork child's workspace changes onto
// its parent (hostd/promote).
func (s *Server) promote(w http.ResponseWriter, r *http.Request) error {
	var req apiv1.PromoteRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Promote.Promote(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
