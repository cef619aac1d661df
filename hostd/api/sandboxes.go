package api

import (
	"net/http"

	"paddock.dev/paddock/hostd/session"
)

// sandboxRoutes registers the lower sandbox API (hostd/session/sandbox.go).
func (s *Server) sandboxRoutes(bind func(string, handler)) {
	bind("POST /v1/sandboxes", s.createSandbox)
	bind("GET /v1/sandboxes", s.listSandboxes)
	bind("GET /v1/sandboxes/{id}", s.getSandbox)
	bind("DELETE /v1/sandboxes/{id}", s.deleteSandbox)
	bind("POST /v1/sandboxes/{id}/process", s.sandboxProcess)
	bind("POST /v1/sandboxes/{id}/fs/read", s.sandboxRead)
	bind("POST /v1/sandboxes/{id}/fs/write", s.sandboxWrite)
}

// sessionsOnly keeps sandboxes out of the session routes: a sandbox's id
// there is 404, so no session verb (checkpoint, fork, git, …) reaches one.
func sessionsOnly(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if id := r.PathValue("id"); session.IsSandboxID(id) {
			return session.NotSession(id)
		}
		return h(w, r)
	}
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	var req session.SandboxRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.sessions.CreateSandbox(r.Context(), tenant(r), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	out, err := s.sessions.ListSandboxes(r.Context(), tenant(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
	return nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	out, err := s.sessions.GetSandbox(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) error {
	if err := s.sessions.DeleteSandbox(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) sandboxProcess(w http.ResponseWriter, r *http.Request) error {
	var req session.ProcessRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.sessions.SandboxProcess(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) sandboxRead(w http.ResponseWriter, r *http.Request) error {
	var req session.SandboxPath
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.sessions.SandboxReadFile(r.Context(), tenant(r), r.PathValue("id"), req.Path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) sandboxWrite(w http.ResponseWriter, r *http.Request) error {
	var req session.SandboxWrite
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.sessions.SandboxWriteFile(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
