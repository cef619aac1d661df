package api

import (
	"net/http"

	"paddock.dev/paddock/hostd/previews"
)

// previewRoutes binds the routes of a session's preview URLs
// (hostd/previews). The URLs themselves are served under /preview/
// (hostd/previews/proxy.go, put on the mux by SetServices): that path is the
// token's to authorize, so it is not a row of the route table.
func (s *Server) previewRoutes(bind func(string, handler)) {
	bind("POST /v1/agents/sessions/{id}/preview", s.createPreview)
	bind("GET /v1/agents/sessions/{id}/previews", s.listPreviews)
	bind("DELETE /v1/agents/sessions/{id}/preview/{preview}", s.deletePreview)
}

func (s *Server) createPreview(w http.ResponseWriter, r *http.Request) error {
	var req previews.PreviewRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Previews.CreatePreview(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// previewList is the answer of GET .../previews.
type previewList struct {
	Previews []previews.Preview `json:"previews"`
}

func (s *Server) listPreviews(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Previews.Previews(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, previewList{Previews: out})
	return nil
}

func (s *Server) deletePreview(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Previews.DeletePreview(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("preview")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
