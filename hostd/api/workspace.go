package api

import (
	"fmt"
	"io"
	"net/http"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/workspace"
)

// workspaceRoutes binds the routes of a session's workspace
// (hostd/workspace): files, resumable uploads and the git verbs.
func (s *Server) workspaceRoutes(bind func(string, handler)) {
	bind("GET /v1/agents/sessions/{id}/git/status", s.gitStatus)
	bind("GET /v1/agents/sessions/{id}/git/diff", s.gitDiff)
	bind("GET /v1/agents/sessions/{id}/git/log", s.gitLog)
	bind("POST /v1/agents/sessions/{id}/git/commit", s.gitCommit)
	bind("POST /v1/agents/sessions/{id}/git/branch", s.gitBranch)
	bind("POST /v1/agents/sessions/{id}/uploads", s.openUpload)
	bind("GET /v1/agents/sessions/{id}/uploads", s.listUploads)
	bind("GET /v1/agents/sessions/{id}/uploads/{upload}", s.getUpload)
	bind("PUT /v1/agents/sessions/{id}/uploads/{upload}", s.uploadChunk)
	bind("POST /v1/agents/sessions/{id}/uploads/{upload}/complete", s.completeUpload)
	bind("DELETE /v1/agents/sessions/{id}/uploads/{upload}", s.abortUpload)
	bind("GET /v1/agents/sessions/{id}/files", s.listFiles)
	bind("DELETE /v1/agents/sessions/{id}/files", s.deleteFile)
	bind("GET /v1/agents/sessions/{id}/files/content", s.readFile)
	bind("PUT /v1/agents/sessions/{id}/files/content", s.writeFile)
	bind("GET /v1/agents/sessions/{id}/files/range", s.readRange)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Workspace.ListFiles(r.Context(), tenant(r), r.PathValue("id"), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Workspace.ReadFile(r.Context(), tenant(r), r.PathValue("id"), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) error {
	var req workspace.FileWrite
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Workspace.WriteFile(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) error {
	rec, err := queryBool(r, "recursive")
	if err != nil {
		return err
	}
	if err := s.svc.Workspace.DeleteFile(r.Context(), tenant(r), r.PathValue("id"), r.URL.Query().Get("path"), rec); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) readRange(w http.ResponseWriter, r *http.Request) error {
	off, err := queryInt(r, "offset", 0, 0, 1<<40)
	if err != nil {
		return err
	}
	n, err := queryInt(r, "length", 4<<20, 1, 4<<20)
	if err != nil {
		return err
	}
	sum, err := queryBool(r, "checksum")
	if err != nil {
		return err
	}
	out, err := s.svc.Workspace.ReadRange(r.Context(), tenant(r), r.PathValue("id"), r.URL.Query().Get("path"), off, n, sum)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) openUpload(w http.ResponseWriter, r *http.Request) error {
	var req workspace.UploadRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Workspace.OpenUpload(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) listUploads(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Workspace.ListUploads(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"uploads": out})
	return nil
}

func (s *Server) getUpload(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Workspace.GetUpload(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("upload"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) uploadChunk(w http.ResponseWriter, r *http.Request) error {
	if r.URL.Query().Get("offset") == "" {
		return fmt.Errorf("%w: offset= is required", session.ErrBadRequest)
	}
	off, err := queryInt(r, "offset", 0, 0, workspace.MaxUploadBytes)
	if err != nil {
		return err
	}
	limit := bodyLimit(r)
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return fmt.Errorf("%w: reading the chunk: %v", session.ErrBadRequest, err)
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("%w: a chunk is at most %d bytes", errTooLarge, limit)
	}
	out, err := s.svc.Workspace.UploadChunk(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("upload"), off, data)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) completeUpload(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Workspace.CompleteUpload(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("upload"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) abortUpload(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Workspace.AbortUpload(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("upload")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) gitStatus(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Workspace.GitStatus(r.Context(), tenant(r), r.PathValue("id"), r.URL.Query().Get("repo"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) gitDiff(w http.ResponseWriter, r *http.Request) error {
	staged, err := queryBool(r, "staged")
	if err != nil {
		return err
	}
	out, err := s.svc.Workspace.GitDiff(r.Context(), tenant(r), r.PathValue("id"), r.URL.Query().Get("repo"), r.URL.Query().Get("path"), staged)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) gitLog(w http.ResponseWriter, r *http.Request) error {
	n, err := queryInt(r, "n", 10, 1, workspace.MaxGitLog)
	if err != nil {
		return err
	}
	out, err := s.svc.Workspace.GitLog(r.Context(), tenant(r), r.PathValue("id"), r.URL.Query().Get("repo"), int(n))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) gitCommit(w http.ResponseWriter, r *http.Request) error {
	var req workspace.GitRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Workspace.GitCommit(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) gitBranch(w http.ResponseWriter, r *http.Request) error {
	var req workspace.GitRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Workspace.GitBranch(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
