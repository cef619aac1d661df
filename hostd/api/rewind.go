package api

import (
	"net/http"

	"paddock.dev/paddock/hostd/rewind"
)

// rewindRoutes binds a session's rewind (hostd/rewind).
func (s *Server) rewindRoutes(bind func(string, handler)) {
	bind("GET /v1/agents/sessions/{id}/rewind", s.getRewind)
	bind("POST /v1/agents/sessions/{id}/rewind/config", s.rewindConfig)
	bind("POST /v1/agents/sessions/{id}/rewind/undo", s.rewindUndo)
	bind("POST /v1/agents/sessions/{id}/rewind/pin", s.rewindPin)
	bind("POST /v1/agents/sessions/{id}/rewind/bisect", s.rewindBisect)
	bind("POST /v1/agents/sessions/{id}/rewind/branch", s.rewindBranch)
}

func (s *Server) getRewind(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Rewind.Get(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) rewindConfig(w http.ResponseWriter, r *http.Request) error {
	var req rewind.ConfigRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Rewind.SetConfig(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) rewindUndo(w http.ResponseWriter, r *http.Request) error {
	var req rewind.UndoRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Rewind.Undo(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) rewindPin(w http.ResponseWriter, r *http.Request) error {
	var req rewind.PinRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Rewind.Pin(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) rewindBisect(w http.ResponseWriter, r *http.Request) error {
	var req rewind.BisectRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Rewind.Bisect(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) rewindBranch(w http.ResponseWriter, r *http.Request) error {
	var req rewind.BranchRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Rewind.Branch(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
