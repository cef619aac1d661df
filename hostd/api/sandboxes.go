package api

import (
	"fmt"
	"net/http"

	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
)

// sandboxRoutes registers the lower sandbox API (hostd/sandboxes).
func (s *Server) sandboxRoutes(bind func(string, handler)) {
	bind("POST /v1/sandboxes", s.withSandboxes(s.createSandbox))
	bind("GET /v1/sandboxes", s.withSandboxes(s.listSandboxes))
	bind("GET /v1/sandboxes/{id}", s.withSandboxes(s.getSandbox))
	bind("DELETE /v1/sandboxes/{id}", s.withSandboxes(s.deleteSandbox))
	bind("POST /v1/sandboxes/{id}/process", s.withSandboxes(s.sandboxProcess))
	bind("POST /v1/sandboxes/{id}/fs/read", s.withSandboxes(s.sandboxRead))
	bind("POST /v1/sandboxes/{id}/fs/write", s.withSandboxes(s.sandboxWrite))
}

var errNoSandboxes = fmt.Errorf("%w: this daemon has no sandboxes service", session.ErrConflict)

// withSandboxes refuses the sandbox routes (409) on a server given no
// sandboxes service (SetServices).
func (s *Server) withSandboxes(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.svc.Sandboxes == nil {
			return errNoSandboxes
		}
		return h(w, r)
	}
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
	var req sandboxes.SandboxRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Sandboxes.Create(r.Context(), tenant(r), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Sandboxes.List(r.Context(), tenant(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
	return nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Sandboxes.Get(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Sandboxes.Delete(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) sandboxProcess(w http.ResponseWriter, r *http.Request) error {
	var req sandboxes.ProcessRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Sandboxes.Process(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) sandboxRead(w http.ResponseWriter, r *http.Request) error {
	var req sandboxes.SandboxPath
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Sandboxes.ReadFile(r.Context(), tenant(r), r.PathValue("id"), req.Path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) sandboxWrite(w http.ResponseWriter, r *http.Request) error {
	var req sandboxes.SandboxWrite
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Sandboxes.WriteFile(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
